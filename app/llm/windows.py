"""Each model's context window: stated, told or learned, never guessed.

A slot's window comes, in order, from:

1. the config: `context_window:` on the slot, else on its provider's `models:` entry;
2. the provider's own metadata (`discovery.ask_provider`): asked at most once per process for each provider
   and model (an Ollama model not loaded yet is asked again, at most once every UNSETTLED_RETRY seconds);
3. an overflow error the provider returned (`learn`), kept in the session store (`WindowMemory`) so that a
   later process starts knowing it.

The provider's number wins over a learned one, except where the overflow came while the provider was
saying that very number: its metadata is then known to overstate what it enforces (OpenRouter's
`context_length` is the largest among the upstreams it routes to). A window nobody states stays unknown
(`Window.tokens is None`): nothing is trimmed ahead of time, and the first overflow teaches it.

`WindowFinder.window` may ask a provider over the network (a few seconds at most): call it on a worker
thread, never the UI's. `WindowFinder.known` never asks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from ..config import Config, ConfigError, Slot
from ..providers import lifecycle, resolve_endpoint
from ..providers.local import LOCAL_MODEL, LOCAL_PROVIDER
from .clients import get_cached_client
from .discovery import DISCOVERY_TIMEOUT, ProviderWindow, ask_provider
from .errors import ContextOverflow
from .exact_count import ServerTokenizer, TokenizerKind
from .overflow import Overflow

WindowOrigin = Literal["config", "provider", "learned", "unknown"]
UNSETTLED_RETRY = 30.0  # seconds before asking again a provider that could not say yet (Ollama, not loaded)
Asker = Callable[[Config, str, str], ProviderWindow]


@dataclass(frozen=True)
class Window:
    """A slot's context window in tokens (None: unknown), where it came from, and in words where exactly."""

    tokens: int | None
    origin: WindowOrigin
    source: str  # "config: context_window on the slot …", "provider: llama.cpp's /props …", "unknown: …"

    @property
    def known(self) -> bool:
        return self.tokens is not None

    def __str__(self) -> str:
        """ "8,192 tokens (provider: the local server's n_ctx (its default))", "unknown (…)"."""
        if self.tokens is None:
            return f"unknown ({self.source.removeprefix('unknown: ')})"
        return f"{self.tokens:,} tokens ({self.source})"


@dataclass(frozen=True)
class LearnedWindow:
    """A window an overflow error named, as the store keeps it."""

    tokens: int
    prompt_tokens: int | None = None  # the prompt's size the error named
    provider_said: int | None = None  # the provider's metadata then (None: it said nothing)
    learned_at: float = 0.0  # Unix time


class WindowMemory(Protocol):
    """Where learned windows outlive the process (the session store's model_facts)."""

    def learned_window(self, provider: str, model: str) -> LearnedWindow | None: ...

    def learn_window(self, provider: str, model: str, learned: LearnedWindow) -> None: ...


class AskedWindows:
    """What providers said, once per process for each (provider, address, model); callers asking for the same
    one at the same time wait for the one question."""

    def __init__(
        self,
        ask: Asker = lambda config, provider, model: ask_provider(config, provider, model, timeout=DISCOVERY_TIMEOUT),
        *,
        clock: Callable[[], float] = time.monotonic,
        retry_after: float = UNSETTLED_RETRY,
    ) -> None:
        self._ask, self._clock, self._retry_after = ask, clock, retry_after
        self._answers: dict[tuple[str, str, str], tuple[ProviderWindow, float]] = {}
        self._locks: dict[tuple[str, str, str], threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, config: Config, provider: str, model: str) -> ProviderWindow:
        """The provider's answer, asked now if it has not been (or could not say yet, a while ago)."""
        key = _key(config, provider, model)
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            kept = self._answers.get(key)
            if kept is not None and (kept[0].settled or self._clock() - kept[1] < self._retry_after):
                return kept[0]
            answer = self._ask(config, provider, model)
            with self._lock:
                self._answers[key] = (answer, self._clock())
            return answer

    def peek(self, config: Config, provider: str, model: str) -> ProviderWindow | None:
        """The provider's answer if it has been asked, else None; never asks."""
        with self._lock:
            kept = self._answers.get(_key(config, provider, model))
        return kept[0] if kept is not None else None

    def clear(self) -> None:
        with self._lock:
            self._answers.clear()


def _key(config: Config, provider: str, model: str) -> tuple[str, str, str]:
    spec = config.providers.get(provider)
    return provider, (spec.base_url or "") if spec is not None else "", model


ASKED = AskedWindows()  # the process's answers: every WindowFinder shares them


