"""Fitting a request to its room (engine/budget.py), before it is sent (docs/context.md).

A conversation splits into what every request keeps (its head: the system prompt and a compacted conversation's
summary; and the current turn: the latest prompt and the tool rounds after it) and the earlier exchanges, each
sent whole or not at all. A request keeps as many of the most recent earlier exchanges as fit:

- a reference's request: the advisor prompt, the summary and the recent exchanges as the references see them
  (engine/guidance.py), and in a later layer the previous layer's answers, which are cut to fit when even
  the current turn alone leaves them no room;
- the aggregator's: the conversation as it is, with a floor of room kept for the guidance (`GUIDANCE_SHARE`);
  what room is left is the guidance's, and where the guidance is longer each reference answer is cut to the
  same share of its length, keeping its start and a mark that says so (`cut_answers`). No answer is dropped.

Where even the head and the current turn do not fit, nothing is sent: `DoesNotFit`, an overflow that names the
sizes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..llm import ContextOverflow
from ..llm.messages import Message
from ..prompts import SUMMARY_HEADER, message_text
from .budget import Room
from .events import AnswerCut, ReferenceFinished

# The least share of the aggregator's room its guidance keeps (or all of it, when shorter): earlier exchanges
# are left out before the references' answers are cut below it.
GUIDANCE_SHARE = 0.3
CUT_MARK = "[… cut to fit the aggregator's context window: about {kept:,} of {total:,} tokens kept]"
CUT_MARGIN = 0.97  # a cut answer aims a little under its share: the count of what is kept is an estimate

Count = Callable[[Sequence[Message]], int]


class DoesNotFit(ContextOverflow):
    """What a request must hold is longer than its room, before anything is sent."""

    def __init__(self, room: Room, needed: int, task: str | None, what: str = "the latest prompt") -> None:
        window = room.window.tokens
        super().__init__(
            provider=room.slot.provider, model=room.slot.model, task=task, window=window, prompt_tokens=needed
        )
        self.room, self.needed = room, needed
        self.reason = (
            f"{what} is about {needed:,} tokens with every earlier exchange left out: more than the {room.tokens:,} "
            f"that the model's context window of {window:,} tokens leaves beside the {room.reserve:,} kept for its "
            "answer; nothing was sent"
        )
        self.args = (f"{room.slot.label} failed: {self.reason}",)


@dataclass(frozen=True)
class Conversation:
    """A request's conversation in the parts fitting treats apart."""

    head: list[Message]  # always sent: system prompts, and a compacted conversation's summary
    older: list[list[Message]]  # the earlier exchanges, oldest first: each sent whole or not at all
    current: list[Message]  # always sent: the latest user message and what follows it

    def with_older(self, kept: int) -> list[Message]:
        """The conversation with the `kept` most recent earlier exchanges."""
        recent = self.older[len(self.older) - kept :] if kept else []
        return [*self.head, *(m for exchange in recent for m in exchange), *self.current]

    def dropped(self, kept: int) -> int:
        """How many messages leaving all but `kept` earlier exchanges out drops."""
        return sum(len(exchange) for exchange in self.older[: len(self.older) - kept])


def is_summary(message: Message) -> bool:
    return message["role"] == "user" and message_text(message.get("content")).startswith(SUMMARY_HEADER)


def split(messages: Sequence[Message]) -> Conversation:
    """The head, the earlier exchanges and the current turn of `messages`."""
    start = 0
    while start < len(messages) and (messages[start]["role"] == "system" or is_summary(messages[start])):
        start += 1
    last_user = max((n for n in range(start, len(messages)) if messages[n]["role"] == "user"), default=len(messages))
    older: list[list[Message]] = []
    for message in messages[start:last_user]:
        if message["role"] == "user" or not older:
            older.append([])
        older[-1].append(message)
    return Conversation(list(messages[:start]), older, list(messages[last_user:]))


@dataclass(frozen=True)
class Fitted:
    messages: list[Message]
    tokens: int  # the request's prompt tokens, as counted
    dropped: int = 0  # earlier messages of the conversation left out
    cuts: tuple[AnswerCut, ...] = ()  # answers cut to fit (the guidance's, or a previous layer's)


