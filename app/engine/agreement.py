"""`layers: auto`: whether a layer's references already agree, so the aggregator can start without another layer.

Two ways to tell. A caller that knows how to read an answer (an eval task's checker) passes an
`AnswerExtractor`: the references agree when each answer yields one and all are equal, and no model is
asked. Otherwise one short, non-streamed call to the preset's judge (`agreement:`, else the aggregator)
answers AGREE or DISAGREE; it is a call like any other, with its record, tokens and cost in the turn.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..config import Preset
from ..llm import LLMCallError, TimedOut, describe_error
from ..llm.messages import Message, system, user
from ..prompts import AGREEMENT_HEADER, AGREEMENT_PROMPT, message_text
from .calls import ModelCall, slot_request
from .cancel import Cancelled
from .env import AnswerExtractor, TurnEnv
from .events import AgreementChecked, CallRecord, CallStatus, ReferenceFinished
from .guidance import cut_middle, reference_view
from .panel import Seat
from .reading import Reading

# How much of each answer the judge reads: enough for its conclusion, which sits at its start or its end.
ANSWER_HEAD = 3_000
ANSWER_TAIL = 1_500

_VERDICT = re.compile(r"\b(DISAGREE[SD]?|AGREE[SD]?|NOT\s+AGREE|DON'?T\s+AGREE|DO\s+NOT\s+AGREE)\b")
_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class AgreementVerdict:
    agreed: bool
    reason: str  # a few words for the sidebar and `ask`: why another layer runs, or why none does


def parse_verdict(text: str) -> bool | None:
    """AGREE → True, DISAGREE → False, from a judge's answer however it dressed it (case, punctuation, a
    sentence around it, a model's <think> block); None when it says neither, or both at once."""
    found = {_word(match) for match in _VERDICT.finditer(_THINKING.sub(" ", text).upper())}
    return found.pop() if len(found) == 1 else None


def _word(match: re.Match[str]) -> bool:
    word = match.group(1)
    return not (word.startswith("DIS") or "NOT" in word or "DON" in word)


def compare_extracted(answers: Sequence[ReferenceFinished], extractor: AnswerExtractor) -> AgreementVerdict:
    """The answers agree when every one states an answer the extractor finds, and all of them are equal."""
    found: list[str | None] = []
    for answer in answers:
        try:
            value = extractor(answer.text)
        except Exception:  # a checker that cannot read an answer has found none in it
            value = None
        found.append(value.strip() if isinstance(value, str) and value.strip() else None)
    if any(value is None for value in found):
        missing = sum(value is None for value in found)
        return AgreementVerdict(False, f"{missing} of {len(found)} answers state no answer")
    if len(set(found)) == 1:
        return AgreementVerdict(True, "references agreed (same answer)")
    return AgreementVerdict(False, f"references disagree ({len(set(found))} different answers)")


def agreement_messages(messages: Sequence[Message], answers: Sequence[ReferenceFinished]) -> list[Message]:
    """The judge's request: the latest request as the references saw it, then their answers, unnamed."""
    view = reference_view(messages)
    request = message_text(view[-1]["content"]) if view else ""
    lines = [AGREEMENT_HEADER, "", "## The request", "", cut_middle(request, ANSWER_HEAD, ANSWER_TAIL)]
    for number, answer in enumerate(answers, start=1):
        lines += ["", f"## Answer {number}", "", cut_middle(answer.text.strip(), ANSWER_HEAD, ANSWER_TAIL)]
    lines += ["", "Do these answers agree? Reply with one word: AGREE or DISAGREE."]
    return [system(AGREEMENT_PROMPT), user("\n".join(lines))]


class AgreementCheck:
    """After each layer but the last of a `layers: auto` preset: do the layer's references agree?"""

    def __init__(self, env: TurnEnv, preset: Preset, extractor: AnswerExtractor | None = None) -> None:
        self.env, self.preset, self.extractor = env, preset, extractor

    def check(
        self, messages: Sequence[Message], results: Sequence[ReferenceFinished], *, layer: int, iteration: int
    ) -> AgreementVerdict:
        """Compare the layer's answers (those that came in whole); reports an AgreementChecked. Raises
        Cancelled when the turn is cancelled during the judge's call."""
        answers = [r for r in results if r.status == "ok"]
        record: CallRecord | None = None
        text = ""
        if len(answers) < 2:
            verdict = AgreementVerdict(
                False, f"{len(answers)} answer{'' if len(answers) == 1 else 's'}: nothing to compare"
            )
        elif self.extractor is not None:
            verdict = compare_extracted(answers, self.extractor)
        else:
            verdict, record, text = self._judge(messages, answers, layer=layer, iteration=iteration)
        self.env.emit(AgreementChecked(layer, verdict.agreed, verdict.reason, record, text))
        return verdict

    def _judge(
        self, messages: Sequence[Message], answers: Sequence[ReferenceFinished], *, layer: int, iteration: int
    ) -> tuple[AgreementVerdict, CallRecord, str]:
        judge = self.preset.agreement_judge
        request = slot_request(
            self.env.config,
            judge,
            task="moa_agreement",
            messages=agreement_messages(messages, answers),
            preset_temperature=None,
            stream=False,
            timeout=judge.timeout if judge.timeout is not None else self.preset.reference_timeout,
            max_retries=0,  # the retries are ModelCall's
        )
        seat = Seat(index=0, layer=layer, slot=judge, label=judge.label)
        model_call = ModelCall(self.env, "agreement", seat, request, iteration=iteration)
        try:
            model_call.run(Reading(lambda _text: None))
        except Cancelled:
            record = model_call.record("cancelled", "cancelled by the user")
            self.env.emit(AgreementChecked(layer, False, "cancelled", record))
            raise
        except TimedOut as exc:
            return self._failed(model_call, "timeout", exc.reason)
        except LLMCallError as exc:
            return self._failed(model_call, "failed", exc.reason)
        except Exception as exc:  # a judge's fault costs a layer, never the turn
            return self._failed(model_call, "failed", describe_error(exc))
        text = model_call.assembler.text
        agreed = parse_verdict(text)
        if agreed is None:
            verdict = AgreementVerdict(False, f"{judge.label} gave no clear verdict")
        else:
            verdict = AgreementVerdict(agreed, "references agreed" if agreed else "references disagree")
        return verdict, model_call.record("ok"), text

    def _failed(
        self, model_call: ModelCall, status: CallStatus, reason: str
    ) -> tuple[AgreementVerdict, CallRecord, str]:
        record = model_call.record(status, reason)
        return AgreementVerdict(False, f"the agreement check failed ({reason})"), record, model_call.assembler.text
