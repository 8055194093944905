"""Compaction: a long conversation's earlier exchanges summarised into one message, so that every turn fits the
windows of the models it goes to (docs/context.md).

Before a turn whose conversation would fill more than `compact_at` (80 % by default) of the tightest window
among its preset's models, every exchange but the most recent ones (up to `KEEP_RECENT` of that window) is
summarised by the preset's `compact_model` (by default its aggregator), together with the summary before it,
if there is one. From then on the models are sent the summary in place of the exchanges it stands for; the
exchanges themselves stay in the session (the log, `sessions`, `export`, versions). A summary of a stored
session is stored too (store/summaries.py), so a reopened session sends what it sent before.

A compaction that fails leaves the conversation as it was and says why; the turn goes on, its requests
fitted to the windows by leaving the oldest exchanges out (engine/fitting.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..config import Preset, Slot
from ..engine import Cancelled, TurnEnv
from ..engine.budget import ContextBudget
from ..engine.calls import ModelCall, slot_request
from ..engine.events import CallRecord, CompactionEnded, CompactionStarted
from ..engine.fitting import GUIDANCE_SHARE
from ..engine.guidance import cut_middle
from ..engine.panel import Seat
from ..engine.reading import Reading
from ..llm import describe_error
from ..llm.messages import Message, ToolSpec, system, user
from ..prompts import ADVISOR_PROMPT, COMPACT_EARLIER, COMPACT_EXCHANGES, COMPACT_PROMPT, SUMMARY_HEADER, message_text
from ..text.wording import plural
from .history import for_models

KEEP_RECENT = 0.1  # the share of the tightest window the exchanges kept after a compaction may take
SUMMARY_SHARE = 0.08  # a summary's length, as a share of the tightest window ...
SUMMARY_TOKENS = (120, 1500)  # ... within these bounds, and never over a quarter of the window
WORDS_PER_TOKEN = 0.7  # the prompt asks for words: English runs at about this many a token


class CompactionFailed(Exception):
    """A compaction that could not write its summary (`reason`); the conversation is as it was."""

    def __init__(self, reason: str, record: CallRecord | None = None) -> None:
        super().__init__(reason)
        self.reason, self.record = reason, record


@dataclass(frozen=True)
class Summary:
    """What the models are sent in place of the conversation's first `covers` messages."""

    text: str
    covers: int
    exchanges: int  # the exchanges it stands for, those of summaries folded into it included
    tokens_before: int
    tokens_after: int
    model: str

    def message(self) -> Message:
        return user(f"{SUMMARY_HEADER} ({plural(self.exchanges, 'exchange')})\n\n{self.text}")


def models_view(messages: Sequence[Message], summary: Summary | None) -> list[Message]:
    """The conversation as the models are sent it: the summary in place of the messages it stands for, and no
    prompt that got no reply (history.for_models)."""
    if summary is None:
        return for_models(list(messages))
    return [summary.message(), *for_models(list(messages[summary.covers :]))]


@dataclass(frozen=True)
class Fill:
    """How full the tightest window is: `tokens` of its `window`, `label`'s."""

    tokens: int
    window: int
    label: str

    @property
    def share(self) -> float:
        return self.tokens / self.window

    @property
    def line(self) -> str:
        """ "ctx 6.1k/8.2k local:smollm2"."""
        return f"ctx {_k(self.tokens)}/{_k(self.window)} {self.label}"


def latest_fill(records: Iterable[CallRecord]) -> Fill | None:
    """The fullest window among what the latest call to each model sent (the header's `ctx`; None: no call
    said, or no window is known)."""
    latest: dict[str, Fill] = {}
    for record in records:
        if record.sent_tokens is not None and record.window and record.role != "compaction":
            latest[record.label.split(" #")[0]] = Fill(record.sent_tokens, record.window, record.label.split(" #")[0])
    return max(latest.values(), key=lambda fill: fill.share, default=None)


def _k(tokens: int) -> str:
    return f"{tokens / 1000:.1f}k" if tokens >= 1000 else str(tokens)


