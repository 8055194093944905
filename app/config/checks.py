"""Checks on values read from YAML that fail with a ConfigError naming the file, the line and the key.

Each check returns the value it has checked, typed, so the section parsers build the model from what
passed rather than from the raw YAML.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from .model import ConfigError, did_you_mean
from .yaml_positions import (
    PositionedDict,
    PositionedList,
    YamlLimitError,
    YamlSyntaxError,
    load_yaml,
)

Choice = TypeVar("Choice", bound=str)
Parsed = TypeVar("Parsed")

# Upper bounds for numeric settings. A value beyond them cannot be meant, and some fail only later, in every
# turn (a time limit of 1e10 s overflows the platform's clock: "timestamp out of range for platform time_t").
SECONDS_AT_MOST = 86_400.0  # a day: time limits, waits, deadlines
RETRIES_AT_MOST = 100
MAX_TOKENS_AT_MOST = 10_000_000
WINDOW_AT_MOST = 100_000_000  # tokens in a context window (the largest models read about ten million)
WORKERS_AT_MOST = 256
SAMPLES_AT_MOST = 64
LAYERS_AT_MOST = 16
QUORUM_AT_MOST = 1_000
ITERATIONS_AT_MOST = 10_000
DOLLARS_AT_MOST = 1_000_000.0  # a turn's cost limit, and a price per million tokens

# A mapping as read from YAML: its keys are whatever the file wrote (text, numbers, true/false...).
YamlMapping = dict[object, object]


def parse_yaml(text: str, path: Path | str) -> object:
    """The YAML document in `text`; a syntax error becomes a ConfigError with the line and column."""
    try:
        return load_yaml(text, path)
    except YamlLimitError as exc:
        raise ConfigError(
            f"{exc.problem} (column {exc.column}): moa-chat reads at most {exc.limit}; nothing of this file was used",
            path=path,
            line=exc.line,
        ) from exc
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
        self.errors: list[ConfigError] = []  # kept by `collect`, so that one load reports every mistake

    def collect(self, parse: Callable[[], Parsed]) -> Parsed | None:
        """`parse()`, or None with its ConfigError kept for `raise_collected`."""
        try:
            return parse()
        except ConfigError as exc:
            self.errors.extend(exc.errors)
            return None

    def raise_collected(self) -> None:
        """Raise one ConfigError naming every problem kept so far, if there is any."""
        if self.errors:
            raise ConfigError.of_all(self.errors)

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
        self,
        value: object,
        parent: object,
        key: str,
        what: str,
        *,
        minimum: float = 0.0,
        maximum: float | None = None,
        at_most: float | None = None,
        unit: str = "",
    ) -> float | None:
        """`value` if it is a finite number within the bounds (kept as written: an int stays an int), or None.

        `maximum` is a range's natural end ("between 0.0 and 2.0"); `at_most` a ceiling past which a value
        cannot be meant ("a number >= 0 (at most 86400 seconds)")."""
        if value is None:
            return None
        ceiling = maximum if maximum is not None else at_most
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < minimum
            or (ceiling is not None and value > ceiling)
        ):
            if maximum is not None:
                bound = f"between {minimum} and {maximum}"
            else:
                bound = f"a number >= {minimum}" + (f" (at most {_plain(at_most)}{unit})" if at_most else "")
            raise self.error(parent, f"{what}: {key} must be {bound}, not {value!r}", key)
        return value

    def whole_number(
        self, value: object, parent: object, key: str, what: str = "", *, minimum: int = 1, at_most: int | None = None
    ) -> int | None:
        """`value` if it is a whole number from `minimum` to `at_most`, or None."""
        if value is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or value < minimum
            or (at_most is not None and value > at_most)
        ):
            prefix = f"{what}: " if what else ""
            ceiling = f" (at most {at_most:,})" if at_most is not None else ""
            raise self.error(parent, f"{prefix}{key} must be a whole number >= {minimum}{ceiling}, not {value!r}", key)
        return value

    def whole_number_or(
        self,
        default: int,
        value: object,
        parent: object,
        key: str,
        what: str = "",
        *,
        minimum: int = 1,
        at_most: int | None = None,
    ) -> int:
        """Like whole_number; a setting left out, or written as `null`, takes `default`."""
        checked = self.whole_number(value, parent, key, what, minimum=minimum, at_most=at_most)
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


def _plain(number: float) -> str:
    """86400.0 as 86,400; 0.5 as 0.5."""
    return f"{number:,.0f}" if float(number).is_integer() else f"{number:,}"


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
