"""The Mixture-of-Agents engine: references advise in parallel, then the aggregator acts.

`MoAChatCompletions(preset).create(...)` stands where `client.chat.completions.create(...)` would: the
same messages and tools go in; what comes out is the aggregator's response — or, with stream=True, the
aggregator's raw stream, returned verbatim so the caller streams the acting model's words as they come.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import openai

from . import clock
from .cancel import Cancelled, CancelToken
from .config import Config, Preset, Slot, load_config
from .events import (
    AggregatorStarted,
    Observer,
    ReferenceFinished,
    ReferenceProgress,
    ReferenceQueued,
    ReferenceStarted,
    ReferenceStatus,
    emit,
)
from .guidance import continues_after_user, guidance_message, reference_messages, turn_key
from .llm import LLMCallError, call_llm, close_stream, describe_error
from .stream import StreamAssembler, is_complete_response

PROGRESS_INTERVAL = 0.25  # seconds between progress events of one reference
_POLL = 0.05  # how often the fan-out looks at deadlines and the cancel flag


class MoAChatCompletions:
    """A chat-completions facade backed by a MoA preset."""

    def __init__(
        self,
        preset_name: str | None = None,
        *,
        config: Config | None = None,
        observer: Observer | None = None,
    ) -> None:
        self.config = config or load_config()
        name = preset_name or self.config.default_preset
        if not name:
            from .startup import choose_preset

            name = choose_preset(self.config).name
        self.preset: Preset = self.config.preset(name)
        self.observer = observer
        self.fanouts: list[tuple[ReferenceFinished, ...]] = []  # every fan-out this facade ran, in order
        self._turn: tuple[str | None, tuple[ReferenceFinished, ...]] | None = None
        self._iteration = 0

    def create(
        self,
        *,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        stream: bool = False,
        timeout: Any = None,
        stream_options: dict[str, Any] | None = None,
        cancel: CancelToken | None = None,
        observer: Observer | None = None,
        **_ignored: Any,
    ) -> Any:
        """Run the references, then call the aggregator with their guidance.

        Keyword arguments a chat-completions caller may also pass (model, temperature, ...) are accepted
        and ignored: the preset decides the models and their settings.
        """
        observer = observer or self.observer
        interruptible = cancel is not None
        cancel = cancel or CancelToken()
        results, reused = self._guidance(messages, cancel, observer)
        cancel.raise_if_cancelled()

        aggregator = self.preset.aggregator
        self._iteration += 1
        emit(
            observer,
            AggregatorStarted(
                label=aggregator.label,
                iteration=self._iteration,
                references_ok=sum(r.status == "ok" for r in results),
                references_total=len(results),
                guidance_reused=reused,
            ),
        )
        request: dict[str, Any] = {
            "task": "moa_aggregator",
            "provider": aggregator.provider,
            "model": aggregator.model,
            "messages": [*messages, guidance_message(results, predates_tools=reused)],
            "tools": tools,
            "config": self.config,
            **_slot_options(aggregator, self.preset.aggregator_temperature),
        }
        if stream:
            request["stream"] = True
            request["stream_options"] = stream_options if stream_options is not None else {"include_usage": True}
            read_timeout = timeout if timeout is not None else aggregator.timeout
            if read_timeout is not None:
                request["timeout"] = read_timeout
        elif aggregator.timeout is not None:
            request["timeout"] = aggregator.timeout
        if interruptible:  # Esc must not wait for the aggregator's first byte
            return cancel.call(lambda: call_llm(**request), discard=close_stream, name="moa-aggregator")
        return call_llm(**request)

    # ------------------------------------------------------------------ references

    def _guidance(
        self, messages: list[dict[str, Any]], cancel: CancelToken, observer: Observer | None
    ) -> tuple[tuple[ReferenceFinished, ...], bool]:
        """The references' answers for this call, and whether they were reused from earlier in the turn."""
        # Serialising the conversation is only worth it when the guidance may be reused.
        key = turn_key(messages) if self.preset.fanout == "user_turn" else None
        if (
            self.preset.fanout == "user_turn"
            and continues_after_user(messages)
            and self._turn is not None
            and self._turn[0] == key
        ):
            return self._turn[1], True
        results = self.run_references(messages, cancel=cancel, observer=observer)
        self._turn = (key, results)
        return results, False

    def run_references(
        self,
        messages: list[dict[str, Any]],
        *,
        cancel: CancelToken | None = None,
        observer: Observer | None = None,
    ) -> tuple[ReferenceFinished, ...]:
        fanout = _FanOut(self, reference_messages(messages), cancel or CancelToken(), observer or self.observer)
        results = fanout.run()
        self.fanouts.append(results)
        return results

    @property
    def last_references(self) -> tuple[ReferenceFinished, ...]:
        return self.fanouts[-1] if self.fanouts else ()


def _slot_options(slot: Slot, preset_temperature: float | None) -> dict[str, Any]:
    """The slot's settings that were set; unset ones stay off the wire so provider defaults apply."""
    options: dict[str, Any] = {}
    temperature = slot.temperature if slot.temperature is not None else preset_temperature
    if temperature is not None:
        options["temperature"] = temperature
    if slot.max_tokens is not None:
        options["max_tokens"] = slot.max_tokens
    if slot.reasoning_effort is not None:
        options["reasoning_effort"] = slot.reasoning_effort
    if slot.extra_body:
        options["extra_body"] = slot.extra_body
    return options


