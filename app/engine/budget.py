"""`ContextBudget`: each model's window, and what a request to it may hold (docs/context.md).

A slot's request fits its window less its output reserve (`max_tokens`, else the preset's `output_reserve`).
A window nobody states is unknown (`llm.windows`): such a request is sent as it is, and the first overflow
error teaches the window (`learn`), after which the request is fitted and sent again, once (engine/calls.py).

Tokens are counted per message (the model's server's count where it has one, else the calibrated estimate of
`llm.tokens`), each message's estimate once in the process, so that a long conversation costs what its newest
messages do and trying how many exchanges fit costs additions only. The fitting itself is in engine/fitting.py;
this module answers "how big" and "how much room".
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from ..config import Preset, Slot
from ..llm import ContextOverflow
from ..llm.exact_count import ServerTokenizer
from ..llm.messages import Message, ToolSpec
from ..llm.tokens import PER_MESSAGE, PER_REQUEST, PER_TOOL, TokenCounter, estimate_messages
from ..llm.windows import Window, WindowFinder

# Estimates of messages, by their text's digest: a conversation's messages are estimated once, not at every turn,
# whatever model they go to (a model's calibration scales the estimate). Bounded, the oldest forgotten first.
RAW_ESTIMATES = 50_000
_raw: OrderedDict[bytes, int] = OrderedDict()
_raw_lock = threading.Lock()


def raw_estimate(message: Message) -> int:
    """`estimate_messages` of one message, less the request's opening: its share of a request, not calibrated."""
    text = json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)
    key = hashlib.blake2b(text.encode(), digest_size=16).digest()
    with _raw_lock:
        known = _raw.get(key)
        if known is not None:
            _raw.move_to_end(key)
            return known
    tokens = max(0, estimate_messages([message]) - PER_REQUEST)
    with _raw_lock:
        _raw[key] = tokens
        while len(_raw) > RAW_ESTIMATES:
            _raw.popitem(last=False)
    return tokens


# The least a window leaves for a request once its answer's reserve is taken: a window smaller than its
# reserve still gets this much, so a tiny local window with a large default reserve can be asked at all.
MIN_ROOM = 256


@dataclass(frozen=True)
class Room:
    """How much `slot`'s request may hold: `tokens` (None: the window is unknown, nothing is fitted), of a window
    of `window` tokens less `reserve` kept for the answer."""

    slot: Slot
    window: Window
    reserve: int

    @property
    def tokens(self) -> int | None:
        if self.window.tokens is None:
            return None
        return max(MIN_ROOM, self.window.tokens - self.reserve)


class ContextBudget:
    """The windows and token counts of one preset's slots. Shared by a session's turns (windows are resolved
    once a turn, on the turn's thread: `WindowFinder.window` may ask a provider); safe between threads."""

    def __init__(self, finder: WindowFinder, counter: TokenCounter, preset: Preset) -> None:
        self.finder, self.counter, self.preset = finder, counter, preset
        self._windows: dict[tuple[str, str], Window] = {}
        self._tokenizers: dict[tuple[str, str], ServerTokenizer | None] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ windows

    def window(self, slot: Slot) -> Window:
        """`slot`'s window, resolved the first time it is asked for (maybe asking its provider)."""
        key = (slot.provider, slot.model)
        with self._lock:
            known = self._windows.get(key)
        if known is not None:
            return known
        window = self.finder.window(slot)
        with self._lock:
            return self._windows.setdefault(key, window)

    def room(self, slot: Slot) -> Room:
        return Room(slot, self.window(slot), self.preset.reserve_for(slot))

    def learn(self, slot: Slot, overflow: ContextOverflow) -> Room:
        """Keep the window `slot`'s provider named in an overflow error; the slot's room from now on."""
        window = self.finder.learn(slot, overflow)
        with self._lock:
            self._windows[(slot.provider, slot.model)] = window
        return self.room(slot)

    # ------------------------------------------------------------------ counting

    def message(self, slot: Slot, message: Message) -> int:
        """The tokens `message` takes in a request to `slot`'s model, its template's wrapping included: counted by
        the model's server where it counts (it keeps each text's count), else the estimate, calibrated."""
        tokenizer = self._tokenizer(slot)
        if tokenizer is not None:
            counted = self.counter.count_messages(slot.provider, slot.model, [message], exact=tokenizer).tokens
            return max(0, counted - PER_REQUEST)  # one message's share: the request's opening is counted once
        return self.counter.calibration(slot.provider, slot.model).scaled(raw_estimate(message))

    def _tokenizer(self, slot: Slot) -> ServerTokenizer | None:
        key = (slot.provider, slot.model)
        with self._lock:
            if key in self._tokenizers:
                return self._tokenizers[key]
        tokenizer = self.finder.tokenizer(slot)
        with self._lock:
            return self._tokenizers.setdefault(key, tokenizer)

    def text(self, slot: Slot, text: str) -> int:
        """The tokens `text` takes inside a message to `slot`'s model."""
        return max(0, self.message(slot, {"role": "user", "content": text}) - PER_MESSAGE)

    def request(self, slot: Slot, messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> int:
        """The prompt tokens of a request to `slot`'s model: its messages, the tools offered, the opening."""
        tools_tokens = sum(self.text(slot, json.dumps(tool, ensure_ascii=False)) + PER_TOOL for tool in tools or ())
        return PER_REQUEST + tools_tokens + sum(self.message(slot, m) for m in messages)

    def observe(self, slot: Slot, messages: Sequence[Message], tools: Sequence[ToolSpec] | None, reported: int) -> None:
        """A provider reported `reported` prompt tokens for this request: the model's estimate is calibrated."""
        tools_estimate = estimate_messages([], tools) - PER_REQUEST if tools else 0
        estimated = PER_REQUEST + tools_estimate + sum(raw_estimate(message) for message in messages)
        self.counter.observe(slot.provider, slot.model, estimated, reported)
