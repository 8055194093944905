"""`MoAChatCompletions`: the MoA engine behind the shape of `client.chat.completions.create(...)`.

The same messages and tools go in; what comes out is the aggregator's response — or, with stream=True,
the aggregator's raw stream, returned verbatim so the caller streams the acting model's words as they
come. This module keeps the name the seed's contract gives it (`agent.moa_loop` there); the work is done
by `moa_chat.engine`. `call_llm` is looked up here at call time, which is what the seed's tests replace.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from .config import Config, Preset, load_config
from .engine import CancelToken, MoAEngine, Observer, ReferenceFinished, TurnEnv, TurnPlan
from .engine.budget import ContextBudget
from .engine.guidance import LastGuidance
from .engine.privacy import model_filter
from .llm import ChatRequest, Timeout, call_llm, warm_up
from .llm.facts import PROCESS_FACTS
from .llm.messages import Message, StreamOptions, ToolSpec
from .llm.tokens import TokenCounter
from .llm.windows import WindowFinder
from .providers import choose_start


class MoAChatCompletions:
    """A chat-completions facade backed by a MoA preset. One instance serves one conversation: under
    `fanout: user_turn` the references' guidance is reused across the tool rounds of a user turn."""

    def __init__(
        self, preset_name: str | None = None, *, config: Config | None = None, observer: Observer | None = None
    ) -> None:
        if "openai" not in sys.modules:
            # The SDK (and what its first request loads) on a background thread from now, so the first
            # create() has its references' requests out as soon as they can go, not after a cold import.
            warm_up()
        self.config = config or load_config()
        self.preset: Preset = choose_start(self.config, preset_name).preset
        self.observer = observer
        self._guidance = LastGuidance()  # the answers of the user turn the calls belong to, across calls
        self._windows = WindowFinder(self.config, PROCESS_FACTS)  # each request fitted to its model's window
        self._counter = TokenCounter(PROCESS_FACTS)
        self._last: MoAEngine | None = None

    def create(
        self,
        *,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None = None,
        stream: bool = False,
        timeout: Timeout | None = None,
        stream_options: StreamOptions | None = None,
        cancel: CancelToken | None = None,
        observer: Observer | None = None,
        **_ignored: Any,
    ) -> Any:
        """Run the references, then call the aggregator with their guidance; return the aggregator's
        chat.completion, or with stream=True its raw stream of chunks (read it like the SDK's).

        `cancel` and `observer` reach every call this one makes (the references, a `layers: auto` judge, the
        aggregator). Keyword arguments a chat-completions caller may also pass (model, temperature, ...) are
        accepted and ignored: the preset decides the models and their settings.
        """
        env = TurnEnv(
            self.config,
            call=_call_llm,
            cancel=cancel or CancelToken(),
            observer=observer or self.observer,
            # The engine the chat runs, with the config's privacy filter on what leaves the machine.
            message_filter=model_filter(self.config),
            budget=ContextBudget(self._windows, self._counter, self.preset),
        )
        engine = self._last = MoAEngine(env, TurnPlan(self.preset), self._guidance)
        return engine.open_aggregator(messages, tools, stream=stream, timeout=timeout, stream_options=stream_options)

    @property
    def last_references(self) -> tuple[ReferenceFinished, ...]:
        return self._last.last_references if self._last else ()


def _call_llm(request: ChatRequest) -> object:
    """The engine's request in the seed's keyword form, sent through this module's `call_llm` (found here at
    call time, where the seed's tests replace it); unreplaced, that is `llm.call_llm_request` on the wire."""
    return call_llm(**request.as_call_kwargs())
