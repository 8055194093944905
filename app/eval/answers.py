"""How a model's reply is read: the answer line the task asked for first, then a fallback that takes only an
unambiguous final answer, and otherwise nothing ("unreadable").

Each check asks for its answer in one form (`ANSWER: X` on the reply's last line, as inspect-ai and lm-eval ask)
and reads that first. Models do not always comply, so a fallback reads what a careful person would accept as a
final answer and nothing else: the last "the answer is X", a letter alone on the last line, or one option
named by its letter or its text. It refuses a letter inside a list of echoed options, an article ("the answer
is a simple …"), a letter whose option text names another option, and the first operand of an expression
("2 * 19 = 38" is 38). A reply it cannot read is scored wrong and counted as unreadable, rather than guessed.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

# The line every check with a format asks for (inspect-ai's and lm-eval's convention).
ANSWER_WORD = "ANSWER"

# Where a reply states its answer, the last such phrase winning (models restate): "ANSWER: X", "Final answer:
# X", "the answer is X", "the correct option is X", "the result is X".
_STATEMENT = re.compile(
    r"(?:\bfinal\s+answer|\banswer|\boption|\bchoice|\bresult)\b[*_`]*"
    r"(?:\s+(?:to|for|of|in|this|that|the|your|my|question|problem|here|then|now)\b)*"
    r"(?:\s*(?:is|was|would\s+be|will\s+be|should\s+be)\b|\s*[:=：])[*_`]*\s*[:=]?",
    re.IGNORECASE,
)
# Words between a statement and its answer that say nothing about which ("the answer is indeed option D").
_FILLER = re.compile(r"(?:(?:indeed|clearly|definitely|therefore|thus|so|simply|option|choice|letter)\b[\s:,]*)+", re.I)
_DECORATION = " \t*_`\"'“”‘’#>-"


@dataclass(frozen=True)
class Reading:
    """What a reply's answer was read as (`value`, None when unreadable), and how, or why it could not be."""

    value: str | None
    how: str  # "answer line", "answer phrase", "letter alone", "option line", "option text", "last line", ...

    @property
    def readable(self) -> bool:
        return self.value is not None

    def as_json(self) -> dict[str, object]:
        return {"value": self.value, "how": self.how}


def unreadable(why: str) -> Reading:
    return Reading(None, why)


def _agreed(stated: list[tuple[str, Reading]]) -> Reading:
    """What a reply's answer statements say, read in order: (how each was stated, what it gives). The last
    `ANSWER:` line decides; otherwise the statements that give an answer must all give the same one, and a
    stated answer that gives none (or contradicts itself) is no answer: the rest of the reply is not searched."""
    how, last = stated[-1]
    readings = [reading for _, reading in stated]
    if how == "answer line":
        return last
    values = sorted({str(r.value) for r in readings if r.readable})
    if len(values) > 1:
        return unreadable(f"states answers {', '.join(values)}")
    if values:
        return next(r for r in reversed(readings) if r.readable)
    return last  # why the last statement gives no answer


def normalise(text: str) -> str:
    """Case, accents' composed forms, surrounding quotes, Markdown emphasis, trailing punctuation and runs of
    white space do not count."""
    text = unicodedata.normalize("NFKC", text).strip().lower()
    text = re.sub(r"[*_`]+", "", text)
    text = re.sub(r"\s+", " ", text)
    return text.strip(" \"'“”‘’.,;:!?()[]")


def _lines(reply: str) -> list[str]:
    return [line.strip() for line in reply.strip().splitlines() if line.strip(_DECORATION)]


def statements(reply: str) -> list[tuple[str, str]]:
    """Each answer statement of a reply, in order: how it was stated ("answer line" for `ANSWER: X`, else
    "answer phrase") and the text after it to the end of its line (or the next line, for an "ANSWER:" alone)."""
    found = []
    for match in _STATEMENT.finditer(reply):
        line, _, after = reply[match.end() :].partition("\n")
        if not line.strip(_DECORATION):
            following = _lines(after)
            line = following[0] if following else ""
        if not line.strip(_DECORATION):
            continue
        word = match.group(0).strip(_DECORATION + ":=：").split()[0]
        how = "answer line" if word.upper() == ANSWER_WORD and ":" in match.group(0) else "answer phrase"
        found.append((how, line.strip()))
    return found


def statement(reply: str) -> tuple[str, str] | None:
    """The reply's last answer statement (see `statements`), or None."""
    found = statements(reply)
    return found[-1] if found else None


# ----------------------------------------------------------------------------------------------- choices


