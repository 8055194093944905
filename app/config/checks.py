"""Checks on values read from YAML that fail with a ConfigError naming the file, the line and the key.

Each check returns the value it has checked, typed, so the section parsers build the model from what
passed rather than from the raw YAML.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

from .model import ConfigError, did_you_mean
from .yaml_positions import PositionedDict, PositionedList, YamlSyntaxError, load_yaml

Choice = TypeVar("Choice", bound=str)

# A mapping as read from YAML: its keys are whatever the file wrote (text, numbers, true/false...).
YamlMapping = dict[object, object]


def parse_yaml(text: str, path: Path | str) -> object:
    """The YAML document in `text`; a syntax error becomes a ConfigError with the line and column."""
    try:
        return load_yaml(text, path)
    except YamlSyntaxError as exc:
        raise ConfigError(
            f"invalid YAML at line {exc.line}, column {exc.column}: {exc.problem}"
            if exc.line
            else f"invalid YAML: {exc.problem}",
            path=path,
            line=exc.line,
        ) from exc


class Checker:
    """Where we are in which file, so every error can say file, line and key."""

    def __init__(self, path: Path | str) -> None:
        self.path = path

    def error(self, parent: object, message: str, key: object = None) -> ConfigError:
        line = None
        if isinstance(parent, PositionedDict):
            line = parent.line_of(key) if key is not None else parent.line
        elif isinstance(parent, PositionedList):
            line = parent.line_of(key) if isinstance(key, int) else parent.line
        return ConfigError(message, path=self.path, line=line)

    def mapping(self, value: object, what: str, parent: object, key: object) -> YamlMapping:
        if not isinstance(value, dict):
            raise self.error(parent, f"{what} must be a mapping (key: value lines), not {kind(value)}", key)
        return value

    def check_keys(self, body: YamlMapping, allowed: Iterable[str], what: str) -> None:
        allowed = tuple(allowed)
        for key in body:
            if key not in allowed:
                raise self.error(
                    body,
                    f"{what}: unknown key {key!r}{did_you_mean(str(key), allowed)}; known keys: {', '.join(allowed)}",
                    key,
                )

    def number(
        self, value: object, parent: object, key: str, what: str, *, minimum: float = 0.0, maximum: float | None = None
    ) -> float | None:
        """`value` if it is a finite number within the bounds (kept as written: an int stays an int), or None."""
        if value is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < minimum
            or (maximum is not None and value > maximum)
        ):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f"a number >= {minimum}"
            raise self.error(parent, f"{what}: {key} must be {bound}, not {value!r}", key)
        return value

    def whole_number(self, value: object, parent: object, key: str, what: str = "", *, minimum: int = 1) -> int | None:
        """`value` if it is a whole number >= `minimum`, or None."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            prefix = f"{what}: " if what else ""
            raise self.error(parent, f"{prefix}{key} must be a whole number >= {minimum}, not {value!r}", key)
        return value

    def whole_number_or(
        self, default: int, value: object, parent: object, key: str, what: str = "", *, minimum: int = 1
    ) -> int:
        """Like whole_number; a setting left out, or written as `null`, takes `default`."""
        checked = self.whole_number(value, parent, key, what, minimum=minimum)
        return default if checked is None else checked

    def flag(self, value: object, parent: YamlMapping, key: str, what: str = "") -> bool:
        if not isinstance(value, bool):
            prefix = f"{what}: " if what else ""
            raise self.error(parent, f"{prefix}{key} must be true or false", key)
        return value


def choice(value: object, options: tuple[Choice, ...]) -> Choice | None:
    """The option `value` equals (typed as the option), or None if it is none of them."""
    for option in options:
        if isinstance(value, str) and value == option:
            return option
    return None


def plain(value: object) -> object:
    """Positioned YAML containers back to plain dicts and lists (they are sent on the wire)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def kind(value: object) -> str:
    """What a YAML value is, in words, for an error that says what was found instead."""
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, str):
        return f"the text {value!r}"
    return f"the value {value!r}"
