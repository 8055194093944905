"""The references, in parallel: each one ends exactly once, as ok, failed, timeout or cancelled.

The caller's thread supervises: it collects answers as they finish, enforces each reference's timeout
(closing its stream), and notices a cancel within `POLL` seconds. Up to `max_workers` kept threads
(engine.threads) only request and read; a reference abandoned by a timeout or a cancel never holds anything
up (see CancelToken.call).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait

from ..config import Preset
from ..llm import ChatRequest, LLMCallError, TimedOut, describe_error, loaded_sdk
from ..llm.messages import Message
from . import threads
from .calls import ModelCall, slot_request
from .cancel import Cancelled
from .echoes import without_echoes
from .env import TurnEnv
from .events import (
    AnswerCut,
    CallStatus,
    ReasoningDelta,
    ReferenceFinished,
    ReferenceProgress,
    ReferenceQueued,
    ReferencesSent,
    ReferenceStarted,
    RequestFitted,
)
from .fitting import DoesNotFit, cut_answers, fit_messages, split
from .guidance import layer_message, reference_messages
from .panel import Seat
from .reading import Reading

PROGRESS_INTERVAL = 0.25  # seconds between progress events of one reference
POLL = 0.05  # how often the supervisor looks at deadlines and the cancel flag


class _Reference:
    def __init__(self, seat: Seat, timeout: float | None, call: ModelCall, unsendable: str | None) -> None:
        self.index, self.slot, self.label, self.timeout, self.call = seat.index, seat.slot, seat.label, timeout, call
        self.layer = seat.layer
        self.unsendable = unsendable  # why its request cannot be sent (longer than its window), if it cannot
        self.result: ReferenceFinished | None = None


class FanOut:
    """One parallel run of a layer's references (`seats`) over the conversation (`messages`), each request fitted
    to its model's window; `earlier`: the previous layer's answers, which a later layer also weighs."""

    def __init__(
        self,
        env: TurnEnv,
        preset: Preset,
        messages: Sequence[Message],
        seats: list[Seat],
        iteration: int = 1,
        earlier: Sequence[ReferenceFinished] = (),
    ) -> None:
        self.env, self.preset, self.iteration = env, preset, iteration
        self._messages, self._earlier = messages, earlier
        self.refs = []
        self._unsent: set[int] = set()  # the seats whose requests have not left yet
        for seat in seats:
            unsendable = None
            try:
                request = self._request(seat)
            except DoesNotFit as exc:  # fails at once, saying why; the others go ahead
                request, unsendable = self._request(seat, fitted=False), exc.reason
            # A call has its own token: a reference given up on is walked away from at once, even while it
            # still waits for the provider's first byte, so no pool thread is left behind to hold up the exit.
            sent = functools.partial(self._sent, seat.index)
            refit = functools.partial(self._request, seat)
            model_call = ModelCall(env, "reference", seat, request, iteration=iteration, on_sent=sent, refit=refit)
            self.refs.append(_Reference(seat, self._timeout(seat), model_call, unsendable))
            if unsendable is None:
                self._unsent.add(seat.index)
        self._lock = threading.Lock()

    def _timeout(self, seat: Seat) -> float | None:
        return seat.slot.timeout if seat.slot.timeout is not None else self.preset.reference_timeout

    def _request(self, seat: Seat, *, fitted: bool = True) -> ChatRequest:
        """The request to `seat`: the references' view of the conversation fitted to its model's room."""
        messages = self._view(seat) if fitted else reference_messages(self._messages, self._layer(self._earlier))
        return slot_request(
            self.env.config,
            seat.slot,
            task="moa_reference",
            messages=messages,
            preset_temperature=self.preset.reference_temperature,
            timeout=self._timeout(seat),
            # Retries are ModelCall's, in sight of the fan-out: a reference dropped stays dropped.
            max_retries=0,
        )

    def _layer(self, answers: Sequence[ReferenceFinished]) -> str | None:
        return layer_message(answers, anonymous=self.preset.anonymous) if answers else None

    def _view(self, seat: Seat) -> list[Message]:
        """The advisor prompt and the conversation as the references see it, with as many recent exchanges as
        fit the seat's room; in a later layer the previous layer's answers too, cut to fit if they must."""
        budget, conversation = self.env.budget, split(self._messages)
        earlier = self._layer(self._earlier)
        if budget is None:
            return reference_messages(self._messages, earlier)
        slot, room = seat.slot, budget.room(seat.slot)

        def count(messages: Sequence[Message]) -> int:
            return budget.request(slot, messages)

        cuts: tuple[AnswerCut, ...] = ()
        try:
            fitted = fit_messages(conversation, room, count, lambda kept: reference_messages(kept, earlier))
        except DoesNotFit:
            if not self._earlier or room.tokens is None:
                raise
            alone = count(reference_messages(conversation.with_older(0), None))
            blank = [dataclasses.replace(answer, text="") for answer in self._earlier]
            overhead = budget.text(slot, self._layer(blank) or "")
            answers, cuts = cut_answers(self._earlier, room.tokens - alone - overhead, lambda t: budget.text(slot, t))
            earlier = self._layer(answers)
            fitted = fit_messages(conversation, room, count, lambda kept: reference_messages(kept, earlier))
        window = budget.window(slot).tokens
        if (fitted.dropped or cuts) and window is not None:
            fitting = RequestFitted("reference", seat.index, seat.label, self.iteration, fitted.tokens, window)
            self.env.emit(dataclasses.replace(fitting, dropped=fitted.dropped, cuts=cuts))
        return fitted.messages

    def run(self) -> tuple[ReferenceFinished, ...]:
        if not self.refs:
            return ()
        for ref in self.refs:
            self.env.emit(ReferenceQueued(ref.index, ref.label, ref.layer))
        for ref in self.refs:
            if ref.unsendable is not None:
                self._finish(ref, "failed", error=ref.unsendable)
        started = self.env.clock()
        futures: dict[Future[bool], _Reference] = {Future(): ref for ref in self.refs if ref.result is None}
        queued = collections.deque(futures.items())
        for _ in range(min(self.preset.max_workers, len(futures))):
            threads.KEPT.start(functools.partial(_work_through, queued, self._ask), "moa-reference")
        try:
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=POLL, return_when=FIRST_COMPLETED)
                for future in done:
                    self._settle(futures[future], future)
                if self.env.cancel.cancelled:
                    for ref in self.refs:
                        self._finish(ref, "cancelled", error="cancelled by the user")
                    break
                for ref in self.refs:
                    began = ref.call.started_at is not None
                    if ref.result is None and ref.timeout is not None and began and ref.call.elapsed() > ref.timeout:
                        self._finish(ref, "timeout", error=f"no complete answer within {ref.timeout:g}s")
                enough = self._enough(started)
                if enough is not None:
                    for ref in self.refs:
                        self._finish(ref, "late", error=enough)
                pending = {f for f in pending if futures[f].result is None}
        finally:
            # Abandon what is still running (its stream was closed); the queued ones never start.
            queued.clear()
            for future in futures:
                future.cancel()
        results = tuple(ref.result for ref in self.refs if ref.result is not None)
        assert len(results) == len(self.refs), "every reference ends exactly once"
        return results

    def _enough(self, started: float) -> str | None:
        """Why the rest need not be waited for (a quorum, or a deadline with an answer in), or None."""
        answered = sum(ref.result is not None and ref.result.status == "ok" for ref in self.refs)
        waiting = any(ref.result is None for ref in self.refs)
        if not waiting or not answered:
            return None
        quorum, deadline = self.preset.quorum, self.preset.deadline
        if quorum is not None and answered >= quorum:
            return f"not waited for: {answered} answered, the quorum is {quorum}"
        if deadline is not None and self.env.clock() - started >= deadline:
            return f"not waited for: the deadline of {deadline:g}s passed"
        return None

    def _settle(self, ref: _Reference, future: Future[bool]) -> None:
        exc = future.exception()
        if exc is None:
            if not future.result():
                self._finish(ref, "cancelled", error="cancelled before it started")
            elif not ref.call.assembler.text.strip():
                self._finish(ref, "failed", error="returned an empty answer")
            else:
                self._finish(ref, "ok")
        elif isinstance(exc, Cancelled):
            self._finish(ref, "cancelled", error="cancelled by the user")
        elif _is_timeout(exc):
            self._finish(ref, "timeout", error=describe_error(exc))
        else:
            self._finish(ref, "failed", error=describe_error(exc))

    def _sent(self, index: int) -> None:
        """A reference's request left (from its thread); after the last one, say so: ReferencesSent."""
        with self._lock:
            if index not in self._unsent:
                return
            self._unsent.discard(index)
            last = not self._unsent
        if last:
            self.env.emit(ReferencesSent(self.refs[0].layer, len(self.refs)))

    def _finish(self, ref: _Reference, status: CallStatus, *, error: str | None = None) -> None:
        with self._lock:
            if ref.result is not None:
                return
            assembler = ref.call.assembler
            text = without_echoes(assembler.text) if status == "ok" else ""  # a later layer's may copy markers
            ref.result = ReferenceFinished(ref.call.record(status, error), text, assembler.reasoning)
        if status in ("timeout", "cancelled", "late"):
            ref.call.abandon()
        self.env.emit(ref.result)

    def _ask(self, ref: _Reference) -> bool:
        """Runs in a pool thread: one reference's streamed answer. False when the turn was cancelled first."""
        if self.env.cancel.cancelled:
            return False
        self.env.emit(ReferenceStarted(ref.index, ref.label))
        last_progress: float | None = None
        thought: list[str] = []  # reasoning not reported yet: it goes out with the next progress event

        def progress(_text: str) -> None:
            nonlocal last_progress
            now = ref.call.elapsed()
            if last_progress is None or now - last_progress >= PROGRESS_INTERVAL:
                last_progress = now
                report_thought()
                self.env.emit(
                    ReferenceProgress(
                        ref.index,
                        ref.label,
                        ref.call.assembler.chunks,
                        round(now, 3),
                        ref.call.first_token_seconds(),
                        text=ref.call.assembler.text,
                        thinking_seconds=ref.call.thinking_seconds(),
                    ),
                )

        def think(text: str) -> None:
            thought.append(text)
            progress(text)

        def report_thought() -> None:
            if thought:
                self.env.emit(ReasoningDelta(ref.label, "reference", "".join(thought), ref.index))
                thought.clear()

        reading = Reading(progress, think, abandoned=lambda: ref.result is not None, answer_of=without_echoes)
        ref.call.run(reading, on_retry=self.env.emit)
        report_thought()
        return True


def _work_through(
    queued: collections.deque[tuple[Future[bool], _Reference]], ask: Callable[[_Reference], bool]
) -> None:
    """One of a fan-out's `max_workers` workers: asks the queued references in turn until none is left."""
    while True:
        try:
            future, ref = queued.popleft()
        except IndexError:
            return
        if not future.set_running_or_notify_cancel():
            continue  # the fan-out ended before this reference's turn came
        try:
            future.set_result(ask(ref))
        except BaseException as exc:
            future.set_exception(exc)


def _is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, TimedOut):
        return True
    openai = loaded_sdk()
    if openai is None:
        return isinstance(exc, TimeoutError)
    if isinstance(exc, openai.APITimeoutError):
        return True
    if isinstance(exc, LLMCallError):
        return isinstance(exc.__cause__, openai.APITimeoutError)
    return "timeout" in type(exc).__name__.lower() or isinstance(exc, TimeoutError)
