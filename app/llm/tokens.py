"""Counting tokens without a tokenizer: an estimate from the text itself, calibrated per model.

`estimate_text` splits text the way byte-pair tokenizers pre-split it (words, digits, punctuation runs,
whitespace) and prices each piece by its kind: a common English word is about one token, a word in a
language with accents about one per three letters, a CJK character about two, a digit one, a run of
spaces one per sixteen. The rates are those of a small-vocabulary tokenizer (SmolLM2's, 49,152 tokens),
so for the large vocabularies of GPT-4o, Llama 3 or Qwen the estimate runs high: safe for fitting a
request, never short of what is sent. docs/context.md gives its measured error.

`estimate_messages` adds what a chat template puts around each message, tool calls and the tools offered.

A model's own count corrects the estimate: `TokenCounter.observe` compares the estimate of a request with
the `prompt_tokens` its provider reported, and keeps the ratio per model (in the session store, through
`CalibrationMemory`), so a later process starts calibrated. Where the model's server counts text itself
(`exact.ServerTokenizer`), its count replaces the estimate.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from .messages import Message, ToolCallPart, ToolSpec

PER_MESSAGE = 5  # a chat template's tokens around each message: ChatML's <|im_start|>role\n … <|im_end|>\n
PER_REQUEST = 3  # and the answer's opening (<|im_start|>assistant\n)
PER_TOOL_CALL = 6  # a tool call's wrapping, beside its name and arguments
PER_TOOL = 10  # a tool spec's wrapping in the template, beside its JSON
IMAGE_TOKENS = 1000  # an image part: providers price one by its size, which a message does not carry
MIN_CALIBRATION_TOKENS = 64  # a smaller request says more about the template than about the tokenizer
RATIO_RANGE = (0.2, 5.0)  # a ratio outside this is another kind of count (cached tokens only, a bug), not kept
CALIBRATION_MEMORY = 8  # the latest this many observations weigh most (a running mean until then)

_PIECES = re.compile(r" ?[A-Z]?[a-z]+| ?[A-Z]+(?![a-z])| ?[^\W\d_]+| ?\d+| ?[^\w\s]+|\s+(?!\S)|\s+|_+")
_ACCENTED = re.compile(r"[\u00c0-\u024f]")
_VOWELS = re.compile(r"[aeiouyAEIOUY]")


def estimate_text(text: str) -> int:
    """About how many tokens `text` is (0 for no text)."""
    if not text:
        return 0
    letters = sum(1 for c in text if c.isascii() and c.isalpha()) or 1
    accented = len(_ACCENTED.findall(text)) / letters > 0.004  # a language other than English
    total = 0.0
    for piece in _PIECES.findall(text):
        word = piece[1:] if piece[0] == " " and len(piece) > 1 else piece
        first = word[0]
        if first.isalpha():
            total += _word(word, accented)
        elif first.isdigit():
            total += len(word) + (word is not piece)  # one per digit; a space before them is one more
        elif first.isspace():
            total += -(-len(word) // 16)
        elif first == "_":
            total += 1
        else:
            # An emoji or another symbol is several bytes a small vocabulary spells one by one.
            total += sum(2.5 if ord(c) > 0xFFFF or unicodedata.category(c) == "So" else 0.85 for c in word)
    return max(1, round(total))


def _word(word: str, accented: bool) -> float:
    latin = cjk = hangul = other = 0
    for c in word:
        code = ord(c)
        if code < 0x250:
            latin += 1
        elif 0x3040 <= code <= 0x30FF or 0x3400 <= code <= 0x9FFF or 0xF900 <= code <= 0xFAFF or code >= 0x20000:
            cjk += 1
        elif 0xAC00 <= code <= 0xD7AF or 0x1100 <= code <= 0x11FF or 0x3130 <= code <= 0x318F:
            hangul += 1
        else:
            other += 1
    tokens = cjk * 1.85 + hangul * 2.7 + other * 0.85
    if latin:
        if accented:
            tokens += max(1.0, 0.35 * latin + 0.3)
        elif latin >= 3 and word.isupper():
            tokens += max(1.0, latin / 2.5)  # capitals split into pieces of two or three
        elif latin >= 3 and not _VOWELS.search(word):
            tokens += latin / 2  # no vowel: an abbreviation or an identifier's letters, not a word
        else:
            tokens += 1.05 + max(0, latin - 6) * 0.2
    return tokens


def estimate_messages(messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> int:
    """About how many prompt tokens a chat request with `messages` (and `tools` offered) is."""
    total = PER_REQUEST + sum(_message_tokens(message) for message in messages)
    for tool in tools or ():
        total += PER_TOOL + estimate_text(json.dumps(tool.get("function", tool), ensure_ascii=False))
    return total


def _message_tokens(message: Message) -> int:
    tokens = PER_MESSAGE + _content_tokens(message.get("content"))
    for call in _tool_calls(message):
        function = call["function"]
        tokens += PER_TOOL_CALL + estimate_text(function["name"]) + estimate_text(function["arguments"])
    return tokens


def _tool_calls(message: Message) -> list[ToolCallPart]:
    if message["role"] == "assistant":
        return message.get("tool_calls") or []
    return []


def _content_tokens(content: object) -> int:
    if isinstance(content, str):
        return estimate_text(content)
    if isinstance(content, list):
        total = 0
        for part in content:
            if isinstance(part, dict) and part.get("type") == "image_url":
                total += IMAGE_TOKENS
            elif isinstance(part, dict):
                total += estimate_text(str(part.get("text", "")))
        return total
    return 0


@dataclass(frozen=True)
class Calibration:
    """How a model's own count compares with the estimate: its prompt_tokens ÷ the estimate, over `samples`
    requests. A model never observed has ratio 1 and no samples."""

    ratio: float = 1.0
    samples: int = 0
    updated: float | None = None  # when it was last observed (Unix time)

    def scaled(self, estimate: int) -> int:
        """`estimate` in this model's tokens."""
        return math.ceil(estimate * self.ratio) if estimate else 0

    def observed(self, estimated: int, reported: int, *, now: float | None = None) -> Calibration:
        """This calibration with one more request: `estimated` by estimate_messages, `reported` by the provider.
        A request too small to say much, or a ratio no tokenizer gives, changes nothing."""
        if estimated < MIN_CALIBRATION_TOKENS or reported <= 0:
            return self
        sample = reported / estimated
        if not RATIO_RANGE[0] <= sample <= RATIO_RANGE[1]:
            return self
        weight = 1 / min(self.samples + 1, CALIBRATION_MEMORY)
        ratio = self.ratio + (sample - self.ratio) * weight
        return replace(self, ratio=ratio, samples=self.samples + 1, updated=time.time() if now is None else now)


