"""Where a continuation goes in a session's tree when other processes continued the same session meanwhile
(two `ask -c` at once): after the latest message as it stands when the turn is stored. Used inside
SessionStore.finish_turn's write transaction."""

from __future__ import annotations

import sqlite3


def place_after_latest(db: sqlite3.Connection, session_id: str, prompt_id: int) -> None:
    """Hang `prompt_id` under the session's head, unless the head is the prompt itself or lies after it
    (then it stays where it is: what lies after it moves after its reply, see finish_turn)."""
    row = db.execute("SELECT head_id FROM sessions WHERE id = ?", (session_id,)).fetchone()
    head = row["head_id"] if row else None
    if head is None:
        return
    after_prompt = db.execute(
        """
        WITH RECURSIVE chain (id) AS (
            SELECT ?
            UNION ALL
            SELECT m.parent_id FROM messages m JOIN chain ON m.id = chain.id WHERE m.parent_id IS NOT NULL
        )
        SELECT 1 FROM chain WHERE id = ? LIMIT 1
        """,
        (head, prompt_id),
    ).fetchone()
    if after_prompt is None:  # someone continued the session meanwhile: follow them
        db.execute("UPDATE messages SET parent_id = ? WHERE id = ?", (head, prompt_id))


def latest_leaf_of(db: sqlite3.Connection, message_id: int) -> int:
    """From `message_id`, the newest child down to a leaf: where the conversation now ends."""
    current = message_id
    while True:
        row = db.execute("SELECT id FROM messages WHERE parent_id = ? ORDER BY id DESC LIMIT 1", (current,)).fetchone()
        if row is None:
            return current
        current = row["id"]
