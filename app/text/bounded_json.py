"""JSON from outside (an API body, a task file's line) read within limits, every refusal naming the field.

Python's `json` reads NaN, Infinity and 1e999 as floats no JSON schema allows, and a document nested a few
thousand deep raises RecursionError. Here a non-finite number is refused where it stands
(`messages[0].temperature`), and nesting past MAX_DEPTH too, found without recursion where the parser's own
recursion gave up.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MAX_DEPTH = 64  # levels of objects and arrays: a chat request or a task uses a handful, a JSON schema a dozen
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},:]')


class JsonLimitError(ValueError):
    """JSON this reader refuses: `field` names where (`a.b[2]`, "" for the document itself)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{self.shorten(field) or 'the document'}: {problem}")
        self.field, self.problem = field, problem

    @staticmethod
    def shorten(field: str, most: int = 48) -> str:
        """A field's name for a message: a deep one's middle left out (`a[0][0][0]…[0][0]`)."""
        if len(field) <= most:
            return field
        head, tail = field[: most // 2], field[-most // 3 :]
        head = head[: max(head.rfind("["), head.rfind("."), 1)]
        tail = tail[min((n for n in (tail.find("["), tail.find(".")) if n >= 0), default=0) :]
        return f"{head}…{tail}"


@dataclass(frozen=True)
class _NonFinite:
    """A number JSON cannot hold, as it was written (NaN, -Infinity, 1e999)."""

    written: str


_LOOKED = frozenset({dict, list, _NonFinite})  # what the walk looks into: json.loads makes no subclasses


def _number(text: str) -> float | _NonFinite:
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(text)


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> object:
    """The JSON value in `text`. JSONDecodeError for what is not JSON; JsonLimitError for a non-finite number
    or nesting deeper than `max_depth`; ValueError for an integer too long for Python to read."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    try:
        value = json.loads(text, parse_constant=_NonFinite, parse_float=_number)
    except RecursionError:
        raise JsonLimitError(_deep_field(text, max_depth), f"nested more than {max_depth} levels deep") from None
    if value.__class__ in _LOOKED:
        _check(value, max_depth)
    return value


# Where a value sits, as a chain from the innermost key (or index) out: built into a name only for an error.
_Trail = tuple[object, "_Trail"] | None


def _check(value: object, max_depth: int) -> None:
    """Walk the containers (never recursing) for a non-finite number or nesting past `max_depth`."""
    pending: list[tuple[object, int, _Trail]] = [(value, 0, None)]
    while pending:
        current, depth, trail = pending.pop()
        if isinstance(current, _NonFinite):
            raise JsonLimitError(_name(trail), f"{current.written} is not a number JSON allows; give a finite number")
        if depth == max_depth:
            raise JsonLimitError(_name(trail), f"nested more than {max_depth} levels deep")
        assert isinstance(current, dict | list)
        items: Iterable[tuple[object, object]] = current.items() if isinstance(current, dict) else enumerate(current)
        inner = [(child, depth + 1, (key, trail)) for key, child in items if child.__class__ in _LOOKED]
        pending += reversed(inner)  # document order: the first problem written is the one named


def _name(trail: _Trail) -> str:
    parts: list[object] = []
    while trail is not None:
        parts.append(trail[0])
        trail = trail[1]
    return _written(parts[::-1])


def _deep_field(text: str, max_depth: int) -> str:
    """Where the text first nests deeper than `max_depth`, read token by token (no recursion)."""
    path: list[str | int] = []  # per open container: its key (object) or index (array)
    keys: list[str | None] = []  # per open object: the last key read; None for an array
    last: str | None = None
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            if path and keys[-1] is not None:
                path[-1] = keys[-1] or ""
            if len(path) >= max_depth:
                return _written(path)
            path.append(0)
            keys.append("" if token == "{" else None)
        elif token in "]}":
            if path:
                path.pop()
                keys.pop()
        elif token == ",":
            if path and keys[-1] is None:
                path[-1] = int(path[-1]) + 1
        elif token == ":":
            if keys and keys[-1] is not None and last is not None:
                keys[-1] = last
        else:
            last = json.loads(token)
    return _written(path)


def _written(path: Sequence[object]) -> str:
    field = ""
    for part in path:
        field += f"[{part}]" if isinstance(part, int) else (f".{part}" if field else str(part))
    return field
