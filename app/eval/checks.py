"""How a task's answer is checked: normalised exact match, regex, contains, multiple choice, or a number.

Each checker states the answer format it asks for (`render`: "end your reply with `ANSWER: X`"), reads a
reply (`read`: the answer and how it was found, or why it could not be; answers.py), scores it, and
`extract`s the answer for an adaptive panel (`layers: auto`), which compares its references' answers to see
whether they already agree. A reply whose answer cannot be read is wrong, and counted as unreadable.
"""

from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass
from typing import ClassVar, Protocol

from .answers import Reading, normalise, parse_number, read_choice, read_number, read_text

LETTERS = string.ascii_uppercase
__all__ = ["LETTERS", "Check", "Choice", "Contains", "Expected", "Number", "Regex", "normalise", "parse_number"]


class Check(Protocol):
    @property
    def kind(self) -> str: ...

    def read(self, answer: str) -> Reading: ...

    def extract(self, answer: str) -> str | None: ...

    def score(self, answer: str) -> bool: ...

    def describe(self) -> str: ...

    def render(self, prompt: str) -> str: ...


def format_line(what: str) -> str:
    """The line a check adds after the prompt: the answer format it reads first."""
    return f'End your reply with a line of the form "ANSWER: {what}".'


@dataclass(frozen=True)
class Expected:
    """The reply, or its stated answer, equals `value` once both are normalised."""

    value: str
    kind: ClassVar[str] = "expected"

    def read(self, answer: str) -> Reading:
        if answer.strip() and normalise(answer) == normalise(self.value):
            return Reading(normalise(answer), "the whole reply")
        return read_text(answer)

    def extract(self, answer: str) -> str | None:
        return self.read(answer).value

    def score(self, answer: str) -> bool:
        return self.extract(answer) == normalise(self.value)

    def describe(self) -> str:
        return f"expected {self.value!r}"

    def render(self, prompt: str) -> str:
        return f"{prompt}\n\n{format_line('<your final answer alone>')}"


@dataclass(frozen=True)
class Regex:
    """The reply matches `pattern` somewhere (re.search, case-sensitive unless the pattern says (?i))."""

    pattern: str
    kind: ClassVar[str] = "regex"

    def read(self, answer: str) -> Reading:
        match = re.search(self.pattern, answer)
        return Reading(match.group(0), "the first match") if match else Reading(None, "no match")

    def extract(self, answer: str) -> str | None:
        return self.read(answer).value

    def score(self, answer: str) -> bool:
        return self.extract(answer) is not None

    def describe(self) -> str:
        return f"regex /{self.pattern}/"

    def render(self, prompt: str) -> str:
        return prompt


@dataclass(frozen=True)
class Contains:
    """The reply contains every one of `values`, compared normalised."""

    values: tuple[str, ...]
    kind: ClassVar[str] = "contains"

    def read(self, answer: str) -> Reading:
        text = normalise(answer)
        found = [v for v in self.values if normalise(v) in text]
        joined = " | ".join(sorted(normalise(v) for v in found))
        return Reading(joined, "the values found") if found else Reading(None, "none found")

    def extract(self, answer: str) -> str | None:
        return self.read(answer).value

    def score(self, answer: str) -> bool:
        text = normalise(answer)
        return all(normalise(v) in text for v in self.values)

    def describe(self) -> str:
        return "contains " + ", ".join(repr(v) for v in self.values)

    def render(self, prompt: str) -> str:
        return prompt


@dataclass(frozen=True)
class Choice:
    """Multiple choice: the letter of the chosen option (answers.read_choice)."""

    choices: tuple[str, ...]
    answer: str  # a letter (A, B, ...)
    kind: ClassVar[str] = "choice"

    @property
    def letters(self) -> str:
        return LETTERS[: len(self.choices)]

    def read(self, answer: str) -> Reading:
        return read_choice(answer, self.choices, self.letters)

    def extract(self, answer: str) -> str | None:
        return self.read(answer).value

    def score(self, answer: str) -> bool:
        return self.extract(answer) == self.answer

    def describe(self) -> str:
        return f"choice {self.answer} of {self.letters}"

    def render(self, prompt: str) -> str:
        """The prompt as the model sees it: the options lettered, and the answer line asked for."""
        options = "\n".join(f"{letter}) {text}" for letter, text in zip(self.letters, self.choices, strict=False))
        letters = ", ".join(self.letters)
        return f"{prompt}\n\n{options}\n\n{format_line('X')} X is the letter of the correct option: one of {letters}."


@dataclass(frozen=True)
class Number:
    """A numeric answer within `tolerance` (absolute) of `value` (answers.read_number)."""

    value: float
    tolerance: float = 1e-6
    kind: ClassVar[str] = "number"

    def read(self, answer: str) -> Reading:
        return read_number(answer)

    def extract(self, answer: str) -> str | None:
        return self.read(answer).value

    def score(self, answer: str) -> bool:
        read = self.extract(answer)
        number = parse_number(read) if read is not None else None
        return number is not None and math.isclose(number, self.value, rel_tol=1e-9, abs_tol=self.tolerance)

    def describe(self) -> str:
        return f"number {self.value:g} ± {self.tolerance:g}"

    def render(self, prompt: str) -> str:
        return f"{prompt}\n\n{format_line('<number>')} Give the final number alone: no units, no working."