def slots_of(preset: Preset) -> list[Slot]:
    judge = [preset.agreement_judge] if preset.auto_layers else []
    unique: dict[tuple[str, str], Slot] = {}
    for slot in (*preset.references, preset.aggregator, *judge):
        unique.setdefault((slot.provider, slot.model), slot)
    return list(unique.values())


def tightest(budget: ContextBudget, preset: Preset, messages: Sequence[Message], beside: int = 0) -> Fill | None:
    """The fullest window among `preset`'s models, were `messages` sent to each: the aggregator's with `beside`
    tokens more (the references' answers, the tools offered), a reference's with its advisor prompt (None: no
    window is known)."""
    fullest: Fill | None = None
    advisor = system(ADVISOR_PROMPT)
    for slot in slots_of(preset):
        window = budget.window(slot).tokens
        if window is None:
            continue
        extra = beside if slot == preset.aggregator else budget.message(slot, advisor)
        fill = Fill(budget.request(slot, messages) + extra, window, slot.label)
        if fullest is None or fill.share > fullest.share:
            fullest = fill
    return fullest


class Compactor:
    """Compactions of one conversation on `preset`, through the turn's environment and budget."""

    def __init__(self, env: TurnEnv, budget: ContextBudget, preset: Preset) -> None:
        self.env, self.budget, self.preset = env, budget, preset

    def due(
        self, view: Sequence[Message], guidance: int | None, tools: Sequence[ToolSpec] | None = None
    ) -> Fill | None:
        """The tightest window's fill when `view` (with the prompt about to go), and beside it in the aggregator's
        request the references' answers (`guidance` tokens, as the last turn's took; None: not known yet) and the
        `tools` it is offered, passes `compact_at` of it. A MoA's aggregator reads the answers as well as the
        conversation: the room they take is the conversation's to give up, so that they are not cut."""
        if guidance is None:
            guidance = self.expected_guidance()
        aggregator = self.preset.aggregator
        offered = self.budget.request(aggregator, [], tools) - self.budget.request(aggregator, [])
        fill = tightest(self.budget, self.preset, view, guidance + offered)
        return fill if fill is not None and fill.share > self.preset.compact_at else None

    def expected_guidance(self) -> int:
        """What the references' answers may take, before any turn says: their reserves, within the floor the
        aggregator's request keeps for them."""
        if not self.preset.references:
            return 0
        bound = sum(self.preset.reserve_for(slot) for slot in self.preset.references)
        room = self.budget.room(self.preset.aggregator).tokens
        return min(bound, int(room * GUIDANCE_SHARE)) if room is not None else bound

    def compact(self, messages: Sequence[Message], summary: Summary | None, *, pending: bool) -> Summary | None:
        """A summary of all but the recent exchanges of `messages` (after what `summary` stands for), or None
        when no exchange is left to summarise. `pending`: the last message is the prompt of the turn about to
        run, never summarised. Raises CompactionFailed when no summary was written (cancelled too), after a
        CompactionEnded that says why."""
        start = summary.covers if summary is not None else 0
        groups = _exchanges(messages[start:])
        if pending and groups:
            groups.pop()
        window = min((w for s in slots_of(self.preset) if (w := self.budget.window(s).tokens)), default=None)
        if window is None:
            return None
        keep = len(groups)
        kept_tokens = 0
        while keep > 0:  # the most recent exchanges that fit KEEP_RECENT of the tightest window stay
            tokens = self._tokens(for_models(groups[keep - 1]))
            if kept_tokens + tokens > KEEP_RECENT * window:
                break
            kept_tokens += tokens
            keep -= 1
        folded = groups[:keep]
        if not folded:
            return None
        covered = [m for group in folded for m in group]
        before = ([summary.message()] if summary is not None else []) + for_models(covered)
        tokens_before = self._tokens(before)
        exchanges = (summary.exchanges if summary is not None else 0) + len(folded)
        slot = self.preset.compactor
        self.env.emit(CompactionStarted(len(folded), tokens_before, slot.label))
        target = min(window // 4, max(SUMMARY_TOKENS[0], min(SUMMARY_TOKENS[1], int(window * SUMMARY_SHARE))))
        try:
            text, record = self._summarise(slot, summary.text if summary is not None else None, covered, target)
        except CompactionFailed as failed:
            self.env.emit(
                CompactionEnded(exchanges, tokens_before, tokens_before, record=failed.record, error=failed.reason)
            )
            raise
        new = Summary(text, start + len(covered), exchanges, tokens_before, 0, slot.label)
        after = self._tokens([new.message()])
        new = Summary(text, new.covers, exchanges, tokens_before, after, slot.label)
        self.env.emit(CompactionEnded(exchanges, tokens_before, after, text, record))
        return new

    def _tokens(self, messages: Sequence[Message]) -> int:
        """What `messages` take in a request to the tightest of the preset's models."""
        return max((self.budget.request(slot, messages) for slot in slots_of(self.preset)), default=0)

    def _summarise(
        self, slot: Slot, earlier: str | None, covered: Sequence[Message], target: int
    ) -> tuple[str, CallRecord | None]:
        """The summary of `covered` (after `earlier`), by `slot`, in as many requests as its window needs: each
        folds the summary so far into a summary of the next stretch of exchanges."""
        slot = dataclasses.replace(slot, max_tokens=target)  # its answer: the summary, this long at most
        window = self.budget.window(slot).tokens
        seat = Seat(0, 1, slot, slot.label)
        room = window - target if window is not None else None
        text, record = earlier, None
        for chunk in self._chunks(slot, earlier, for_models(list(covered)), room, target):
            messages = _request(text, chunk, target)
            request = slot_request(
                self.env.config, slot, task="moa_compaction", messages=messages, preset_temperature=None, max_retries=0
            )
            call = ModelCall(self.env, "compaction", seat, request)
            try:
                call.run(Reading(lambda _text: None))
            except Cancelled as exc:
                raise CompactionFailed(
                    "cancelled by the user", call.record("cancelled", "cancelled by the user")
                ) from exc
            except Exception as exc:  # a provider's fault, or another: the conversation stays as it was
                reason = f"{slot.label} failed: {describe_error(exc)}"
                raise CompactionFailed(reason, call.record("failed", describe_error(exc))) from exc
            record = call.record("ok")
            text = call.assembler.text.strip()
        assert text is not None
        return text, record

    def _chunks(
        self, slot: Slot, earlier: str | None, messages: list[Message], room: int | None, target: int
    ) -> list[list[Message]]:
        """`messages` in stretches each of which fits one summarising request to `slot` (one, where it all does)."""
        if room is None:
            return [messages]
        overhead = self.budget.request(slot, _request(earlier, [], target)) + target  # the summary so far, and its
        chunks: list[list[Message]] = [[]]
        used = 0
        for message in messages:
            tokens = self.budget.message(slot, message)  # as it stands in the conversation: counted already
            if chunks[-1] and used + tokens > room - overhead:
                chunks.append([])
                used = 0
            chunks[-1].append(message)
            used += tokens
        return chunks


def _exchanges(messages: Sequence[Message]) -> list[list[Message]]:
    """`messages` as exchanges: each from a user message to the next."""
    groups: list[list[Message]] = []
    for message in messages:
        if message["role"] == "user" or not groups:
            groups.append([])
        groups[-1].append(message)
    return groups


def _transcript(messages: Sequence[Message]) -> str:
    """The exchanges as a plain transcript (tool results cut to their head and tail)."""
    lines: list[str] = []
    for message in messages:
        text = message_text(message.get("content"))
        if message["role"] == "user":
            lines.append(f"User: {text}")
        elif message["role"] == "assistant":
            calls = [c.get("function", {}) for c in message.get("tool_calls") or []]
            called = "".join(f"\n(called {c.get('name')} with {c.get('arguments')})" for c in calls)
            lines.append(f"Assistant: {text}{called}")
        elif message["role"] == "tool":
            lines.append(f"Tool result: {cut_middle(text)}")
    return "\n\n".join(lines)


def _request(earlier: str | None, messages: Sequence[Message], target: int) -> list[Message]:
    words = int(target * WORDS_PER_TOKEN)
    parts = [f"{COMPACT_EARLIER}\n\n{earlier}\n\n"] if earlier else []
    parts.append(f"{COMPACT_EXCHANGES}\n\n{_transcript(messages)}")
    return [system(COMPACT_PROMPT.format(words=words)), user("".join(parts))]
