"""How a task's answer is checked: normalised exact match, regex, contains, multiple choice, or a number.

Each checker does two things: `extract` pulls the answer out of a model's reply (None when it finds none),
and `score` says whether the reply is right. `extract` is also what an adaptive panel (`layers: auto`)
can compare across references to see whether they already agree.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from dataclasses import dataclass
from typing import ClassVar, Protocol

LETTERS = string.ascii_uppercase


class Check(Protocol):
    @property
    def kind(self) -> str: ...

    def extract(self, answer: str) -> str | None: ...

    def score(self, answer: str) -> bool: ...

    def describe(self) -> str: ...


def normalise(text: str) -> str:
    """Case, accents' composed forms, surrounding quotes, Markdown emphasis, trailing punctuation and runs of
    white space do not count."""
    text = unicodedata.normalize("NFKC", text).strip().lower()
    text = re.sub(r"[*_`]+", "", text)
    text = re.sub(r"\s+", " ", text)
    return text.strip(" \"'“”‘’.,;:!?()[]")


# "The answer is X", "Answer: X", "Final answer: X" — the last such phrase wins (models restate).
_ANSWER_PHRASE = re.compile(
    r"(?:final\s+answer|answer\s+is|answer\s*:|answer\s*=|the\s+result\s+is|result\s*:)\s*[:=]?\s*(.+)",
    re.IGNORECASE,
)


def final_statement(answer: str) -> str | None:
    """The text after the last "answer:"-like phrase, else the last non-empty line."""
    found = _ANSWER_PHRASE.findall(answer)
    if found:
        return str(found[-1]).strip()
    lines = [line.strip() for line in answer.strip().splitlines() if line.strip()]
    return lines[-1] if lines else None


@dataclass(frozen=True)
class Expected:
    """The reply, or its final statement, equals `value` once both are normalised."""

    value: str
    kind: ClassVar[str] = "expected"

    def extract(self, answer: str) -> str | None:
        if normalise(answer) == normalise(self.value):
            return normalise(answer)
        last = final_statement(answer)
        return normalise(last) if last is not None else None

    def score(self, answer: str) -> bool:
        return self.extract(answer) == normalise(self.value)

    def describe(self) -> str:
        return f"expected {self.value!r}"


@dataclass(frozen=True)
class Regex:
    """The reply matches `pattern` somewhere (re.search, case-sensitive unless the pattern says (?i))."""

    pattern: str
    kind: ClassVar[str] = "regex"

    def extract(self, answer: str) -> str | None:
        match = re.search(self.pattern, answer)
        return match.group(0) if match else None

    def score(self, answer: str) -> bool:
        return self.extract(answer) is not None

    def describe(self) -> str:
        return f"regex /{self.pattern}/"


@dataclass(frozen=True)
class Contains:
    """The reply contains every one of `values`, compared normalised."""

    values: tuple[str, ...]
    kind: ClassVar[str] = "contains"

    def extract(self, answer: str) -> str | None:
        text = normalise(answer)
        found = [v for v in self.values if normalise(v) in text]
        return " | ".join(sorted(normalise(v) for v in found)) if found else None

    def score(self, answer: str) -> bool:
        text = normalise(answer)
        return all(normalise(v) in text for v in self.values)

    def describe(self) -> str:
        return "contains " + ", ".join(repr(v) for v in self.values)


@dataclass(frozen=True)
class Choice:
    """Multiple choice: the letter of the chosen option, found in the reply however it is written."""

    choices: tuple[str, ...]
    answer: str  # a letter (A, B, ...)
    kind: ClassVar[str] = "choice"

    @property
    def letters(self) -> str:
        return LETTERS[: len(self.choices)]

    def extract(self, answer: str) -> str | None:
        return choice_letter(answer, self.choices)

    def score(self, answer: str) -> bool:
        return self.extract(answer) == self.answer

    def describe(self) -> str:
        return f"choice {self.answer} of {self.letters}"

    def render(self, prompt: str) -> str:
        """The prompt as the model sees it: the options lettered, and how to answer."""
        options = "\n".join(f"{letter}) {text}" for letter, text in zip(self.letters, self.choices, strict=False))
        return f"{prompt}\n\n{options}\n\nAnswer with the letter of the correct option."


def choice_letter(answer: str, choices: tuple[str, ...]) -> str | None:
    """The option a reply picks: an explicit "answer is (B)" first, then a letter standing alone on the last
    line or at its start, "**B**" or "(B)", and last the one option whose text the reply quotes."""
    letters = LETTERS[: len(choices)]
    if not answer.strip():
        return None
    cls = f"[{letters}{letters.lower()}]"
    explicit = re.findall(
        rf"(?:answer|option|choice)\s*(?:is|:|=)?\s*(?:option\s*)?[\(\[*\s]*({cls})(?![A-Za-z])", answer, re.IGNORECASE
    )
    explicit = [e for e in explicit if e.upper() in letters]
    if explicit:
        return str(explicit[-1]).upper()
    lines = [line.strip() for line in answer.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        alone = re.fullmatch(rf"[\(\[*\s]*({cls})[\)\].:*\s]*", line)
        if alone:
            return alone.group(1).upper()
        start = re.match(rf"[\(\[*\s]*([{letters}])[\)\].:*]\s", line + " ")
        if start:
            return start.group(1)
    marked = re.findall(rf"(?:\*\*|\()([{letters}])(?:\*\*|\))", answer)
    if marked:
        return str(marked[-1])
    quoted = [letter for letter, text in zip(letters, choices, strict=False) if normalise(text) in normalise(answer)]
    return quoted[0] if len(quoted) == 1 else None


_NUMBER = re.compile(r"-?\$?\s?\d[\d,]*(?:\.\d+)?(?:\s*/\s*\d+)?|-?\.\d+")


def parse_number(text: str) -> float | None:
    """A number as models write one: 1,234.5, $12, 45%, 3/4, -0.5 (None when it is none)."""
    cleaned = text.replace("$", "").replace(" ", "").replace(",", "").rstrip("%")
    try:
        if "/" in cleaned:
            top, bottom = cleaned.split("/", 1)
            return float(top) / float(bottom) if float(bottom) else None
        return float(cleaned)
    except ValueError:
        return None


@dataclass(frozen=True)
class Number:
    """A numeric answer within `tolerance` (absolute) of `value`: the number after the last "answer is"-like
    phrase, else the last number in the reply."""

    value: float
    tolerance: float = 1e-6
    kind: ClassVar[str] = "number"

    def extract(self, answer: str) -> str | None:
        number = extract_number(answer)
        if number is None:
            return None
        return f"{number:g}" if not number.is_integer() else str(int(number))

    def score(self, answer: str) -> bool:
        number = extract_number(answer)
        return number is not None and math.isclose(number, self.value, rel_tol=1e-9, abs_tol=self.tolerance)

    def describe(self) -> str:
        return f"number {self.value:g} ± {self.tolerance:g}"


def extract_number(answer: str) -> float | None:
    """The first number after the last "answer is"-like phrase, else the last number in the reply."""
    found = _ANSWER_PHRASE.findall(answer)
    if found:
        after = [n for n in (parse_number(m) for m in _NUMBER.findall(str(found[-1]))) if n is not None]
        if after:
            return after[0]
    numbers = [n for n in (parse_number(m) for m in _NUMBER.findall(answer)) if n is not None]
    return numbers[-1] if numbers else None
