"""The Mixture-of-Agents engine: references advise in parallel, then the aggregator acts.

An engine serves one user turn on one preset. Each aggregator round (`aggregate`, or `open_aggregator`
for a caller that reads the stream itself) first gets the references' guidance: a fresh fan-out, or,
under `fanout: user_turn`, the one already run for this user turn. Every model call goes through
`ModelCall`, so references and aggregator share one request path, one reading loop and one record.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

from ..config import Config, Preset
from ..llm import CallLLM, CutOff, LLMCallError, StreamAssembler, TimedOut, Timeout, call_llm_request, describe_error
from ..llm.messages import Message, StreamOptions, ToolSpec
from .agreement import AgreementCheck, AnswerExtractor
from .calls import MessageFilter, ModelCall, Tracer, slot_request
from .cancel import Cancelled, CancelToken
from .events import (
    AggregatorFinished,
    AggregatorStarted,
    CallRecord,
    CallStatus,
    LayersDecided,
    Observer,
    ReasoningDelta,
    ReferenceFinished,
    ReferenceQueued,
    ReplyDelta,
    ReplyRestarted,
    emit,
)
from .fanout import FanOut
from .guidance import continues_after_user, guidance_message, layer_message, reference_messages, turn_key
from .panel import layer_panel


class MoAEngine:
    def __init__(
        self,
        config: Config,
        preset: Preset,
        *,
        call: CallLLM = call_llm_request,
        cancel: CancelToken | None = None,
        observer: Observer | None = None,
        references: tuple[ReferenceFinished, ...] | None = None,
        solo: bool = False,
        rng: random.Random | None = None,
        tracer: Tracer | None = None,
        message_filter: MessageFilter | None = None,
        restart_cut_reply: bool = False,
        answer_extractor: AnswerExtractor | None = None,
    ) -> None:
        self.config, self.preset = config, preset
        # Ask the aggregator once more when its reply is cut off after text arrived (ReplyRestarted): for a
        # front end that can show the fresh reply as one, the cut-off text as an earlier version.
        self.restart_cut_reply = restart_cut_reply
        # Solo: the aggregator alone, no references and no guidance (a quick question).
        self.solo = solo
        self.tracer = tracer  # every finished call's request and answer (save_traces)
        self.message_filter = message_filter  # applied to every request's messages (privacy_filter: full)
        self._rng = rng or random.Random()
        # The order the last layer's answers were shown to the aggregator in (indices), with `shuffle:`.
        self.reference_order: list[int] | None = None
        # Answers given (a regeneration's stored ones) serve every round: no reference is asked.
        self._given = references
        self.call = call
        self.cancel = cancel or CancelToken()
        self.observer = observer
        self.iteration = 0  # aggregator rounds so far
        self.last_references: tuple[ReferenceFinished, ...] = ()  # the latest fan-out's answers
        # How many layers the latest fan-out ran, and (`layers: auto`) why no more: for the turn's result.
        self.layers_run = 0
        self.layers_reason: str | None = None
        # `layers: auto`: reads the answers when the caller can (an eval task's checker), else asks a judge.
        self._agreement = (
            AgreementCheck(
                config,
                preset,
                call=call,
                cancel=self.cancel,
                observer=observer,
                extractor=answer_extractor,
                tracer=tracer,
                message_filter=message_filter,
            )
            if preset.auto_layers
            else None
        )
        self._guidance: tuple[str | None, tuple[ReferenceFinished, ...]] | None = None

    # ------------------------------------------------------------------ references

    def run_references(self, messages: Sequence[Message], *, iteration: int = 1) -> tuple[ReferenceFinished, ...]:
        """Every layer of the panel, one after the other: a later layer also reads the one before. Under
        `layers: auto`, a layer whose references agree is the last (LayersDecided says how many ran, and why)."""
        results: list[ReferenceFinished] = []
        layer_results: tuple[ReferenceFinished, ...] = ()
        first_index = 0
        most = self.preset.layers
        self.layers_reason = None
        for layer in range(1, most + 1):
            earlier = layer_message(layer_results, anonymous=self.preset.anonymous) if layer > 1 else None
            seats = layer_panel(self.preset, layer, first_index)
            first_index += len(seats)
            if layer > 1 and not any(r.status == "ok" for r in layer_results):
                earlier = None  # nothing to weigh: the layer answers afresh
            fanout = FanOut(
                self.config,
                self.preset,
                reference_messages(messages, earlier),
                call=self.call,
                cancel=self.cancel,
                observer=self.observer,
                iteration=iteration,
                seats=seats,
                tracer=self.tracer,
                message_filter=self.message_filter,
            )
            layer_results = fanout.run()
            results += layer_results
            self.layers_run = layer
            self.cancel.raise_if_cancelled()
            if self._agreement is None:
                continue
            if layer == most:
                self.layers_reason = "no agreement by max_layers"  # the last layer is aggregated unchecked
                break
            verdict = self._agreement.check(messages, layer_results, layer=layer, iteration=iteration)
            if verdict.agreed:
                self.layers_reason = verdict.reason
                break
        if self.layers_reason is not None:
            emit(self.observer, LayersDecided(self.layers_run, most, self.layers_reason))
        self.last_references = tuple(results)
        return self.last_references

    def consult(self, messages: Sequence[Message], *, iteration: int) -> tuple[tuple[ReferenceFinished, ...], bool]:
        """The references' answers for this round, and whether they were reused from earlier in the turn."""
        if self.solo:
            return (), False
        if self._given is not None:
            first = not self.last_references
            if first:
                self.last_references = self._replay(self._given, iteration)
                self.layers_run = max((r.record.layer for r in self._given), default=0)
                if self.preset.auto_layers:  # no check runs: the stored answers' layers are the turn's
                    self.layers_reason = "the stored answers"
                    emit(self.observer, LayersDecided(self.layers_run, self.preset.layers, self.layers_reason))
            return self.last_references, not first
        reuse = self.preset.fanout == "user_turn"
        # Serialising the conversation is only worth it when the guidance may be reused.
        key = turn_key(messages) if reuse else None
        if reuse and continues_after_user(messages) and self._guidance is not None and self._guidance[0] == key:
            return self._guidance[1], True
        results = self.run_references(messages, iteration=iteration)
        self._guidance = (key, results)
        return results, False

    def _replay(self, given: tuple[ReferenceFinished, ...], iteration: int) -> tuple[ReferenceFinished, ...]:
        """Report given answers as this turn's: the same text and status, but no usage, since no tokens
        were spent on them now."""
        replayed = tuple(
            ReferenceFinished(dataclasses.replace(r.record, usage=None, iteration=iteration), r.text, r.reasoning)
            for r in given
        )
        for result in replayed:
            emit(self.observer, ReferenceQueued(result.index, result.label))
            emit(self.observer, result)
        return replayed

    # ------------------------------------------------------------------ the aggregator

    def _aggregator_call(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None,
        *,
        stream: bool,
        timeout: Timeout | None = None,
        stream_options: StreamOptions | None = None,
        max_retries: int | None = None,
    ) -> ModelCall:
        """Consult the references, announce the round, and prepare the aggregator's request."""
        iteration = self.iteration + 1
        results, reused = self.consult(messages, iteration=iteration)
        self.cancel.raise_if_cancelled()
        self.iteration = iteration
        aggregator = self.preset.aggregator
        shown = self._guidance_order(results, reused)
        emit(
            self.observer,
            AggregatorStarted(
                label=aggregator.label,
                iteration=iteration,
                references_ok=sum(r.status == "ok" for r in shown),
                references_total=len(shown),
                guidance_reused=reused,
            ),
        )
        guidance: list[Message] = (
            [] if self.solo else [guidance_message(shown, predates_tools=reused, anonymous=self.preset.anonymous)]
        )
        # A streamed reply's caller may set its own read timeout (the seed's facade forwards the consumer's).
        request = slot_request(
            self.config,
            aggregator,
            task="moa_aggregator",
            messages=[*messages, *guidance],
            preset_temperature=self.preset.aggregator_temperature,
            tools=tools,
            stream=stream,
            stream_options=stream_options,
            timeout=timeout if stream and timeout is not None else aggregator.timeout,
            max_retries=max_retries,
        )
        return ModelCall(
            role="aggregator",
            slot=aggregator,
            request=request,
            call=self.call,
            cancel=self.cancel,
            iteration=iteration,
            limits=self.config.limits(aggregator.provider),
            price=self.config.price(aggregator.label),
            tracer=self.tracer,
            message_filter=self.message_filter,
        )

    def _guidance_order(self, results: tuple[ReferenceFinished, ...], reused: bool) -> list[ReferenceFinished]:
        """The last layer's answers, in the order the aggregator sees them: the preset's, or with
        `shuffle:` a random one drawn once per fan-out (a reused guidance keeps its order)."""
        last = max((r.record.layer for r in results), default=1)
        shown = [r for r in results if r.record.layer == last]
        if self.preset.shuffle and shown:
            if not reused or self.reference_order is None:
                order = [r.index for r in shown]
                self._rng.shuffle(order)
                self.reference_order = order
            by_index = {r.index: r for r in shown}
            shown = [by_index[i] for i in self.reference_order if i in by_index]
        return shown

    def open_aggregator(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] | None = None,
        *,
        stream: bool = False,
        timeout: Timeout | None = None,
        stream_options: StreamOptions | None = None,
    ) -> object:
        """References, then the aggregator's request; returns its response untouched (a raw stream with
        stream=True) for a caller that reads it itself."""
        call = self._aggregator_call(messages, tools, stream=stream, timeout=timeout, stream_options=stream_options)
        try:
            return call.open()
        finally:
            call.release()  # the caller reads, and keeps its own time

    def aggregate(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] | None, reply: StreamAssembler
    ) -> CallRecord:
        """One whole aggregator round: references, the streamed reply read into `reply` (a ReplyDelta per
        piece), and the round's record. On a failure or a cancel, `reply` keeps what arrived, the round is
        still recorded, and the exception (LLMCallError or Cancelled) propagates."""
        # The retries are ModelCall's (see engine/retry.py), not the SDK's.
        call = self._aggregator_call(messages, tools, stream=True, max_retries=0)
        call.assembler = reply

        def finished(status: CallStatus, error: str | None = None) -> CallRecord:
            record = call.record(status, error)
            emit(self.observer, AggregatorFinished(record, call.assembler.reasoning))
            return record

        def restarted(exc: CutOff, text: str) -> None:
            emit(self.observer, ReplyRestarted(call.label, call.iteration, exc.reason, text))

        try:
            call.run(
                lambda text: emit(self.observer, ReplyDelta(text)),
                on_retry=lambda event: emit(self.observer, event),
                restarts=1 if self.restart_cut_reply else 0,
                on_restart=restarted,
                on_reasoning=lambda text: emit(self.observer, ReasoningDelta(call.label, "aggregator", text)),
            )
        except Cancelled:
            finished("cancelled", "cancelled by the user")
            raise
        except CutOff as exc:
            finished("cut_off" if exc.characters else "failed", exc.reason)
            raise
        except TimedOut as exc:
            finished("timeout", exc.reason)
            raise
        except LLMCallError as exc:
            finished("failed", exc.reason)
            raise
        except Exception as exc:
            finished("failed", describe_error(exc))
            raise LLMCallError(
                describe_error(exc), provider=call.slot.provider, model=call.slot.model, task="moa_aggregator"
            ) from exc
        return finished("ok")
