"""YAML loading that remembers where each key and item came from, so errors can name a line.

The document is read within limits before any object is built: anchors and aliases can make a few lines
stand for billions of values (each alias repeats what its anchor names, and copying them out of the YAML
would take every byte of memory), and nesting thousands deep overflows the parser's recursion. The events
of the document are counted first, without recursion, as if every alias were written out in full.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

MAX_DEPTH = 64  # levels of nesting: a config uses a handful, a JSON schema in extra_body a dozen or two
MAX_VALUES = 100_000  # values in the document with every alias written out: a large config holds a few thousand


class PositionedDict(dict[object, object]):
    """A mapping from YAML that knows the line of each of its keys (1-based)."""

    line: int = 0
    key_lines: dict[object, int]

    def line_of(self, key: object) -> int:
        return self.key_lines.get(key, self.line)


class PositionedList(list[object]):
    """A sequence from YAML that knows the line of each of its items (1-based)."""

    line: int = 0
    item_lines: list[int]

    def line_of(self, index: int) -> int:
        return self.item_lines[index] if 0 <= index < len(self.item_lines) else self.line


# PyYAML ships no type information (mypy sees its classes as Any), hence the ignores on the two subclasses.
class _PositionLoader(yaml.SafeLoader):  # type: ignore[misc]
    """Pure Python: slower, but its errors say more ("found character '\\t' that cannot start any token")."""


class _FastPositionLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's parser where PyYAML has it: several times faster than the pure-Python one at start-up."""


def _construct_mapping(loader: _PositionLoader, node: yaml.MappingNode) -> PositionedDict:
    loader.flatten_mapping(node)
    result = PositionedDict()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = key_node.start_mark.line + 1
    return result


def _construct_sequence(loader: _PositionLoader, node: yaml.SequenceNode) -> PositionedList:
    result = PositionedList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.item_lines = [child.start_mark.line + 1 for child in node.value]
    return result


for _loader in (_PositionLoader, _FastPositionLoader):
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


class YamlSyntaxError(Exception):
    def __init__(self, path: Path | str, line: int | None, column: int | None, problem: str) -> None:
        self.path, self.line, self.column, self.problem = str(path), line, column, problem
        where = f"{path}:{line}:{column}" if line is not None else str(path)
        super().__init__(f"{where}: invalid YAML: {problem}")


class YamlLimitError(YamlSyntaxError):
    """A document past MAX_DEPTH or MAX_VALUES: refused before it is built. `limit` says the most read."""

    def __init__(self, path: Path | str, mark: yaml.Mark, problem: str, limit: str) -> None:
        super().__init__(path, mark.line + 1, mark.column + 1, problem)
        self.limit = limit


@dataclass
class _Open:
    """A collection whose end has not been read yet: its values so far, the deepest nesting below it."""

    anchor: str | None
    values: int = 1
    height: int = 0


def _within_limits(text: str, path: Path | str, loader: type) -> None:
    """Raise YamlLimitError where the document, read as events, nests deeper than MAX_DEPTH or holds more
    than MAX_VALUES values once its aliases are written out. Iterative: no nesting can overflow it."""
    open_: list[_Open] = []
    anchored: dict[str, tuple[int, int]] = {}  # anchor -> (values, nesting) of what it names
    total = 0

    def closed(values: int, height: int, anchor: str | None) -> None:
        if anchor is not None:
            anchored[anchor] = (values, height)
        if open_:
            open_[-1].values += values
            open_[-1].height = max(open_[-1].height, height + 1)

    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionEndEvent):
            done = open_.pop()
            closed(done.values, done.height, done.anchor)
            continue
        if isinstance(event, yaml.AliasEvent):
            values, height = anchored.get(event.anchor, (1, 0))  # an unknown anchor: the composer's error
            depth = len(open_) + height
            closed(values, height, None)
        elif isinstance(event, yaml.ScalarEvent):
            values, depth = 1, len(open_)
            closed(1, 0, event.anchor)
        elif isinstance(event, yaml.CollectionStartEvent):
            values = 1
            open_.append(_Open(event.anchor))
            depth = len(open_)
        else:
            continue
        total += values
        mark = event.start_mark
        if depth > MAX_DEPTH:
            raise YamlLimitError(path, mark, f"nested more than {MAX_DEPTH} levels deep", f"{MAX_DEPTH} levels")
        if total > MAX_VALUES:
            problem = f"more than {MAX_VALUES:,} values once each alias (*name) is written out"
            raise YamlLimitError(path, mark, problem, f"{MAX_VALUES:,} values")


def _unclosed_quote(exc: yaml.MarkedYAMLError) -> bool:
    return bool(
        exc.context == "while scanning a quoted scalar"
        and exc.context_mark is not None
        and exc.problem
        and "end of stream" in exc.problem
    )


def load_yaml(text: str, path: Path | str) -> object:
    """Parse YAML text; syntax errors name the file, line and column."""
    try:
        _within_limits(text, path, _FastPositionLoader)
        return yaml.load(text, Loader=_FastPositionLoader)
    except yaml.YAMLError:
        pass  # parsed again below, for the pure-Python parser's clearer message
    try:
        _within_limits(text, path, _PositionLoader)
        return yaml.load(text, Loader=_PositionLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(part for part in (exc.context, exc.problem) if part) or "cannot parse"
        if _unclosed_quote(exc):
            # PyYAML's problem mark is the end of the file; the mistake is where the quote opens.
            mark = exc.context_mark
            quote = text[mark.index] if 0 <= mark.index < len(text) else '"'
            problem = f"the quoted string opened here ({quote}) is never closed: the file ends inside it"
        if mark is None:
            raise YamlSyntaxError(path, None, None, problem) from exc
        raise YamlSyntaxError(path, mark.line + 1, mark.column + 1, problem) from exc
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(path, None, None, str(exc)) from exc