def _mentions(text: str, option: str) -> bool:
    """Whether `text` names `option` as a phrase of its own (normalised, on word boundaries). An option of one
    character is matched as written: "A" is an option, "a" an article."""
    if len(option.strip()) == 1:
        plain = unicodedata.normalize("NFKC", re.sub(r"[*_`]+", "", text))
        return re.search(rf"(?<!\w){re.escape(option.strip())}(?!\w)", plain) is not None
    wanted = normalise(option)
    return bool(wanted) and re.search(rf"(?<!\w){re.escape(wanted)}(?!\w)", normalise(text)) is not None


def _options_named(text: str, choices: Sequence[str], letters: str) -> list[str]:
    return [letter for letter, option in zip(letters, choices, strict=False) if _mentions(text, option)]


def _letter_then(text: str, choices: Sequence[str], letters: str) -> tuple[str, str] | None:
    """A statement that starts with an option's letter: (letter, what follows it). A letter that reads as a word
    is not one: a lowercase letter counts only when marked ("(b)", "b)", "b" alone), and "A" followed by a
    lowercase word ("A simple sum …") is the article unless that word starts option A's text."""
    stripped = text.strip(" \t*_`\"'“”‘’>")
    if filler := _FILLER.match(stripped):
        stripped = stripped[filler.end() :].strip(" \t*_`\"'“”‘’>")
    upper = re.match(rf"[\(\[]?([{letters}])(?![\w'’])([\)\]\.:,*]*)\s*(.*)", stripped, re.DOTALL)
    if upper:
        letter, marked, tail = upper.groups()
        article = letter == "A" and not marked and re.match(r"[a-z]", tail) is not None
        if not article or normalise(tail).startswith(normalise(choices[0])):
            return letter, tail
        return None
    lower = re.match(rf"(?:\(([{letters.lower()}])\)|([{letters.lower()}])(?:\)|\.?\s*$))\s*(.*)", stripped, re.DOTALL)
    if lower:
        return (lower.group(1) or lower.group(2)).upper(), lower.group(3)
    return None


def _resolve_choice(text: str, choices: Sequence[str], letters: str, how: str) -> Reading:
    """A stated answer ("B", "B) 42", "42", "option B, 42"): its letter, unless the text beside the letter is
    another option's."""
    started = _letter_then(text, choices, letters)
    if started is not None:
        letter, tail = started
        other = _other_option(tail, letter, choices, letters)
        if other is not None:
            return unreadable(f"the letter {letter} and the text of option {other} disagree")
        return Reading(letter, how)
    named = _options_named(text, choices, letters)
    if len(named) == 1:
        return Reading(named[0], f"{how} (the option's text)")
    if len(named) > 1:
        return unreadable(f"the stated answer names options {', '.join(named)}")
    return unreadable(f"the stated answer ({_short(text)}) names no option")


def _words(text: str) -> set[str]:
    return {word.rstrip("s") for word in re.findall(r"[a-z0-9$./%]+", normalise(text))}


def _other_option(tail: str, letter: str, choices: Sequence[str], letters: str) -> str | None:
    """The option a letter's own text names instead of it ("D) 42" where 42 is option C; "A) Pushing a ball can
    make it move", option C's words), or None. The text right after the letter is compared with each option
    by the share of the option's words it holds; another option must hold clearly more than the letter's own."""
    own = choices[letters.index(letter)]
    if not tail.strip() or normalise(tail).startswith(normalise(own)):
        return None
    exact = [o for o in _options_named(tail, choices, letters) if o != letter]
    if exact and not _mentions(tail, own):
        return exact[0]
    head = _words(re.split(r"[.:;!?\n]", tail, maxsplit=1)[0])

    def share(option: str) -> float:
        words = _words(option)
        return len(words & head) / len(words) if words and len(option.strip()) > 1 else 0.0

    mine = share(own)
    best = max((o for o in letters if o != letter), key=lambda o: share(choices[letters.index(o)]), default=None)
    if best is not None and share(choices[letters.index(best)]) >= 0.75 and share(choices[letters.index(best)]) > mine:
        return best
    return None


_OPTION_LINE = r"[\(\[]?([{letters}])[\)\]\.:]\s+(.*)"
_ALONE = r"[\(\[]?([{letters}])[\)\]\.:]?"