def most_recent_that_fit(conversation: Conversation, fits: Callable[[int], bool]) -> int | None:
    """The most earlier exchanges (the most recent ones) for which `fits(kept)` holds, or None when not even
    none do. `fits` holds for fewer whenever it holds for more."""
    if not fits(0):
        return None
    low, high = 0, len(conversation.older)
    while low < high:  # the largest `kept` that fits lies in [low, high]
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def fit_messages(
    conversation: Conversation, room: Room, count: Count, build: Callable[[list[Message]], list[Message]]
) -> Fitted:
    """The request `build` makes of the conversation with as many recent earlier exchanges as fit `room`."""
    if room.tokens is None:  # an unknown window: sent as it is
        messages = build(conversation.with_older(len(conversation.older)))
        return Fitted(messages, count(messages))
    limit = room.tokens
    kept = most_recent_that_fit(conversation, lambda k: count(build(conversation.with_older(k))) <= limit)
    if kept is None:
        raise DoesNotFit(room, count(build(conversation.with_older(0))), None)
    messages = build(conversation.with_older(kept))
    return Fitted(messages, count(messages), conversation.dropped(kept))


# --------------------------------------------------------------------------- cutting answers


def cut_answers(
    answers: Sequence[ReferenceFinished], room: int, count_text: Callable[[str], int]
) -> tuple[list[ReferenceFinished], tuple[AnswerCut, ...]]:
    """`answers` whose texts take at most `room` tokens together: each answer that was given is cut to the same
    share of its length, keeping its start and a mark, when they are longer. The rest are as they were."""
    given = [(n, a) for n, a in enumerate(answers) if a.status == "ok" and a.text.strip()]
    totals = {n: count_text(a.text) for n, a in given}
    whole = sum(totals.values())
    if whole <= room or not given:
        return list(answers), ()
    share = max(0.0, room / whole) * CUT_MARGIN
    out = list(answers)
    cuts: list[AnswerCut] = []
    for _attempt in range(4):
        for n, answer in given:
            kept = int(totals[n] * share)
            text = answer.text[: int(len(answer.text) * share)].rstrip()
            out[n] = dataclasses.replace(answer, text=f"{text}\n\n{CUT_MARK.format(kept=kept, total=totals[n])}")
            cuts.append(AnswerCut(answer.index, answer.label, kept, totals[n]))
        if sum(count_text(out[n].text) for n, _ in given) <= room:
            break
        share *= 0.85
        cuts.clear()
    return out, tuple(cuts)


def fit_aggregator(
    conversation: Conversation,
    answers: Sequence[ReferenceFinished] | None,
    room: Room,
    count: Count,
    count_text: Callable[[str], int],
    guidance: Callable[[Sequence[ReferenceFinished]], Message],
    fixed: int = 0,
) -> Fitted:
    """The aggregator's request: the conversation with as many recent earlier exchanges as leave the guidance
    its floor, then the guidance, its answers cut to the room left where they are longer. `answers` is None for
    a solo turn (no guidance); `fixed` is what the request holds beside its messages (the tools offered)."""
    if answers is None:
        fitted = fit_messages(conversation, _less(room, fixed), count, lambda messages: messages)
        return dataclasses.replace(fitted, tokens=fitted.tokens + fixed)
    whole = guidance(answers)
    if room.tokens is None:
        messages = [*conversation.with_older(len(conversation.older)), whole]
        return Fitted(messages, count(messages) + fixed)
    limit = room.tokens - fixed
    guidance_tokens = count([whole])
    floor = min(guidance_tokens, int(limit * GUIDANCE_SHARE))
    kept = most_recent_that_fit(conversation, lambda k: count(conversation.with_older(k)) + floor <= limit)
    if kept is None:
        needed = count(conversation.with_older(0)) + floor + fixed
        raise DoesNotFit(room, needed, "moa_aggregator", "the latest prompt with the references' answers")
    messages = conversation.with_older(kept)
    left = limit - count(messages)
    cuts: tuple[AnswerCut, ...] = ()
    if guidance_tokens > left:
        blank = [dataclasses.replace(answer, text="") for answer in answers]
        overhead = count([guidance(blank)])
        answers, cuts = cut_answers(answers, max(0, left - overhead), count_text)
        whole = guidance(answers)
    messages = [*messages, whole]
    return Fitted(messages, count(messages) + fixed, conversation.dropped(kept), cuts)


def _less(room: Room, tokens: int) -> Room:
    """`room` with `tokens` more kept back (what a request holds beside its messages)."""
    return dataclasses.replace(room, reserve=room.reserve + tokens) if tokens else room
