"""A finished reply as a front end shows it: typed parts in the order they happened, and how it ended.

The store keeps a reply as chat-completions messages (assistant and tool messages, as dicts) beside the turn
that wrote it; a live turn reports it as events and a `TurnResult`. Both come down to a `ReplyParts` here, so
that a front end only draws it: its text runs, tool calls with their results, thoughts, earlier versions cut
off mid-stream, the panel's answers, and its `ReplyEnding`. Text a model or a tool wrote is made inert (its
escape sequences visible) as it is decoded, as the chat's events are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..engine import ReferenceFinished
from ..engine.events import ToolCallEvent
from ..store import StoredTurn
from ..text.inert import inert
from .tool_loop import TurnResult


@dataclass(frozen=True)
class Thought:
    """What a reasoning model thought in one aggregator round, before it wrote (`seconds`: how long, when known)."""

    text: str
    seconds: float | None


@dataclass(frozen=True)
class CutVersion:
    """An earlier version of a reply: the text it had shown when its stream was cut off, and why it was cut."""

    text: str
    reason: str


@dataclass(frozen=True)
class PanelAnswer:
    """What one reference said for a reply (or why it said nothing)."""

    label: str
    status: str
    text: str
    error: str | None


# A run of the reply's text, a tool call (with its result once it has one), a round's thought, or the version
# cut off before the reply started afresh.
ReplyPart: TypeAlias = str | ToolCallEvent | Thought | CutVersion


@dataclass(frozen=True)
class ReplyEnding:
    """How a reply ended: its status ("ok", "cancelled", "failed", "cut_off", "interrupted", ...), why it failed
    or stopped (`error`), what the provider's early stop means (`warning`), its tokens and its seconds."""

    status: str
    error: str | None = None
    warning: str | None = None
    tokens: int = 0
    seconds: float | None = None

    @classmethod
    def of_turn(cls, result: TurnResult) -> ReplyEnding:
        return cls(result.status, result.error, result.warning, result.usage.total_tokens, result.seconds)


@dataclass(frozen=True)
class ReplyParts:
    """A finished reply: who wrote it (the preset, the aggregator's label, how many references), its parts in
    order, its text as the conversation keeps it, the panel's answers it was written from, and its ending."""

    preset: str
    aggregator: str
    references: int
    parts: tuple[ReplyPart, ...]
    text: str
    ending: ReplyEnding
    panel: tuple[PanelAnswer, ...] = ()


def panel_answers(references: Iterable[ReferenceFinished]) -> tuple[PanelAnswer, ...]:
    """A live turn's references, as the answers its reply was written from."""
    return tuple(PanelAnswer(r.label, r.status, r.text, r.error) for r in references)


def stored_reply(messages: Sequence[Mapping[str, Any]], turn: StoredTurn | None) -> ReplyParts:
    """A stored reply: its assistant and tool messages, in order, and the turn that wrote them (None for a reply
    stored without one). Each assistant message is an aggregator round: its thought (from the turn's calls)
    comes first, then its text, then its tool calls, each with the result its tool message holds (a call with
    none was cancelled)."""
    results = {m.get("tool_call_id"): str(m.get("content") or "") for m in messages if m.get("role") == "tool"}
    thoughts = _thoughts(turn)
    parts: list[ReplyPart] = []
    texts: list[str] = []
    rounds = 0
    for message in messages:
        if message.get("role") != "assistant":
            continue
        rounds += 1
        if (thought := thoughts.get(rounds)) is not None:
            parts.append(thought)
        content = str(message.get("content") or "")
        if content:
            texts.append(content)
            parts.append(inert(content))
        for call in message.get("tool_calls") or []:
            parts.append(_tool_call(call, results, rounds))
    return ReplyParts(*_writer(turn), tuple(parts), "\n\n".join(texts), _stored_ending(turn), _stored_panel(turn))


def _tool_call(call: Mapping[str, Any], results: Mapping[object, str], round_: int) -> ToolCallEvent:
    function = call.get("function") or {}
    call_id = str(call.get("id", ""))
    result = results.get(call_id)
    return ToolCallEvent(
        call_id,
        inert(str(function.get("name", ""))),
        inert(str(function.get("arguments", ""))),
        "done" if result is not None else "cancelled",
        inert(result) if result is not None else None,
        iteration=round_,
    )


def _thoughts(turn: StoredTurn | None) -> dict[int, Thought]:
    """A stored turn's thoughts, by aggregator round (the n-th assistant message is round n)."""
    if turn is None:
        return {}
    return {
        call.record.iteration: Thought(inert(call.reasoning), None)
        for call in turn.calls
        if call.record.role == "aggregator" and call.reasoning
    }


def _writer(turn: StoredTurn | None) -> tuple[str, str, int]:
    """The preset's name, the aggregator's label and how many references it asked, as the turn ran it."""
    if turn is None:
        return "", "?", 0
    preset = turn.preset_json or {}
    aggregator = preset.get("aggregator") or {}
    label = f"{aggregator.get('provider', '?')}:{aggregator.get('model', '?')}" if aggregator else "?"
    references = len([r for r in preset.get("reference_models") or [] if r.get("enabled", True)])
    return turn.preset, label, references


def _stored_ending(turn: StoredTurn | None) -> ReplyEnding:
    if turn is None:
        return ReplyEnding("ok")
    tokens = sum(c.record.usage.total_tokens for c in turn.calls if c.record.usage)
    return ReplyEnding(turn.status, turn.error, None, tokens, turn.seconds)


def _stored_panel(turn: StoredTurn | None) -> tuple[PanelAnswer, ...]:
    if turn is None:
        return ()
    return tuple(PanelAnswer(c.record.label, c.record.status, c.text, c.record.error) for c in turn.references)