def read_choice(reply: str, choices: Sequence[str], letters: str) -> Reading:
    """The letter of the option a reply picks, or why none can be read (see the module's docstring)."""
    if not reply.strip():
        return unreadable("empty reply")
    stated = statements(reply)
    if stated:
        return _agreed([(how, _resolve_choice(text, choices, letters, how)) for how, text in stated])
    picked = re.findall(
        rf"\b(?i:option|choice|answer)\s+\(?([{letters}])\)?\s+(?i:is\s+(?:the\s+)?(?:correct|right))\b", reply
    )
    if picked:
        return Reading(picked[-1], "option named correct")
    bare = [re.sub(r"[*_`]+", "", line).strip(" \t\"'“”‘’#>-") for line in _lines(reply)]
    last = re.fullmatch(_ALONE.format(letters=letters + letters.lower()), bare[-1])
    if last:
        return Reading(last.group(1).upper(), "letter alone on the last line")
    listed: dict[str, str] = {}
    for line in bare:
        item = re.fullmatch(_OPTION_LINE.format(letters=letters), line, re.DOTALL)
        if item:
            listed.setdefault(item.group(1), item.group(2))
    if len(listed) > 1:
        return unreadable(f"lists options {', '.join(sorted(listed))}")
    if len(listed) == 1:
        ((letter, tail),) = listed.items()
        return _resolve_choice(f"{letter}) {tail}", choices, letters, "option line")
    bold = set(re.findall(rf"\*\*\(?([{letters}])\)?\*\*", reply))
    if len(bold) == 1:
        return Reading(bold.pop(), "bold letter")
    named = _options_named(reply, choices, letters)
    if len(named) == 1:
        return Reading(named[0], "option text")
    if len(named) > 1:
        return unreadable(f"names options {', '.join(named)}")
    return unreadable("no answer found")


# ----------------------------------------------------------------------------------------------- numbers

# A number as models write one: 1,234.5, $12, 45%, 3/4, -0.5; a minus sign only when it touches the digits.
NUMBER = re.compile(r"(?<![\w.])(?:-(?=\$?\d))?\$?\d(?:[\d,]*\d)?(?:\.\d+)?(?:/\d+(?![\d.]))?%?")
_OPERATOR = re.compile(r"\s*(?:[+\-−–×*/÷^]|x(?=\s))\s*")
_RESULT = re.compile(r"[=≈]")


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


def _numbers(text: str, *, numbering: bool = False) -> list[re.Match[str]]:
    """The numbers in `text`; with `numbering`, not a list's numbering ("1. First, …" at a line's start)."""
    found = [m for m in NUMBER.finditer(text) if parse_number(m.group(0)) is not None]
    if numbering:
        found = [m for m in found if not (_at_line_start(text, m) and _ENUMERATOR.match(text, m.end()))]
    return found


_ENUMERATOR = re.compile(r"[.)]\s")


def _at_line_start(text: str, match: re.Match[str]) -> bool:
    return not text[: match.start()].rpartition("\n")[2].strip(_DECORATION)


def _final_result(text: str, how: str, *, numbering: bool = False) -> Reading:
    """The number a statement gives: after its last "=", else its first number, unless that number only
    starts an expression nobody evaluated ("12 * 18 - 150")."""
    if _RESULT.search(text):
        text = _RESULT.split(text)[-1]
        how = f"{how}, after the last ="
    found = _numbers(text, numbering=numbering)
    if not found:
        return unreadable(f"no number in {_short(text)!r}")
    first = found[0]
    rest = text[first.end() :]
    operator = _OPERATOR.match(rest)
    if operator and _numbers(rest[operator.end() :]) and _numbers(rest[operator.end() :])[0].start() == 0:
        return unreadable(f"an expression with no result: {_short(text)!r}")
    value = parse_number(first.group(0))
    assert value is not None
    return Reading(_format(value), how)


def read_number(reply: str) -> Reading:
    """The number a reply gives as its answer (see the module's docstring), formatted as `42` or `0.75`."""
    if not reply.strip():
        return unreadable("empty reply")
    stated = statements(reply)
    if stated:
        return _agreed([(how, _final_result(text, how)) for how, text in stated])
    with_numbers = [line for line in _lines(reply) if _numbers(line, numbering=True)]
    if not with_numbers:
        return unreadable("no number found")
    line = with_numbers[-1]
    if _RESULT.search(line):
        return _final_result(line, "the last line with a number", numbering=True)
    found = _numbers(line, numbering=True)
    if len(found) == 1:
        return _final_result(line, "the last line with a number", numbering=True)
    return unreadable(f"the last line with a number holds {len(found)} and no answer: {_short(line)!r}")


def _format(value: float) -> str:
    """`42`, `0.75`, `9.00678513`: every digit a float holds, so a tolerance compares what the reply said."""
    return str(int(value)) if value.is_integer() else f"{value:.15g}"


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ----------------------------------------------------------------------------------------------- free text


def read_text(reply: str) -> Reading:
    """A free-text answer: the stated answer, else the reply's last line (normalised)."""
    if not reply.strip():
        return unreadable("empty reply")
    stated = statement(reply)
    if stated is not None:
        how, text = stated
        return Reading(normalise(text), how)
    return Reading(normalise(_lines(reply)[-1]), "last line")
