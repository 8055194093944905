"""A stored conversation as the exchanges a reader sees: a prompt, then the reply (with its tool calls)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..store import SessionStore, StoredTurn


@dataclass
class Exchange:
    prompt: str | None  # None for a reply with no prompt before it (never written by moa-chat itself)
    reply: list[dict[str, Any]] = field(default_factory=list)  # assistant and tool messages, in order
    turn: StoredTurn | None = None  # the MoA turn that wrote the reply (references, usage, status)


def exchanges(store: SessionStore, session_id: str) -> list[Exchange]:
    turns = {turn.id: turn for turn in store.turns(session_id)}
    by_user = {turn.user_message_id: turn for turn in turns.values()}
    found: list[Exchange] = []
    for message in store.path(session_id):
        if message.role == "user":
            found.append(Exchange(message.content, turn=by_user.get(message.id)))
            continue
        if not found:
            found.append(Exchange(None))
        found[-1].reply.append(message.as_chat())
        if message.turn_id in turns:
            found[-1].turn = turns[message.turn_id]
    return found
