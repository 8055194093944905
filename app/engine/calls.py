"""One model call, references and aggregator alike: the request (`slot_request`, the one place a
`ChatRequest` is built from a preset's slot), and `ModelCall`, which sends it, has its answer read
(engine/reading.py), timed (engine/meter.py) and, after a failure, sent again as the retry policy decides
(engine/retry.py), and leaves the ledger's record of it.

The request runs through the call's `CancelToken`, so that a cancel returns at once, even before the first byte.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from typing import Literal

from ..config import Config, Slot
from ..config.pricing import FREE
from ..llm import (
    ChatRequest,
    ContextOverflow,
    LLMCallError,
    StreamAssembler,
    close_stream,
    is_complete_response,
    load_sdk,
    note_bytes,
    sending,
)
from ..llm.errors import EmptyAnswer
from ..llm.messages import Message, StreamOptions, ToolSpec
from ..llm.request import Sampling, Timeout
from . import vision
from .cancel import Cancelled
from .env import TurnEnv
from .events import CallRecord, CallRetrying, CallStatus, ImagesWithheld, Role
from .fitting import DoesNotFit
from .meter import CallMeter
from .panel import Seat
from .reading import Reading, StreamReader
from .retry import Fail, Restart, RetryPolicy, fault_of

Task = Literal["moa_reference", "moa_aggregator", "moa_agreement", "moa_compaction"]
# What the engine asks of a provider for a streamed call: usage in its last chunk, for the ledger.
WITH_USAGE: StreamOptions = {"include_usage": True}
# Fresh replies one call may ask for after its reply was cut off once text had been shown (where the front end
# can show one).
RESTARTS = 1


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
    """A request to one seat of the turn and the reading of its answer into `assembler`.

    The call has its own cancel token (a child of the turn's), so a time limit or a dropped reference ends
    this call alone. `run` is the whole call: send, read, and after a failure what the retry policy decides;
    `open` sends one attempt (a caller that reads the stream itself, the seed's facade, stops there).
    """

    def __init__(
        self,
        env: TurnEnv,
        role: Role,
        seat: Seat,
        request: ChatRequest,
        *,
        iteration: int = 1,
        assembler: StreamAssembler | None = None,
        on_sent: Callable[[], object] | None = None,
        refit: Callable[[], ChatRequest] | None = None,
    ) -> None:
        """`on_sent` is called when the request has left (llm.sending), or at the latest when `open` returns or
        fails; maybe more than once (a retry, or both ways), from the request's thread or the caller's.
        `refit` builds the request again for the slot's room as the budget knows it now: after an overflow error
        the window it named is learned, and the request fitted to it is sent once more."""
        self.env, self.role, self.seat, self.iteration, self.on_sent = env, role, seat, iteration, on_sent
        self._refit = refit
        self.slot, self.label, self.index, self.layer = seat.slot, seat.label, seat.index, seat.layer
        limits = env.config.limits(seat.slot.provider)
        self.policy = RetryPolicy.from_limits(limits)
        self.price = env.config.price(seat.slot.label)
        # A model that cannot see gets notes in place of the images; the turn hears of it as the call begins.
        self.request, self.withheld = self._prepared(request)
        self.assembler = assembler if assembler is not None else StreamAssembler()
        self._cancel = env.cancel.child()
        self.meter = CallMeter(limits, env.clock, self._expire)
        self._reader = StreamReader(
            provider=seat.slot.provider, model=seat.slot.model, task=request.task, cancel=self._cancel, meter=self.meter
        )
        self.attempts = 0
        self._response: object = None

    # ------------------------------------------------------------------ the whole call

    def run(
        self,
        reading: Reading,
        *,
        fresh_reply: bool = False,
        on_retry: Callable[[CallRetrying], None] | None = None,
        on_restart: Callable[[LLMCallError, str], None] | None = None,
    ) -> None:
        """Send, read the whole answer into `reading`, and after a failure retry, restart or fail as the retry
        policy decides (engine/retry.py). `fresh_reply`: the front end can show a fresh reply after text has
        been shown (once; `on_restart` is told first, with the text it replaces). Raises like
        `StreamReader.read`; an answer that is empty (no text, no tool call) is a failure too."""
        restarts_left = RESTARTS
        refitted = False
        if self.withheld:
            self.env.emit(ImagesWithheld(self.role, self.index, self.label, self.withheld))
        try:
            while True:
                try:
                    self.open()
                    self._reader.read(self._response, self.assembler, reading)
                    if not reading.abandoned():
                        self._check_not_empty(reading)
                    return
                except ContextOverflow as exc:
                    # Never sent again as it is: the window it names is learned, and once, fitted to it.
                    if reading.abandoned() or not self._learn(exc) or refitted or self._refit is None:
                        raise
                    refitted = True
                    self.request, _ = self._prepared(self._refit())
                    self.assembler.clear()
                    self.meter.forget_answer()
                except LLMCallError as exc:
                    if reading.abandoned():
                        raise
                    if vision.refused_images(exc, self.request):  # sent again at once, with notes for the images
                        self.request, withheld = vision.learned(self.slot, self.request)
                        self.env.emit(ImagesWithheld(self.role, self.index, self.label, withheld, learned=True))
                        self.assembler.clear()
                        self.meter.forget_answer()
                        continue
                    decision = self.policy.decide(
                        self.role,
                        shown_text=bool(reading.answer_of(self.assembler.text)),  # markers are never shown
                        fault=fault_of(exc),
                        attempt=self.attempts,
                        restarts_left=restarts_left,
                        can_show_fresh=fresh_reply,
                    )
                    if isinstance(decision, Fail):
                        if decision.reason is not None:
                            raise self._reader.error(f"{exc.reason}; {decision.reason}") from exc
                        raise
                    if isinstance(decision, Restart):
                        restarts_left -= 1
                        if on_restart is not None:
                            on_restart(exc, self.assembler.text)
                    elif on_retry is not None:
                        attempts = self.policy.max_retries + 1
                        after = round(decision.after, 2)
                        on_retry(
                            CallRetrying(
                                self.role, self.index, self.label, self.attempts + 1, attempts, after, exc.reason
                            )
                        )
                    self._cancel.sleep(decision.after)
                    self.assembler.clear()
                    self.meter.forget_answer()
        finally:
            self._cancel.release()

    def _prepared(self, request: ChatRequest) -> tuple[ChatRequest, int]:
        """`request` as it leaves the machine: under `privacy_filter: full`, its messages redacted; for a model
        that cannot see, notes in place of its images (and the images so withheld)."""
        if self.env.message_filter is not None:
            request = dataclasses.replace(request, messages=self.env.message_filter(request.messages))
        return vision.fitted(self.slot, request)

    def _learn(self, overflow: ContextOverflow) -> bool:
        """Keep the window an overflow error named; whether the request can be fitted to what is known now."""
        budget = self.env.budget
        if budget is None or isinstance(overflow, DoesNotFit):
            return False
        return budget.learn(self.slot, overflow).tokens is not None

    def _check_not_empty(self, reading: Reading) -> None:
        text = self.assembler.text
        if reading.answer_of(text).strip() or self.assembler.tool_calls():
            return
        finish = self.assembler.finish_reason
        why = {
            "length": ": max_tokens was used up before any answer text",
            "content_filter": ": stopped by the provider's content filter",
        }.get(finish or "", "")
        if text.strip():
            why = ": it only copied moa-chat's own marker lines" + (f", then {why[2:]}" if why else "")
        raise EmptyAnswer(
            f"returned an empty answer (finish reason: {finish}){why}",
            provider=self.slot.provider,
            model=self.slot.model,
            task=self.request.task,
            transient=finish not in ("length", "content_filter"),
        )

    # ------------------------------------------------------------------ one attempt

    def open(self) -> object:
        """Send the request; returns what the `CallLLM` returned (a raw stream, or a complete response)."""
        self.attempts += 1
        self._response = None
        request, on_sent, meter = self.request, self.on_sent, self.meter

        def send() -> object:
            # The SDK's import (once a process, when the chat's warm-up has not done it yet) is not
            # the provider's time: the call's clocks, its timeout's too, start once it is loaded.
            load_sdk()
            self._cancel.raise_if_cancelled()  # walked away from meanwhile: start no watch nobody would stop
            meter.begin_attempt()
            with sending(on_sent) if on_sent is not None else contextlib.nullcontext():
                return self.env.call(request)

        try:
            self._response = self._cancel.call(send, discard=close_stream, name=f"moa-{self.role}-request")
        except Cancelled:
            meter.stop()
            if meter.expired is not None:
                raise self._reader.timed_out() from None
            raise
        except BaseException:
            meter.stop()
            raise
        finally:
            if on_sent is not None:
                on_sent()  # an injected CallLLM that reaches no wire, or one that failed before its request left
        if is_complete_response(self._response):
            meter.stop()  # nothing left to wait for
        else:  # the bytes as they arrive (keep-alives too) are the signs of life
            note_bytes(self._response, lambda: meter.byte(answering=self.assembler.answer_chunks > 0))
        return self._response

    def release(self) -> None:
        """For a caller that reads the stream itself (the seed's facade): stop watching and detach."""
        self.meter.stop()
        self._cancel.release()

    def abandon(self) -> None:
        """Give up on this call from another thread (a timed-out reference): a request still waiting for
        its first byte is walked away from, and an open stream is closed, so its blocked read ends at once."""
        self.meter.stop()
        self._expire()

    def _expire(self) -> None:
        """End this attempt now (a time limit passed, on the watchdog's thread; or the call was abandoned)."""
        self._cancel.cancel()
        response = self._response
        if response is not None and not is_complete_response(response):
            with contextlib.suppress(Exception):  # already closed, or a transport that will not say
                close_stream(response)

    # ------------------------------------------------------------------ what it cost

    @property
    def started_at(self) -> float | None:
        return self.meter.started_at

    def elapsed(self) -> float:
        return self.meter.elapsed()

    def first_token_seconds(self) -> float | None:
        return self.meter.first_token_seconds()

    def thinking_seconds(self) -> float | None:
        return self.meter.thinking_seconds()

    def cost(self) -> float | None:
        usage = self.assembler.usage
        if usage is None:  # no tokens reported: a free model (this machine's) still costs nothing
            return 0.0 if self.price == FREE else None
        if usage.cost is not None:
            return usage.cost
        return self.price.cost(usage.prompt_tokens, usage.completion_tokens) if self.price else None

    def record(self, status: CallStatus, error: str | None = None) -> CallRecord:
        budget, usage, request = self.env.budget, self.assembler.usage, self.request
        sent_tokens = window = None
        if budget is not None:
            sent_tokens = budget.request(self.slot, request.messages, request.tools)
            window = budget.window(self.slot).tokens
            if usage is not None and usage.prompt_tokens and status == "ok":
                budget.observe(self.slot, request.messages, request.tools, usage.prompt_tokens)
        record = CallRecord(
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
            sent_tokens=sent_tokens,
            window=window,
        )
        tracer = self.env.tracer
        if tracer is not None:
            with contextlib.suppress(Exception):  # a trace that cannot be written never fails the call
                tracer(
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
