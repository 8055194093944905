"""`MoAChatCompletions`: the MoA engine behind the shape of `client.chat.completions.create(...)`.

The same messages and tools go in; what comes out is the aggregator's response — or, with stream=True,
the aggregator's raw stream, returned verbatim so the caller streams the acting model's words as they
come. This module keeps the name the seed's contract gives it (`agent.moa_loop` there); the work is done
by `moa_chat.engine`. `call_llm` is looked up here at call time, which is what the seed's tests replace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .config import Config, Preset, load_config
from .engine import CancelToken, MoAEngine, Observer, ReferenceFinished
from .engine.privacy import model_filter
from .llm import ChatRequest, Timeout, call_llm
from .llm.messages import Message, StreamOptions, ToolSpec
from .providers import choose_start


class MoAChatCompletions:
    """A chat-completions facade backed by a MoA preset. One instance serves one conversation: under
    `fanout: user_turn` the references' guidance is reused across the tool rounds of a user turn."""

    def __init__(
        self, preset_name: str | None = None, *, config: Config | None = None, observer: Observer | None = None
    ) -> None:
        self.config = config or load_config()
        self.preset: Preset = choose_start(self.config, preset_name).preset
        self.observer = observer
        self._engine: MoAEngine | None = None

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

        Keyword arguments a chat-completions caller may also pass (model, temperature, ...) are accepted
        and ignored: the preset decides the models and their settings.
        """
        engine = self._engine_for(cancel, observer or self.observer)
        return engine.open_aggregator(messages, tools, stream=stream, timeout=timeout, stream_options=stream_options)

    def _engine_for(self, cancel: CancelToken | None, observer: Observer | None) -> MoAEngine:
        if self._engine is None:
            # The engine the chat runs, with the config's privacy filter on what leaves the machine.
            self._engine = MoAEngine(self.config, self.preset, call=_call_llm, message_filter=model_filter(self.config))
        # Each call may bring its own cancel token and observer; the guidance it reuses stays.
        self._engine.cancel = cancel or CancelToken()
        self._engine.observer = observer
        return self._engine

    @property
    def last_references(self) -> tuple[ReferenceFinished, ...]:
        return self._engine.last_references if self._engine else ()


def _call_llm(request: ChatRequest) -> object:
    """The engine's request in the seed's keyword form, sent through this module's `call_llm` (found here at
    call time, where the seed's tests replace it); unreplaced, that is `llm.call_llm_request` on the wire."""
    return call_llm(**request.as_call_kwargs())