class CalibrationMemory(Protocol):
    """Where calibrations outlive the process (the session store's model_facts)."""

    def calibration(self, provider: str, model: str) -> Calibration | None: ...

    def calibrate(self, provider: str, model: str, calibration: Calibration) -> None: ...


class ExactCounter(Protocol):
    """A model's own tokenizer, asked over the wire: the tokens of `text`, or None when it cannot say."""

    def count(self, text: str) -> int | None: ...


@dataclass(frozen=True)
class TokenCount:
    tokens: int
    counted: bool  # the model's server counted the text; else estimated and calibrated


class TokenCounter:
    """Token counts per model: the model's server's count where it has one, else the estimate scaled by that
    model's calibration. Safe to share between threads."""

    def __init__(self, memory: CalibrationMemory | None = None) -> None:
        self._memory = memory
        self._calibrations: dict[tuple[str, str], Calibration] = {}
        self._lock = threading.Lock()

    def calibration(self, provider: str, model: str) -> Calibration:
        """The model's calibration (read from the memory the first time it is asked for)."""
        key = (provider, model)
        with self._lock:
            known = self._calibrations.get(key)
        if known is not None:
            return known
        stored = self._memory.calibration(provider, model) if self._memory is not None else None
        with self._lock:
            return self._calibrations.setdefault(key, stored or Calibration())

    def observe(self, provider: str, model: str, estimated: int, reported: int) -> Calibration:
        """Learn from one request: `estimated` is estimate_messages() of what was sent (not calibrated),
        `reported` the prompt_tokens the provider reported for it. Returns the model's calibration now, kept
        in the memory when it changed."""
        before = self.calibration(provider, model)
        after = before.observed(estimated, reported)
        if after is before:
            return before
        with self._lock:
            self._calibrations[(provider, model)] = after
        if self._memory is not None:
            self._memory.calibrate(provider, model, after)
        return after

    def count_text(self, provider: str, model: str, text: str, exact: ExactCounter | None = None) -> TokenCount:
        counted = exact.count(text) if exact is not None else None
        if counted is not None:
            return TokenCount(counted, True)
        return TokenCount(self.calibration(provider, model).scaled(estimate_text(text)), False)

    def count_messages(
        self,
        provider: str,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None = None,
        exact: ExactCounter | None = None,
    ) -> TokenCount:
        """The prompt tokens of a request to `provider:model`: counted by its server when `exact` is given
        and answers (with the template's tokens around each message), else estimated and calibrated."""
        if exact is not None:
            counted = _counted_messages(exact, messages, tools)
            if counted is not None:
                return TokenCount(counted, True)
        return TokenCount(self.calibration(provider, model).scaled(estimate_messages(messages, tools)), False)


def _counted_messages(exact: ExactCounter, messages: Sequence[Message], tools: Sequence[ToolSpec] | None) -> int | None:
    texts: list[str] = []
    images = 0
    for message in messages:
        texts.append(str(message.get("role", "")))
        content = message.get("content")
        if isinstance(content, list):
            images += sum(1 for part in content if isinstance(part, dict) and part.get("type") == "image_url")
            texts.extend(str(part.get("text", "")) for part in content if isinstance(part, dict))
        elif isinstance(content, str):
            texts.append(content)
        texts.extend(call["function"]["name"] + call["function"]["arguments"] for call in _tool_calls(message))
    calls = sum(len(_tool_calls(message)) for message in messages)
    texts.extend(json.dumps(tool.get("function", tool), ensure_ascii=False) for tool in tools or ())
    # The role is counted with the texts: the template's other tokens are PER_MESSAGE less one.
    total = PER_REQUEST + (PER_MESSAGE - 1) * len(messages) + PER_TOOL_CALL * calls + PER_TOOL * len(tools or ())
    total += IMAGE_TOKENS * images
    for text in texts:
        if not text:
            continue
        counted = exact.count(text)
        if counted is None:
            return None
        total += counted
    return total
