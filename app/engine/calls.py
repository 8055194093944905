"""One model call, references and aggregator alike: the request, the one loop that reads its answer, its
timings, and the ledger record it leaves.

Reading goes through `CancelToken`: the request runs so that a cancel returns at once (even before the
first byte), and the open stream is closed on cancel so a blocked read ends immediately.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from ..config import Slot
from ..llm import CutOff, LLMCallError, StreamAssembler, close_stream, describe_error, is_complete_response
from . import clock
from .cancel import Cancelled, CancelToken
from .events import CallRecord, CallStatus, Role

CallLLM = Callable[..., Any]


def slot_options(slot: Slot, preset_temperature: float | None) -> dict[str, Any]:
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


class ModelCall:
    """A request to one slot and the reading of its answer into `assembler`."""

    def __init__(
        self,
        *,
        role: Role,
        slot: Slot,
        request: dict[str, Any],
        call: CallLLM,
        cancel: CancelToken,
        index: int = 0,
        iteration: int = 1,
    ) -> None:
        self.role, self.slot, self.request, self.index, self.iteration = role, slot, request, index, iteration
        self._call, self._cancel = call, cancel
        self.assembler = StreamAssembler()
        self.started_at: float | None = None
        self.first_token_at: float | None = None
        self._response: Any = None

    # ------------------------------------------------------------------ the request

    def open(self) -> Any:
        """Send the request; returns what `call_llm` returned (a raw stream, or a complete response)."""
        self.started_at = clock.monotonic()
        request = self.request
        self._response = self._cancel.call(
            lambda: self._call(**request), discard=close_stream, name=f"moa-{self.role}-request"
        )
        return self._response

    def abandon(self) -> None:
        """Give up on this call from another thread (a timed-out reference): a request still waiting for
        its first byte is walked away from, and an open stream is closed, so its blocked read ends at once."""
        self._cancel.cancel()
        if self._response is not None and not is_complete_response(self._response):
            with contextlib.suppress(Exception):  # already closed, or a transport that will not say
                close_stream(self._response)

    # ------------------------------------------------------------------ reading

    def read(self, on_text: Callable[[str], None], *, abandoned: Callable[[], bool] = lambda: False) -> None:
        """Read the answer to its end, calling `on_text` with each piece of answer text.

        Raises Cancelled when the turn was cancelled, LLMCallError (naming the slot) for any other fault.
        `abandoned` lets a supervisor that already gave up on this call (a timeout) stop the loop.
        """
        response = self._response
        if is_complete_response(response):  # a server (or a substituted call_llm) that answers in one piece
            self._text(self.assembler.feed_response(response), on_text)
            return
        if response is None or not hasattr(response, "__iter__"):
            raise LLMCallError(
                f"the provider answered with {type(response).__name__}, not a stream of chat chunks",
                provider=self.slot.provider,
                model=self.slot.model,
                task=self.request.get("task"),
            )
        try:
            with self._cancel.closing(lambda: close_stream(response)):
                for chunk in response:
                    if abandoned():
                        break
                    self._cancel.raise_if_cancelled()
                    self._text(self.assembler.feed(chunk), on_text)
        except Cancelled:
            raise
        except Exception as exc:
            if self._cancel.cancelled:  # the read failed because the cancel closed the stream
                raise Cancelled() from exc
            raise LLMCallError(
                describe_error(exc), provider=self.slot.provider, model=self.slot.model, task=self.request.get("task")
            ) from exc
        self._cancel.raise_if_cancelled()
        if self.assembler.finish_reason is None and not abandoned():
            # A clean end of stream with no finish reason: a proxy or server that stopped half-way.
            raise CutOff(
                provider=self.slot.provider,
                model=self.slot.model,
                task=self.request.get("task"),
                characters=len(self.assembler.text) + sum(len(c.arguments) for c in self.assembler.tool_calls()),
            )

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

    def record(self, status: CallStatus, error: str | None = None) -> CallRecord:
        return CallRecord(
            role=self.role,
            label=self.slot.label,
            index=self.index,
            iteration=self.iteration,
            status=status,
            usage=self.assembler.usage,
            seconds=round(self.elapsed(), 3),
            first_token_seconds=self.first_token_seconds(),
            finish_reason=self.assembler.finish_reason,
            error=None if status == "ok" else error,
        )
