"""The judge for tasks with no check: pairwise against a baseline in both orders, or a rubric score.

Pairwise, the judge sees the answer under test as A and the baseline's as B, then again swapped; each order
gives the answer 1 (better), ½ (tie) or 0, and its score is the mean, so a judge that always prefers the
first answer it reads scores every answer ½. The judge's prompts are in `prompts.py`; its calls are
counted apart from the panel's. A judge that gives no verdict (or no score) says why in the verdict's
`error`: the run reports those answers as unjudged and exits 1.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

from ..config import Config
from ..config.adhoc import parse_model
from ..llm import CallLLM, ChatRequest, Sampling, Usage, call_llm_request, describe_error
from ..llm.messages import user
from ..prompts import DEFAULT_RUBRIC, JUDGE_PAIRWISE_PROMPT, JUDGE_RUBRIC_PROMPT

JUDGE_MAX_TOKENS = 600
_VERDICT = re.compile(r"\[\[\s*(A|B|C|tie)\s*\]\]", re.IGNORECASE)
_SCORE = re.compile(r"\[\[\s*(\d+(?:\.\d+)?)\s*\]\]")


def pairwise_verdict(text: str) -> str | None:
    """ "A", "B" or "tie" from the judge's last [[…]] verdict; None when it gave none."""
    found = _VERDICT.findall(text)
    if not found:
        return None
    last = str(found[-1]).upper()
    return "tie" if last in ("C", "TIE") else last


def rubric_score(text: str) -> float | None:
    """The judge's [[n]] score as a fraction of 10 (None when it gave none, or one outside 0–10)."""
    found = _SCORE.findall(text)
    if not found:
        return None
    value = float(found[-1])
    return value / 10 if 0 <= value <= 10 else None


def order_score(verdict: str | None, *, candidate: str) -> float | None:
    """What one order gives the answer under test, shown as `candidate` ("A" or "B")."""
    if verdict is None:
        return None
    if verdict == "tie":
        return 0.5
    return 1.0 if verdict == candidate else 0.0


@dataclass
class JudgeVerdict:
    score: float | None  # 0..1 for the answer under test; None when the judge gave no usable verdict
    orders: list[str | None] = field(default_factory=list)  # the verdict of each order (pairwise)
    replies: list[str] = field(default_factory=list)
    tokens: int = 0
    cost: float | None = None
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "orders": self.orders,
            "replies": self.replies,
            "tokens": self.tokens,
            "cost": self.cost,
            "error": self.error,
        }


class Judge:
    def __init__(self, config: Config, spec: str, *, call: CallLLM = call_llm_request) -> None:
        self.config = config
        self.slot = parse_model(spec, config, "--judge")
        self._call = call
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        return self.slot.label

    @property
    def provider(self) -> str:
        return self.slot.provider

    def pairwise(self, prompt: str, answer: str, baseline: str, call: CallLLM | None = None) -> JudgeVerdict:
        """Compare `answer` with `baseline` in both orders."""
        verdict = JudgeVerdict(score=None)
        scores: list[float] = []
        for first, second, candidate in ((answer, baseline, "A"), (baseline, answer, "B")):
            text = self._ask(JUDGE_PAIRWISE_PROMPT.format(prompt=prompt, first=first, second=second), verdict, call)
            if text is None:
                return verdict
            chosen = pairwise_verdict(text)
            verdict.orders.append(chosen)
            score = order_score(chosen, candidate=candidate)
            if score is not None:
                scores.append(score)
        verdict.score = sum(scores) / len(scores) if scores else None
        if verdict.score is None:
            verdict.error = f"{self.label} gave no verdict: its reply ends with none of [[A]], [[B]] or [[C]]"
        return verdict

    def rubric(self, prompt: str, answer: str, rubric: str | None, call: CallLLM | None = None) -> JudgeVerdict:
        """Score `answer` against `rubric` (or the default one), 0..1."""
        verdict = JudgeVerdict(score=None)
        asked = JUDGE_RUBRIC_PROMPT.format(prompt=prompt, rubric=rubric or DEFAULT_RUBRIC, answer=answer)
        text = self._ask(asked, verdict, call)
        if text is not None:
            verdict.score = rubric_score(text)
            if verdict.score is None:
                verdict.error = f"{self.label} gave no score: its reply ends with no [[0]] to [[10]]"
        return verdict

    def _ask(self, text: str, verdict: JudgeVerdict, call: CallLLM | None) -> str | None:
        request = ChatRequest(
            model=self.slot.model,
            messages=[user(text)],
            provider=self.slot.provider,
            task="moa_eval_judge",
            sampling=Sampling(temperature=0.0, max_tokens=JUDGE_MAX_TOKENS),
            config=self.config,
        )
        try:
            response = (call or self._call)(request)
        except Exception as exc:
            verdict.error = describe_error(exc)
            return None
        reply, usage = _content(response)
        verdict.replies.append(reply)
        if usage is not None:
            verdict.tokens += usage.total_tokens
            price = self.config.price(self.label)
            cost = (
                usage.cost
                if usage.cost is not None
                else (price.cost(usage.prompt_tokens, usage.completion_tokens) if price is not None else None)
            )
            if cost is not None:
                verdict.cost = (verdict.cost or 0.0) + cost
        return reply


def _content(response: object) -> tuple[str, Usage | None]:
    """The reply's text and usage from a complete chat.completion (the SDK's object or a plain dict)."""
    data: Any = response.model_dump() if hasattr(response, "model_dump") else response
    try:
        text = str(data["choices"][0]["message"]["content"] or "")
    except (KeyError, IndexError, TypeError):
        text = ""
    raw = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(raw, dict):
        return text, None
    prompt, completion = int(raw.get("prompt_tokens") or 0), int(raw.get("completion_tokens") or 0)
    cost = raw.get("cost")
    return text, Usage(prompt, completion, int(raw.get("total_tokens") or prompt + completion), cost)
