"""`Summaries`: a long conversation's summaries (compaction, session/compaction.py), kept in the session database
(migration 9).

Each stands, for the models, for the conversation up to and including one stored message: the session's path
to that message is the same in every version that continues from it, so a summary serves every branch that
keeps its last message, and a reopened session sends what it sent before. The messages themselves stay.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

Connection = Callable[[], AbstractContextManager[sqlite3.Connection]]


@dataclass(frozen=True)
class StoredSummary:
    id: int
    upto_message_id: int  # the last message it stands for
    after_message_id: int | None  # the last message of the conversation when it was made (where the log shows it)
    text: str
    exchanges: int  # how many exchanges it stands for, those of the summaries it folded in included
    tokens_before: int  # what those exchanges took in a request (the tightest model's count)
    tokens_after: int  # what the summary takes
    model: str  # provider:model that wrote it
    created: float


class Summaries:
    def __init__(self, writing: Connection, reading: Connection) -> None:
        """`writing()` gives a connection for one write (a transaction), `reading()` one for a read: a damaged
        database (store/health.py) refuses writes, and its summaries can still be read."""
        self._writing, self._reading = writing, reading

    def add(
        self,
        session_id: str,
        upto_message_id: int,
        text: str,
        *,
        after_message_id: int | None,
        exchanges: int,
        tokens_before: int,
        tokens_after: int,
        model: str,
    ) -> StoredSummary:
        created = time.time()
        with self._writing() as db:
            cursor = db.execute(
                "INSERT INTO summaries (session_id, upto_message_id, after_message_id, text, exchanges, tokens_before,"
                " tokens_after, model, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    upto_message_id,
                    after_message_id,
                    text,
                    exchanges,
                    tokens_before,
                    tokens_after,
                    model,
                    created,
                ),
            )
            row_id = cursor.lastrowid
        assert row_id is not None
        return StoredSummary(
            row_id, upto_message_id, after_message_id, text, exchanges, tokens_before, tokens_after, model, created
        )

    def of_session(self, session_id: str) -> list[StoredSummary]:
        """Every summary of the session, oldest first."""
        with self._reading() as db:
            rows = db.execute("SELECT * FROM summaries WHERE session_id = ? ORDER BY id", (session_id,)).fetchall()
        return [_summary(row) for row in rows]

    def latest_on(self, session_id: str, path: Sequence[int]) -> tuple[StoredSummary, int] | None:
        """The summary standing for the longest start of `path` (message ids, from the first), and how many of
        its messages it stands for; None when none does."""
        position = {message_id: n for n, message_id in enumerate(path)}
        best: tuple[StoredSummary, int] | None = None
        for summary in self.of_session(session_id):
            at = position.get(summary.upto_message_id)
            if at is not None and (best is None or at + 1 >= best[1]):
                best = (summary, at + 1)
        return best


def _summary(row: sqlite3.Row) -> StoredSummary:
    return StoredSummary(
        id=row["id"],
        upto_message_id=row["upto_message_id"],
        after_message_id=row["after_message_id"],
        text=row["text"],
        exchanges=row["exchanges"],
        tokens_before=row["tokens_before"],
        tokens_after=row["tokens_after"],
        model=row["model"],
        created=row["created"],
    )
