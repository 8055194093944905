"""`StreamReader`: the one loop that reads a model's answer, a stream of chunks or a complete response, into a
`StreamAssembler`, and names whatever ends it early.

Reading goes through the call's `CancelToken`: the open stream is closed on cancel, so a blocked read ends at
once. Every fault comes out as an `LLMCallError` naming the slot (`TimedOut`, `CutOff`, `MalformedChunk`, or the
provider's own error), or as `Cancelled`; never as the transport's or the JSON parser's raw exception.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..llm import (
    ContextOverflow,
    CutOff,
    LLMCallError,
    StreamAssembler,
    TimedOut,
    close_stream,
    closed_midway,
    describe_error,
    is_complete_response,
    is_transient,
    overflow_in,
    stream_chunks,
)
from ..llm.errors import MalformedChunk
from ..llm.stream import MalformedStream
from .cancel import Cancelled, CancelToken
from .meter import CallMeter

TextSink = Callable[[str], None]


@dataclass(frozen=True)
class Reading:
    """Where one call's answer goes: its text, its thinking (None: not wanted), a supervisor's word that it no
    longer wants the rest (a reference dropped by a timeout or a quorum), and what of the text is the answer
    (`answer_of`: moa-chat's own marker lines, copied by the model, are not; a reply of nothing else is empty)."""

    on_text: TextSink
    on_reasoning: TextSink | None = None
    abandoned: Callable[[], bool] = lambda: False
    answer_of: Callable[[str], str] = lambda text: text


class StreamReader:
    """Reads the answers of one call (each attempt's in turn) into its assembler."""

    def __init__(self, *, provider: str, model: str, task: str | None, cancel: CancelToken, meter: CallMeter) -> None:
        self.provider, self.model, self.task = provider, model, task
        self._cancel, self._meter = cancel, meter

    def read(self, response: object, assembler: StreamAssembler, reading: Reading) -> None:
        """Read `response` to its end. Raises Cancelled when the turn was cancelled, TimedOut past a time limit,
        CutOff for an answer that stopped half-way, MalformedChunk for a garbled stream, LLMCallError (naming the
        slot) for any other fault."""
        try:
            self._read(response, assembler, reading)
        finally:
            self._meter.stop()

    def _read(self, response: object, assembler: StreamAssembler, reading: Reading) -> None:
        if is_complete_response(response):  # a server (or an injected CallLLM) that answers in one piece
            text = assembler.feed_response(response)
            self._thought(assembler, reading)
            self._text(text, reading)
            return
        if response is None or not hasattr(response, "__iter__"):
            raise self.error(f"the provider answered with {type(response).__name__}, not a stream of chat chunks")
        try:
            with self._cancel.closing(lambda: close_stream(response)):
                for chunk in stream_chunks(response):
                    if reading.abandoned():
                        break
                    self._cancel.raise_if_cancelled()
                    text = assembler.feed(chunk)
                    if assembler.reasoning_added:
                        self._thought(assembler, reading)
                    self._text(text, reading)
                    self._meter.byte(answering=assembler.answer_chunks > 0)
        except Cancelled:
            if self._meter.expired is not None:
                raise self.timed_out() from None
            raise
        except Exception as exc:
            raise self._fault(exc, assembler) from exc
        if self._meter.expired is not None:
            raise self.timed_out()
        self._cancel.raise_if_cancelled()
        if assembler.finish_reason is None and not reading.abandoned():
            # A clean end of stream with no finish reason: a proxy or server that stopped half-way.
            raise self._cut_off(assembler)

    def _fault(self, exc: Exception, assembler: StreamAssembler) -> BaseException:
        """What a read that raised `exc` amounts to."""
        if self._meter.expired is not None:
            return self.timed_out()
        if self._cancel.cancelled:  # the read failed because the cancel closed the stream
            return Cancelled()
        if isinstance(exc, MalformedStream):
            return MalformedChunk(provider=self.provider, model=self.model, task=self.task, sample=exc.sample)
        overflow = overflow_in(exc)  # OpenRouter says so in an error event mid-stream
        if overflow is not None:
            return ContextOverflow(
                provider=self.provider,
                model=self.model,
                task=self.task,
                window=overflow.window,
                prompt_tokens=overflow.prompt_tokens,
                output_tokens=overflow.output_tokens,
            )
        closed = closed_midway(exc)
        if closed is not None:
            return self._cut_off(assembler, closed)
        if isinstance(exc, LLMCallError):
            return exc
        return self.error(describe_error(exc), transient=is_transient(exc))

    def _cut_off(self, assembler: StreamAssembler, closed: str | None = None) -> CutOff:
        characters = len(assembler.text) + sum(len(c.arguments) for c in assembler.tool_calls())
        return CutOff(provider=self.provider, model=self.model, task=self.task, characters=characters, closed=closed)

    def _thought(self, assembler: StreamAssembler, reading: Reading) -> None:
        """The chunk just fed carried reasoning (if any): note when thinking began, and pass it on."""
        added = assembler.reasoning_added
        if added:
            self._meter.thought()
            if reading.on_reasoning is not None:
                reading.on_reasoning(added)

    def _text(self, text: str, reading: Reading) -> None:
        if text:
            self._meter.text()
            reading.on_text(text)

    def timed_out(self) -> TimedOut:
        return TimedOut(self._meter.expired or "timed out", provider=self.provider, model=self.model, task=self.task)

    def error(self, reason: str, *, transient: bool = False) -> LLMCallError:
        return LLMCallError(reason, provider=self.provider, model=self.model, task=self.task, transient=transient)
