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

from ..llm import ChatRequest, CutOff, LLMCallError, StreamAssembler, TimedOut, Timeout, describe_error
from ..llm.messages import Message, StreamOptions, ToolSpec
from .agreement import AgreementCheck
from .calls import ModelCall, slot_request
from .cancel import Cancelled
from .echoes import EchoFilter, without_echoes
from .env import TurnEnv, TurnPlan
from .events import (
    AggregatorFinished,
    AggregatorStarted,
    CallRecord,
    CallRetrying,
    CallStatus,
    LayersDecided,
    ReasoningDelta,
    ReferenceFinished,
    ReferenceQueued,
    ReplyDelta,
    ReplyRestarted,
    RequestFitted,
)
from .fanout import FanOut
from .fitting import fit_aggregator, split
from .guidance import (
    GuidanceMemory,
    LastGuidance,
    continues_after_user,
    guidance_message,
    turn_hash,
)
from .panel import Seat, layer_panel
from .reading import Reading


class MoAEngine:
    def __init__(self, env: TurnEnv, plan: TurnPlan, guidance: GuidanceMemory | None = None) -> None:
        """`guidance` keeps the references' answers of a user turn for its later rounds (`fanout: user_turn`):
        by default this engine's own rounds; the seed's facade and the API keep them across calls."""
        self.env, self.plan, self.preset = env, plan, plan.preset
        self._guidance = guidance if guidance is not None else LastGuidance()
        self._rng = plan.rng or random.Random()
        # The order the last layer's answers were shown to the aggregator in (indices), with `shuffle:`.
        self.reference_order: list[int] | None = None
        self.iteration = 0  # aggregator rounds so far
        self.last_references: tuple[ReferenceFinished, ...] = ()  # the latest fan-out's answers
        self.guidance_reused = False  # a round used answers kept from an earlier one (or an earlier request)
        # How many layers the latest fan-out ran, and (`layers: auto`) why no more: for the turn's result.
        self.layers_run = 0
        self.layers_reason: str | None = None
        # `layers: auto`: reads the answers when the caller can (an eval task's checker), else asks a judge.
        self._agreement = AgreementCheck(env, self.preset, plan.answer_extractor) if self.preset.auto_layers else None

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
            seats = layer_panel(self.preset, layer, first_index)
            first_index += len(seats)
            # A later layer also weighs the one before; with nothing to weigh, it answers afresh.
            earlier = layer_results if any(r.status == "ok" for r in layer_results) else ()
            layer_results = FanOut(self.env, self.preset, messages, seats, iteration, earlier).run()
            results += layer_results
            self.layers_run = layer
            self.env.cancel.raise_if_cancelled()
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
            self.env.emit(LayersDecided(self.layers_run, most, self.layers_reason))
        self.last_references = tuple(results)
        return self.last_references

    def consult(self, messages: Sequence[Message], *, iteration: int) -> tuple[tuple[ReferenceFinished, ...], bool]:
        """The references' answers for this round, and whether they were kept from an earlier round (or, for
        the facade and the API, an earlier request of the same user turn)."""
        plan = self.plan
        if plan.solo:
            return (), False
        if plan.given is not None:
            first = not self.last_references
            if first:
                self.last_references = self._replay(plan.given, iteration)
                self.layers_run = max((r.record.layer for r in plan.given), default=0)
                if self.preset.auto_layers:  # no check runs: the stored answers' layers are the turn's
                    self.layers_reason = "the stored answers"
                    self.env.emit(LayersDecided(self.layers_run, self.preset.layers, self.layers_reason))
            return self.last_references, not first
        # Serialising the conversation is only worth it when the guidance may be reused.
        key = turn_hash(self.preset.name, messages) if self.preset.fanout == "user_turn" else None
        if key is not None and continues_after_user(messages):
            kept = self._guidance.get(key)
            if kept is not None:
                self.last_references, self.guidance_reused = kept, True
                return kept, True
        results = self.run_references(messages, iteration=iteration)
        if key is not None:
            self._guidance.put(key, results)
        return results, False

    def _replay(self, given: tuple[ReferenceFinished, ...], iteration: int) -> tuple[ReferenceFinished, ...]:
        """Report given answers as this turn's: the same text and status, but no usage, since no tokens
        were spent on them now."""
        replayed = tuple(
            ReferenceFinished(dataclasses.replace(r.record, usage=None, iteration=iteration), r.text, r.reasoning)
            for r in given
        )
        for result in replayed:
            self.env.emit(ReferenceQueued(result.index, result.label))
            self.env.emit(result)
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
        assembler: StreamAssembler | None = None,
    ) -> ModelCall:
        """Consult the references, announce the round, and prepare the aggregator's request."""
        iteration = self.iteration + 1
        results, reused = self.consult(messages, iteration=iteration)
        self.env.cancel.raise_if_cancelled()
        self.iteration = iteration
        aggregator = self.preset.aggregator
        shown = self._guidance_order(results, reused)
        self.env.emit(
            AggregatorStarted(
                label=aggregator.label,
                iteration=iteration,
                references_ok=sum(r.status == "ok" for r in shown),
                references_total=len(shown),
                guidance_reused=reused,
            )
        )

        def request() -> ChatRequest:
            # A streamed reply's caller may set its own read timeout (the seed's facade forwards the consumer's).
            return slot_request(
                self.env.config,
                aggregator,
                task="moa_aggregator",
                messages=self._aggregator_messages(messages, None if self.plan.solo else shown, reused, tools),
                preset_temperature=self.preset.aggregator_temperature,
                tools=tools,
                stream=stream,
                stream_options=stream_options,
                timeout=timeout if stream and timeout is not None else aggregator.timeout,
                max_retries=max_retries,
            )

        seat = Seat(index=0, layer=1, slot=aggregator, label=aggregator.label)
        return ModelCall(
            self.env, "aggregator", seat, request(), iteration=iteration, assembler=assembler, refit=request
        )

    def _aggregator_messages(
        self,
        messages: Sequence[Message],
        answers: Sequence[ReferenceFinished] | None,
        reused: bool,
        tools: Sequence[ToolSpec] | None,
    ) -> list[Message]:
        """The conversation and the guidance after it (`answers` None: solo, none), fitted to the aggregator's
        room; a RequestFitted says what was left out or cut."""

        def guidance(shown: Sequence[ReferenceFinished]) -> Message:
            return guidance_message(shown, predates_tools=reused, anonymous=self.preset.anonymous)

        budget = self.env.budget
        if budget is None:
            return [*messages, *([] if answers is None else [guidance(answers)])]
        slot = self.preset.aggregator
        fixed = budget.request(slot, [], tools) - budget.request(slot, [])  # the tools offered
        fitted = fit_aggregator(
            split(messages),
            answers,
            budget.room(slot),
            lambda sent: budget.request(slot, sent),
            lambda text: budget.text(slot, text),
            guidance,
            fixed,
        )
        window = budget.window(slot).tokens
        if (fitted.dropped or fitted.cuts) and window is not None:
            self.env.emit(
                RequestFitted(
                    "aggregator", 0, slot.label, self.iteration, fitted.tokens, window, fitted.dropped, fitted.cuts
                )
            )
        return fitted.messages

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
        call = self._aggregator_call(messages, tools, stream=True, max_retries=0, assembler=reply)
        emit = self.env.emit
        echoes = EchoFilter()  # moa-chat's markers, copied into the reply, never reach the user

        def finished(status: CallStatus, error: str | None = None) -> CallRecord:
            if rest := echoes.finish():
                emit(ReplyDelta(rest))
            record = call.record(status, error)
            emit(AggregatorFinished(record, reply.reasoning))
            return record

        def restarted(exc: LLMCallError, text: str) -> None:
            echoes.reset()
            emit(ReplyRestarted(call.label, call.iteration, exc.reason, without_echoes(text)))

        def retrying(event: CallRetrying) -> None:
            echoes.reset()  # the answer is read again from its start
            emit(event)

        def shown(text: str) -> None:
            if visible := echoes.feed(text):
                emit(ReplyDelta(visible))

        reading = Reading(
            shown,
            on_reasoning=lambda text: emit(ReasoningDelta(call.label, "aggregator", text)),
            answer_of=without_echoes,
        )
        try:
            call.run(reading, fresh_reply=self.plan.restart_cut_reply, on_retry=retrying, on_restart=restarted)
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
