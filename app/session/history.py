"""A stored conversation two ways: as the exchanges a reader sees (a prompt, then the reply with its tool
calls), and as the messages the models are sent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..llm.messages import Message
from ..store import SessionStore, StoredTurn
from ..store.summaries import StoredSummary


@dataclass
class Exchange:
    prompt: str | None  # None for a reply with no prompt before it (never written by moa-chat itself)
    reply: list[dict[str, Any]] = field(default_factory=list)  # assistant and tool messages, in order
    turn: StoredTurn | None = None  # the MoA turn that wrote the reply (references, usage, status)
    summary: StoredSummary | None = None  # the conversation was compacted right after this exchange


def exchanges(store: SessionStore, session_id: str) -> list[Exchange]:
    turns = {turn.id: turn for turn in store.turns(session_id)}
    by_user = {turn.user_message_id: turn for turn in turns.values()}
    after = {s.after_message_id: s for s in store.summaries.of_session(session_id) if s.after_message_id is not None}
    found: list[Exchange] = []
    for message in store.path(session_id):
        if message.role == "user":
            found.append(Exchange(message.content, turn=by_user.get(message.id)))
        else:
            if not found:
                found.append(Exchange(None))
            found[-1].reply.append(message.as_chat())
            if message.turn_id in turns:
                found[-1].turn = turns[message.turn_id]
        if message.id in after:
            found[-1].summary = after[message.id]
    return found


def for_models(messages: list[Message]) -> list[Message]:
    """The conversation as the models get it: a prompt that got no reply is left out.

    A failed turn (or one cancelled before any text) leaves its prompt with nothing after it; the next prompt
    follows it directly. Sent as they are, the two read to a model as one question asked twice, or as a
    question it ignored; and the next prompt is most often that same question asked again. So the failed
    prompt stays in the store, the chat log and the export, marked as failed, and the models see the
    conversation as the answered exchanges and the prompt being sent now (docs/sessions.md).
    """
    return [
        message
        for n, message in enumerate(messages)
        if not (message["role"] == "user" and n + 1 < len(messages) and messages[n + 1]["role"] == "user")
    ]