@dataclass
class _Reference:
    index: int
    slot: Slot
    timeout: float | None
    started_at: float | None = None
    first_token_at: float | None = None
    result: ReferenceFinished | None = None
    close: Any = None

    def elapsed(self) -> float:
        return clock.monotonic() - self.started_at if self.started_at is not None else 0.0

    def first_token_seconds(self) -> float | None:
        if self.first_token_at is None or self.started_at is None:
            return None
        return self.first_token_at - self.started_at


class _FanOut:
    """One parallel run of the references; each one ends exactly once: ok, failed, timeout or cancelled."""

    def __init__(
        self, engine: MoAChatCompletions, view: list[dict[str, Any]], cancel: CancelToken, observer: Observer | None
    ) -> None:
        self.engine, self.view, self.cancel, self.observer = engine, view, cancel, observer
        preset = engine.preset
        self.refs = [
            _Reference(i, slot, slot.timeout if slot.timeout is not None else preset.reference_timeout)
            for i, slot in enumerate(preset.references)
        ]
        self._lock = threading.Lock()

    def run(self) -> tuple[ReferenceFinished, ...]:
        if not self.refs:
            return ()
        for ref in self.refs:
            emit(self.observer, ReferenceQueued(ref.index, ref.slot.label))
        workers = min(self.engine.preset.max_workers, len(self.refs))
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="moa-reference")
        try:
            futures: dict[Future, _Reference] = {pool.submit(self._ask, ref): ref for ref in self.refs}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=_POLL, return_when=FIRST_COMPLETED)
                for future in done:
                    self._settle_from_future(futures[future], future)
                if self.cancel.cancelled:
                    for ref in self.refs:
                        self._finish(ref, "cancelled", error="cancelled by the user")
                    break
                for ref in self.refs:
                    if (
                        ref.result is None
                        and ref.timeout is not None
                        and ref.started_at is not None
                        and ref.elapsed() > ref.timeout
                    ):
                        self._finish(ref, "timeout", error=f"no complete answer within {ref.timeout:g}s")
                pending = {f for f in pending if futures[f].result is None}
        finally:
            # Abandon what is still running: its stream was closed; pending ones never start.
            pool.shutdown(wait=False, cancel_futures=True)
        results = tuple(ref.result for ref in self.refs)
        assert all(results), "every reference ends exactly once"
        return results  # type: ignore[return-value]

    def _settle_from_future(self, ref: _Reference, future: Future) -> None:
        exc = future.exception()
        if exc is None:
            assembler = future.result()
            if assembler is None:
                self._finish(ref, "cancelled", error="cancelled before it started")
            elif not assembler.text.strip():
                self._finish(ref, "failed", error="returned an empty answer", usage=assembler.usage)
            else:
                self._finish(ref, "ok", text=assembler.text, usage=assembler.usage)
        elif isinstance(exc, Cancelled):
            self._finish(ref, "cancelled", error="cancelled by the user")
        elif _is_timeout(exc):
            self._finish(ref, "timeout", error=describe_error(exc))
        else:
            self._finish(ref, "failed", error=describe_error(exc))

    def _finish(
        self, ref: _Reference, status: ReferenceStatus, *, text: str = "", error: str | None = None, usage: Any = None
    ) -> None:
        with self._lock:
            if ref.result is not None:
                return
            ref.result = ReferenceFinished(
                index=ref.index,
                label=ref.slot.label,
                status=status,
                text=text,
                error=None if status == "ok" else error,
                usage=usage,
                seconds=round(ref.elapsed(), 3),
                first_token_seconds=ref.first_token_seconds(),
            )
            close = ref.close
        if status in ("timeout", "cancelled") and close is not None:
            with contextlib.suppress(Exception):
                close()
        emit(self.observer, ref.result)

    def _ask(self, ref: _Reference) -> StreamAssembler | None:
        """Runs in a pool thread: one reference's streamed answer."""
        if self.cancel.cancelled:
            return None
        ref.started_at = clock.monotonic()
        emit(self.observer, ReferenceStarted(ref.index, ref.slot.label))
        preset = self.engine.preset
        request: dict[str, Any] = {
            "task": "moa_reference",
            "provider": ref.slot.provider,
            "model": ref.slot.model,
            "messages": self.view,
            "config": self.engine.config,
            "stream": True,
            "stream_options": {"include_usage": True},
            **_slot_options(ref.slot, preset.reference_temperature),
        }
        if ref.timeout is not None:
            request["timeout"] = ref.timeout
        # The pool's threads are joined at exit: never leave one waiting on a provider after a cancel.
        result = self.cancel.call(lambda: call_llm(**request), discard=close_stream, name="moa-reference-request")
        assembler = StreamAssembler()
        if is_complete_response(result):
            # A substituted call_llm (or a server that ignores stream=True) may answer in one piece.
            assembler.feed_response(result)
            return assembler

        def close() -> None:
            close_stream(result)

        with self._lock:
            ref.close = close
        last_progress = 0.0
        with self.cancel.closing(close):
            for chunk in result:
                if ref.result is not None:  # timed out or cancelled meanwhile
                    break
                if assembler.feed(chunk):
                    now = clock.monotonic()
                    if ref.first_token_at is None:
                        ref.first_token_at = now
                    if now - last_progress >= PROGRESS_INTERVAL:
                        last_progress = now
                        emit(
                            self.observer,
                            ReferenceProgress(
                                ref.index,
                                ref.slot.label,
                                assembler.chunks,
                                round(ref.elapsed(), 3),
                                ref.first_token_seconds(),
                            ),
                        )
        return assembler


def _is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, openai.APITimeoutError):
        return True
    if isinstance(exc, LLMCallError):
        return isinstance(exc.__cause__, openai.APITimeoutError)
    return "timeout" in type(exc).__name__.lower() or isinstance(exc, TimeoutError)
