"""One model call, references and aggregator alike: the request (`slot_request`, the one place a
`ChatRequest` is built from a preset's slot), the one loop that reads its answer, its timings, and the ledger
record it leaves.

Reading goes through `CancelToken`: the request runs so that a cancel returns at once (even before the
first byte), and the open stream is closed on cancel so a blocked read ends immediately.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from typing import Literal

from ..config import Config, Slot
from ..config.model import NetworkLimits
from ..config.pricing import FREE, Price
from ..llm import (
    CallLLM,
    ChatRequest,
    CutOff,
    LLMCallError,
    StreamAssembler,
    TimedOut,
    close_stream,
    closed_midway,
    describe_error,
    is_complete_response,
    is_transient,
    load_sdk,
    note_bytes,
    sending,
    stream_chunks,
)
from ..llm.messages import Message, StreamOptions, ToolSpec
from ..llm.request import Sampling, Timeout
from . import clock
from .cancel import Cancelled, CancelToken
from .events import CallRecord, CallRetrying, CallStatus, Role
from .retry import RetryPolicy
from .watchdog import WATCHDOG, ByteWatch

Task = Literal["moa_reference", "moa_aggregator", "moa_agreement"]
# What the engine asks of a provider for a streamed call: usage in its last chunk, for the ledger.
WITH_USAGE: StreamOptions = {"include_usage": True}
# Tracing a call: its record, request and answer as one JSON-ready entry (store.traces.TraceWriter).
Tracer = Callable[[dict[str, object]], None]
# What leaves the machine under `privacy_filter: full`: the messages, redacted.
MessageFilter = Callable[[Sequence[Message]], list[Message]]


def slot_request(
    config: Config,
    slot: Slot,
    *,
    task: Task,
    messages: Sequence[Message],
    preset_temperature: float | None,
    tools: Sequence[ToolSpec] | None = None,
    stream: bool = True,
    stream_options: StreamOptions | None = None,
    timeout: Timeout | None = None,
    max_retries: int | None = None,
) -> ChatRequest:
    """The request to one slot: every reference (each sample, each layer) and the aggregator are built here.

    The slot's settings that were set go in (its temperature, else the preset's for its role); unset ones
    stay off the wire so provider defaults apply. A streamed call asks for usage unless told otherwise."""
    temperature = slot.temperature if slot.temperature is not None else preset_temperature
    return ChatRequest(
        model=slot.model,
        messages=messages,
        provider=slot.provider,
        task=task,
        tools=tools,
        sampling=Sampling(temperature=temperature, max_tokens=slot.max_tokens, reasoning_effort=slot.reasoning_effort),
        timeout=timeout,
        stream=stream,
        stream_options=(stream_options if stream_options is not None else WITH_USAGE) if stream else None,
        extra_body=slot.extra_body or None,
        max_retries=max_retries,
        config=config,
    )


class ModelCall:
    """A request to one slot and the reading of its answer into `assembler`.

    The call has its own cancel token (a child of the turn's), so a time limit or a dropped reference
    ends this call alone. `run` is the whole call: send, read, and send again after a transient failure,
    as long as no answer has reached the caller; `open` and `read` are its two halves.
    """

    def __init__(
        self,
        *,
        role: Role,
        slot: Slot,
        request: ChatRequest,
        call: CallLLM,
        cancel: CancelToken,
        index: int = 0,
        iteration: int = 1,
        layer: int = 1,
        label: str | None = None,
        limits: NetworkLimits | None = None,
        policy: RetryPolicy | None = None,
        price: Price | None = None,
        tracer: Tracer | None = None,
        message_filter: MessageFilter | None = None,
        on_sent: Callable[[], object] | None = None,
    ) -> None:
        self.role, self.slot, self.request, self.index, self.iteration = role, slot, request, index, iteration
        # Called when the request has left (llm.sending), or at the latest when `open` returns or fails; maybe
        # more than once (a retry, or both ways), from the request's thread or the caller's.
        self.on_sent = on_sent
        self.layer, self.label = layer, label or slot.label
        self.price = price
        self.tracer = tracer
        if message_filter is not None:  # privacy_filter: full — what leaves the machine is redacted
            self.request = dataclasses.replace(request, messages=message_filter(request.messages))
        self._call = call
        self._cancel = cancel.child()
        self.limits = limits
        self.policy = policy or (RetryPolicy.from_limits(limits) if limits else RetryPolicy(max_retries=0))
        self.assembler = StreamAssembler()
        self.started_at: float | None = None
        self.first_token_at: float | None = None
        self.first_reasoning_at: float | None = None
        self.attempts = 0
        self._response: object = None
        self._watch: ByteWatch | None = None
        self._expired: str | None = None

    # ------------------------------------------------------------------ the whole call

    def run(
        self,
        on_text: Callable[[str], None],
        *,
        abandoned: Callable[[], bool] = lambda: False,
        on_retry: Callable[[CallRetrying], None] | None = None,
        restarts: int = 0,
        on_restart: Callable[[CutOff, str], None] | None = None,
        on_reasoning: Callable[[str], None] | None = None,
    ) -> None:
        """Send, read the whole answer, and retry transient failures that come before any of it.

        A reference is retried after a cut-off too, text or not: its text is never the answer, so another
        request loses nothing. An aggregator's reply cut off after text has arrived is asked again up to
        `restarts` times (a front end that can show a fresh reply opts in), `on_restart` told first with
        the cut-off text. Raises like `read`; an answer that is empty (no text, no tool call) is a failure too.
        `on_reasoning` takes a reasoning model's thinking, piece by piece, as `read` does.
        """
        try:
            while True:
                try:
                    self.open()
                    self.read(on_text, abandoned=abandoned, on_reasoning=on_reasoning)
                    if not abandoned():
                        self._check_not_empty()
                    return
                except LLMCallError as exc:
                    if abandoned():
                        raise
                    delay = self._retry_delay(exc, restarts)
                    if delay is None:
                        refusal = self.policy.refusal(exc)
                        if refusal is not None:
                            raise self._error(refusal) from exc
                        raise
                    if self.role == "aggregator" and self.assembler.text:
                        restarts -= 1
                        if on_restart is not None and isinstance(exc, CutOff):
                            on_restart(exc, self.assembler.text)
                    elif on_retry is not None:
                        on_retry(
                            CallRetrying(
                                self.role,
                                self.index,
                                self.label,
                                self.attempts + 1,
                                self.policy.max_retries + 1,
                                round(delay, 2),
                                exc.reason,
                            )
                        )
                    self._cancel.sleep(delay)
                    self.assembler.clear()
                    self.first_token_at = self.first_reasoning_at = None
        finally:
            self._cancel.release()

    def _retry_delay(self, exc: LLMCallError, restarts: int) -> float | None:
        """Seconds before asking again after `exc`, or None to let it stand."""
        cut = isinstance(exc, CutOff)
        if self.role == "reference":
            return self.policy.delay(exc, self.attempts - 1, transient=True if cut else None)
        if self.assembler.text:
            # Text was shown: a retry is a fresh reply, only where the caller can show it as one, and never
            # when retries are switched off (max_retries: 0).
            if not (cut and restarts > 0 and self.policy.max_retries > 0):
                return None
            return self.policy.delay(exc, 0, transient=True)
        if self.assembler.has_output:  # part of a tool call: a retry would run a different one
            return None
        return self.policy.delay(exc, self.attempts - 1)

    def _check_not_empty(self) -> None:
        if self.assembler.text.strip() or self.assembler.tool_calls():
            return
        finish = self.assembler.finish_reason
        why = {
            "length": ": max_tokens was used up before any answer text",
            "content_filter": ": stopped by the provider's content filter",
        }.get(finish or "", "")
        raise self._error(
            f"returned an empty answer (finish reason: {finish}){why}",
            transient=finish not in ("length", "content_filter"),
        )

    def _error(self, reason: str, *, transient: bool = False) -> LLMCallError:
        return LLMCallError(
            reason,
            provider=self.slot.provider,
            model=self.slot.model,
            task=self.request.task,
            transient=transient,
        )

    # ------------------------------------------------------------------ the request

    def open(self) -> object:
        """Send the request; returns what the `CallLLM` returned (a raw stream, or a complete response)."""
        self.attempts += 1
        self._expired = None
        self._response = None
        request = self.request
        on_sent = self.on_sent

        def send() -> object:
            # The SDK's import (0.5-1.5 s, once a process, when the chat's warm-up has not done it yet) is not
            # the provider's time: the call's clocks, its timeout's too, start once it is loaded.
            load_sdk()
            self._cancel.raise_if_cancelled()  # walked away from meanwhile: start no watch nobody would stop
            if self.started_at is None:  # a retry's time counts: the user waits through it
                self.started_at = clock.monotonic()
            self._start_watch()
            with sending(on_sent) if on_sent is not None else contextlib.nullcontext():
                return self._call(request)

        try:
            self._response = self._cancel.call(send, discard=close_stream, name=f"moa-{self.role}-request")
        except Cancelled:
            self._stop_watch()
            if self._expired is not None:
                raise self._timed_out() from None
            raise
        except BaseException:
            self._stop_watch()
            raise
        finally:
            if on_sent is not None:
                on_sent()  # an injected CallLLM that reaches no wire, or one that failed before its request left
        if is_complete_response(self._response):
            self._stop_watch()  # nothing left to wait for
        else:
            note_bytes(self._response, self._byte)  # else the reading loop's chunks are the signs of life
        return self._response

    def release(self) -> None:
        """For a caller that reads the stream itself (the seed's facade): stop watching and detach."""
        self._stop_watch()
        self._cancel.release()

    def abandon(self) -> None:
        """Give up on this call from another thread (a timed-out reference): a request still waiting for
        its first byte is walked away from, and an open stream is closed, so its blocked read ends at once."""
        self._stop_watch()
        self._cancel.cancel()
        if self._response is not None and not is_complete_response(self._response):
            with contextlib.suppress(Exception):  # already closed, or a transport that will not say
                close_stream(self._response)

    # ------------------------------------------------------------------ time limits

    def _start_watch(self) -> None:
        limits = self.limits
        if limits is None:
            return
        self._watch = ByteWatch(first_token=limits.first_token_timeout, stall=limits.stall_timeout, expire=self._expire)
        WATCHDOG.watch(self._watch)

    def _stop_watch(self) -> None:
        if self._watch is not None:
            WATCHDOG.unwatch(self._watch)

    def _byte(self) -> None:
        watch = self._watch
        if watch is not None:
            if not watch.answering and self.assembler.answer_chunks:
                watch.answer()
            else:
                watch.byte()

    def _expire(self, reason: str) -> None:
        """Called by the watchdog's thread: end this call now; its reader raises TimedOut."""
        self._expired = reason
        self._cancel.cancel()
        response = self._response
        if response is not None and not is_complete_response(response):
            with contextlib.suppress(Exception):
                close_stream(response)

    def _timed_out(self) -> TimedOut:
        return TimedOut(
            self._expired or "timed out",
            provider=self.slot.provider,
            model=self.slot.model,
            task=self.request.task,
        )

    # ------------------------------------------------------------------ reading

    def read(
        self,
        on_text: Callable[[str], None],
        *,
        abandoned: Callable[[], bool] = lambda: False,
        on_reasoning: Callable[[str], None] | None = None,
    ) -> None:
        """Read the answer to its end, calling `on_text` with each piece of answer text (and `on_reasoning`,
        if given, with each piece of a reasoning model's thinking).

        Raises Cancelled when the turn was cancelled, TimedOut past a time limit, CutOff for an answer
        that stopped half-way, LLMCallError (naming the slot) for any other fault. `abandoned` lets a
        supervisor that already gave up on this call (a timeout) stop the loop.
        """
        try:
            self._read(on_text, abandoned, on_reasoning)
        finally:
            self._stop_watch()

    def _read(
        self,
        on_text: Callable[[str], None],
        abandoned: Callable[[], bool],
        on_reasoning: Callable[[str], None] | None,
    ) -> None:
        response = self._response
        assembler = self.assembler
        if is_complete_response(response):  # a server (or an injected CallLLM) that answers in one piece
            text = assembler.feed_response(response)
            self._thought(on_reasoning)
            self._text(text, on_text)
            return
        if response is None or not hasattr(response, "__iter__"):
            raise self._error(f"the provider answered with {type(response).__name__}, not a stream of chat chunks")
        try:
            with self._cancel.closing(lambda: close_stream(response)):
                for chunk in stream_chunks(response):
                    if abandoned():
                        break
                    self._cancel.raise_if_cancelled()
                    text = assembler.feed(chunk)
                    if assembler.reasoning_added:
                        self._thought(on_reasoning)
                    self._text(text, on_text)
                    self._byte()
        except Cancelled:
            if self._expired is not None:
                raise self._timed_out() from None
            raise
        except Exception as exc:
            if self._expired is not None:
                raise self._timed_out() from exc
            if self._cancel.cancelled:  # the read failed because the cancel closed the stream
                raise Cancelled() from exc
            closed = closed_midway(exc)
            if closed is not None:
                raise CutOff(
                    provider=self.slot.provider,
                    model=self.slot.model,
                    task=self.request.task,
                    characters=self._characters(),
                    closed=closed,
                ) from exc
            raise self._error(describe_error(exc), transient=is_transient(exc)) from exc
        if self._expired is not None:
            raise self._timed_out()
        self._cancel.raise_if_cancelled()
        if self.assembler.finish_reason is None and not abandoned():
            # A clean end of stream with no finish reason: a proxy or server that stopped half-way.
            raise CutOff(
                provider=self.slot.provider,
                model=self.slot.model,
                task=self.request.task,
                characters=self._characters(),
            )

    def _characters(self) -> int:
        return len(self.assembler.text) + sum(len(c.arguments) for c in self.assembler.tool_calls())

    def _thought(self, on_reasoning: Callable[[str], None] | None) -> None:
        """The chunk just fed carried reasoning (if any): note when thinking began, and pass it on."""
        added = self.assembler.reasoning_added
        if added:
            if self.first_reasoning_at is None:
                self.first_reasoning_at = clock.monotonic()
            if on_reasoning is not None:
                on_reasoning(added)

    def _text(self, text: str, on_text: Callable[[str], None]) -> None:
        if text:
            if self.first_token_at is None:
                self.first_token_at = clock.monotonic()
            on_text(text)

    # ------------------------------------------------------------------ what it cost

    def elapsed(self) -> float:
        return clock.monotonic() - self.started_at if self.started_at is not None else 0.0

    def first_token_seconds(self) -> float | None:
        if self.first_token_at is None or self.started_at is None:
            return None
        return round(self.first_token_at - self.started_at, 3)

    def thinking_seconds(self) -> float | None:
        """Seconds from the request to the first reasoning delta (None: no reasoning yet)."""
        if self.first_reasoning_at is None or self.started_at is None:
            return None
        return round(self.first_reasoning_at - self.started_at, 3)

    def cost(self) -> float | None:
        usage = self.assembler.usage
        if usage is None:  # no tokens reported: a free model (this machine's) still costs nothing
            return 0.0 if self.price == FREE else None
        if usage.cost is not None:
            return usage.cost
        return self.price.cost(usage.prompt_tokens, usage.completion_tokens) if self.price else None

    def record(self, status: CallStatus, error: str | None = None) -> CallRecord:
        record = self._record(status, error)
        if self.tracer is not None:
            with contextlib.suppress(Exception):  # a trace that cannot be written never fails the call
                self.tracer(
                    {
                        **record.as_dict(),
                        "request": self.request.as_trace(),
                        "answer": self.assembler.text,
                        "reasoning": self.assembler.reasoning or None,
                        "tool_calls": [c.as_message_part() for c in self.assembler.tool_calls()] or None,
                        "attempts": self.attempts,
                    }
                )
        return record

    def _record(self, status: CallStatus, error: str | None = None) -> CallRecord:
        return CallRecord(
            role=self.role,
            label=self.label,
            index=self.index,
            iteration=self.iteration,
            layer=self.layer,
            status=status,
            usage=self.assembler.usage,
            seconds=round(self.elapsed(), 3),
            first_token_seconds=self.first_token_seconds(),
            finish_reason=self.assembler.finish_reason,
            error=None if status == "ok" else error,
            cost=self.cost(),
        )