class WindowFinder:
    """The context window of each slot, and the model's own tokenizer where its server has one.

    `memory` keeps learned windows across processes (the store; None keeps them for this finder only).
    Safe to share between threads."""

    def __init__(
        self, config: Config, memory: WindowMemory | None = None, *, asked: AskedWindows | None = None
    ) -> None:
        self.config, self._memory = config, memory
        self._asked = asked if asked is not None else ASKED  # the process's answers, unless a test gives its own
        self._learned: dict[tuple[str, str], LearnedWindow | None] = {}
        self._tokenizers: dict[tuple[str, str, str], ServerTokenizer] = {}
        self._lock = threading.Lock()

    def window(self, slot: Slot) -> Window:
        """`slot`'s window: the config's, the provider's (asking it if nobody has yet: blocks up to a few
        seconds, so call this on a worker) or a learned one; `Window(None, "unknown", why)` otherwise."""
        stated = self.config.stated_window(slot)
        if stated is not None:
            return self._stated(slot, *stated)
        if self._runs_itself(slot):
            return self._resolve(slot, ask_provider(self.config, slot.provider, slot.model))
        return self._resolve(slot, self._asked.get(self.config, slot.provider, slot.model))

    def known(self, slot: Slot) -> Window:
        """Like `window`, without asking any provider: what the config states, what a provider already said,
        or what was learned."""
        stated = self.config.stated_window(slot)
        if stated is not None:
            return self._stated(slot, *stated)
        if self._runs_itself(slot):
            return self._resolve(slot, ask_provider(self.config, slot.provider, slot.model))
        return self._resolve(slot, self._asked.peek(self.config, slot.provider, slot.model))

    def learn(self, slot: Slot, overflow: ContextOverflow | Overflow) -> Window:
        """Keep the window an overflow error of `slot`'s model named (a ContextOverflow, or the Overflow that
        overflow.parse_overflow read); returns the slot's window now. An error naming no window teaches nothing."""
        if overflow.window is not None:
            said = self._asked.peek(self.config, slot.provider, slot.model)
            learned = LearnedWindow(
                tokens=overflow.window,
                prompt_tokens=overflow.prompt_tokens,
                provider_said=said.tokens if said is not None else None,
                learned_at=time.time(),
            )
            with self._lock:
                self._learned[(slot.provider, slot.model)] = learned
            if self._memory is not None:
                self._memory.learn_window(slot.provider, slot.model, learned)
        return self.known(slot)

    def tokenizer(self, slot: Slot) -> ServerTokenizer | None:
        """The tokenizer of `slot`'s model, asked over the wire, when its server has one and runs: the local
        server (once started), or a llama.cpp server found by `window`. Never asks anything to decide."""
        kind: TokenizerKind
        if self._runs_itself(slot) and slot.provider == LOCAL_PROVIDER:
            base_url, kind, model = lifecycle.running_url(LOCAL_PROVIDER), "llama-cpp-python", LOCAL_MODEL
        else:
            said = self._asked.peek(self.config, slot.provider, slot.model)
            if said is None or said.tokenizer is None:
                return None
            base_url, kind, model = said.base_url, said.tokenizer, slot.model
        if base_url is None:
            return None
        key = (slot.provider, base_url, model)
        with self._lock:
            tokenizer = self._tokenizers.get(key)
        if tokenizer is not None:
            return tokenizer
        try:
            endpoint = resolve_endpoint(slot.provider, self.config, base_url=base_url)
        except ConfigError:
            return None  # its key is not set: the call itself will say so
        client, _ = get_cached_client(slot.provider, model, endpoint.base_url, endpoint.api_key, config=self.config)
        with self._lock:
            return self._tokenizers.setdefault(key, ServerTokenizer(client, base_url, kind, model))

    def _runs_itself(self, slot: Slot) -> bool:
        """Whether moa-chat runs `slot`'s provider itself (local, demo): it knows the window without asking
        anyone, and the answer may change with the environment, so it is never kept."""
        spec = self.config.providers.get(slot.provider)
        return spec is not None and not spec.base_url

    def _stated(self, slot: Slot, tokens: int, where: str) -> Window:
        learned = self._learned_for(slot)
        note = ""
        if learned is not None and learned.tokens < tokens:
            note = f" (an overflow error on {_day(learned.learned_at)} said {learned.tokens:,})"
        return Window(tokens, "config", f"config: {where}{note}")

    def _resolve(self, slot: Slot, said: ProviderWindow | None) -> Window:
        learned = self._learned_for(slot)
        if said is not None and said.tokens is not None:
            if learned is not None and learned.provider_said == said.tokens and learned.tokens < said.tokens:
                return Window(
                    learned.tokens,
                    "learned",
                    f"learned from an overflow error on {_day(learned.learned_at)} (the provider's metadata says "
                    f"{said.tokens:,}: {said.source})",
                )
            return Window(said.tokens, "provider", f"provider: {said.source}")
        if learned is not None:
            return Window(learned.tokens, "learned", f"learned from an overflow error on {_day(learned.learned_at)}")
        why = said.source if said is not None else "the provider has not been asked"
        return Window(None, "unknown", f"unknown: {why}")

    def _learned_for(self, slot: Slot) -> LearnedWindow | None:
        key = (slot.provider, slot.model)
        with self._lock:
            if key in self._learned:
                return self._learned[key]
        stored = self._memory.learned_window(slot.provider, slot.model) if self._memory is not None else None
        with self._lock:
            return self._learned.setdefault(key, stored)


def _day(seconds: float) -> str:
    return datetime.fromtimestamp(seconds).strftime("%Y-%m-%d")
