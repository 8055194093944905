"""`SessionStore`: every conversation, kept in SQLite.

A session's messages form a tree: an edited prompt or a regenerated reply is a sibling of the one it
replaces, and the session's head names the leaf the conversation continues from. Each MoA turn keeps the
preset it ran with and one row per model call (references with their full answers, the aggregator's
rounds), so an old turn stays readable and can be regenerated from its stored references.

Only conversation data is written: no API key, header or environment variable ever reaches the file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from ..config import Preset
from .continuation import latest_leaf_of, place_after_latest
from .database import StoreError, connect, default_path, is_damage
from .health import StoreDamaged, StoreHealth
from .images import kept_parts, parts_text, sent_parts
from .model_facts import ModelFacts
from .records import (
    SessionSummary,
    StoredCall,
    StoredMessage,
    StoredTurn,
    call_from_row,
    clean,
    insert_call,
    message_from_row,
    summary_from_row,
    turn_from_row,
)
from .session_lock import new_session_id
from .summaries import Summaries

TITLE_LENGTH = 60
# A session's turns are its exchanges: the prompts on the conversation shown (the path to its head). A
# regeneration, a re-ask or an edit adds a version of an exchange, not another one.
_SUMMARIES = """
    SELECT s.id, s.title, s.created, s.updated, s.preset,
           (WITH RECURSIVE path(id, parent_id, role) AS (
                SELECT m.id, m.parent_id, m.role FROM messages m WHERE m.id = s.head_id
                UNION ALL
                SELECT m.id, m.parent_id, m.role FROM messages m JOIN path p ON m.id = p.parent_id
            ) SELECT COUNT(*) FROM path WHERE role = 'user') AS turns,
           (SELECT SUM(c.cost) FROM calls c JOIN turns t ON t.id = c.turn_id WHERE t.session_id = s.id) AS cost
    FROM sessions s
"""


class SessionStore:
    def __init__(self, path: Path | None = None) -> None:
        self.file = path or default_path()
        self._db = connect(self.file)
        self._lock = threading.RLock()
        self.health = StoreHealth.watching(self.file)  # writes wait for its check, and stop once it finds damage
        self.model_facts = ModelFacts(self.transaction, self.reading)  # learned windows and token calibrations
        self.summaries = Summaries(self.transaction, self.reading)

    def close(self) -> None:
        self.health.stop()
        with self._lock:
            self._db.close()

    @contextlib.contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """The connection, for reads only (no transaction, no wait for the check made at opening); damage met
        while reading is reported to the store's health."""
        with self._lock:
            try:
                yield self._db
            except sqlite3.DatabaseError as exc:
                self._raise_if_damaged(exc)
                raise

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Group writes: all of them are committed on a clean exit, none of them if anything fails.

        The connection never stays inside a transaction after this returns or raises: a COMMIT that
        fails (SQLITE_BUSY, a full disk, a deferred constraint) leaves SQLite's transaction open, and
        every later write on this connection would then fail with "cannot start a transaction within a
        transaction" or, worse, land in that stale transaction and vanish with it.
        """
        self.health.writable()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except sqlite3.DatabaseError as exc:
                self._rollback()
                self._raise_if_damaged(exc)
                raise
            except BaseException:
                self._rollback()
                raise
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                self._raise_if_damaged(exc)
                raise StoreError(
                    f"could not save to {self.file} ({exc}); the change was not kept. Check that the disk has"
                    " free space and that no other program holds the database locked, then try again"
                ) from exc

    def _rollback(self) -> None:
        # SQLite may already have rolled back on its own (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM): a
        # ROLLBACK then fails with "no transaction is active", which must not hide the error being handled.
        if self._db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")

    def _query(self, sql: str, args: tuple[object, ...] = ()) -> list[sqlite3.Row]:
        with self.reading() as db:
            return list(db.execute(sql, args))

    def _raise_if_damaged(self, exc: sqlite3.Error) -> None:
        if isinstance(exc, sqlite3.DatabaseError) and is_damage(exc):
            self.health.found(str(exc))
            raise StoreDamaged(self.health.message) from exc

    # ------------------------------------------------------------------ sessions

    def create_session(self, preset: str, title: str = "", *, session_id: str | None = None) -> str:
        now = time.time()
        session_id = session_id or new_session_id()  # an id locked before the session exists: session_lock.py
        with self.transaction() as db:
            db.execute(
                "INSERT INTO sessions (id, title, created, updated, preset) VALUES (?, ?, ?, ?, ?)",
                (session_id, make_title(title), now, now, preset),
            )
        return session_id

    def sessions(self, query: str | None = None, limit: int = 500) -> list[SessionSummary]:
        """Newest first; `query` matches titles and message text (full-text search)."""
        sql = _SUMMARIES
        args: tuple[object, ...] = ()
        if query and query.strip():
            sql += """
                WHERE s.title LIKE ? ESCAPE '\\'
                   OR s.id IN (SELECT m.session_id FROM messages m
                               JOIN messages_fts f ON f.rowid = m.id WHERE messages_fts MATCH ?)
            """
            args = (f"%{_like(query.strip())}%", _fts_query(query))
        sql += " ORDER BY s.updated DESC LIMIT ?"
        return [summary_from_row(row) for row in self._query(sql, (*args, limit))]

    def session(self, id_or_prefix: str) -> SessionSummary:
        """A session by id, or by an unambiguous prefix of one (as `git` takes commits)."""
        rows = self._query(
            _SUMMARIES + " WHERE s.id LIKE ? ESCAPE '\\' ORDER BY s.updated DESC LIMIT 3", (f"{_like(id_or_prefix)}%",)
        )
        if not rows:
            raise StoreError(f"no session {id_or_prefix!r} (list them with `moa-chat sessions`)")
        exact = [r for r in rows if r["id"] == id_or_prefix]
        if len(rows) > 1 and not exact:
            raise StoreError(f"{id_or_prefix!r} matches several sessions; give more of the id")
        return summary_from_row(exact[0] if exact else rows[0])

    def latest(self) -> SessionSummary | None:
        found = self.sessions(limit=1)
        return found[0] if found else None

    def rename(self, session_id: str, title: str) -> None:
        with self.transaction() as db:
            db.execute("UPDATE sessions SET title = ? WHERE id = ?", (make_title(title), session_id))

    def delete(self, session_id: str) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

    # ------------------------------------------------------------------ messages

    def add_message(
        self, session_id: str, message: Mapping[str, object], *, parent_id: int | None, turn_id: int | None = None
    ) -> int:
        """Append a message under `parent_id` and make it the session's head (committed on return)."""
        with self.transaction() as db:
            return self._insert_message(db, session_id, message, parent_id, turn_id)

    def _insert_message(
        self,
        db: sqlite3.Connection,
        session_id: str,
        message: Mapping[str, object],
        parent_id: int | None,
        turn_id: int | None,
        partial: bool = False,
    ) -> int:
        now = time.time()
        content = message.get("content")
        parts = kept_parts(db, content, now) if isinstance(content, list) else None
        cursor = db.execute(
            "INSERT INTO messages (session_id, parent_id, turn_id, role, content, tool_calls, tool_call_id, partial,"
            " created, parts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                session_id,
                parent_id,
                turn_id,
                str(message.get("role", "")),
                _text(parts_text(content) if parts is not None else content),
                json.dumps(message["tool_calls"]) if message.get("tool_calls") else None,
                message.get("tool_call_id"),
                int(partial),
                now,
                json.dumps(parts) if parts is not None else None,
            ),
        )
        message_id = int(cursor.lastrowid or 0)
        db.execute("UPDATE sessions SET head_id = ?, updated = ? WHERE id = ?", (message_id, now, session_id))
        return message_id

    def save_partial(self, session_id: str, text: str, *, parent_id: int, turn_id: int, message_id: int | None) -> int:
        """Save a reply as it streams: the first call adds it (marked partial), later ones update it."""
        with self.transaction() as db:
            if message_id is None:
                return self._insert_message(
                    db, session_id, {"role": "assistant", "content": text}, parent_id, turn_id, partial=True
                )
            db.execute("UPDATE messages SET content = ? WHERE id = ?", (clean(text), message_id))
            return message_id

    def path(self, session_id: str, head_id: int | None = None) -> list[StoredMessage]:
        """The conversation from the first message to `head_id` (default: the session's head)."""
        if head_id is None:
            row = self._query("SELECT head_id FROM sessions WHERE id = ?", (session_id,))
            head_id = row[0]["head_id"] if row else None
        if head_id is None:
            return []
        rows = self._query(
            """
            WITH RECURSIVE chain (id, depth) AS (
                SELECT ?, 0
                UNION ALL
                SELECT m.parent_id, chain.depth + 1 FROM messages m JOIN chain ON m.id = chain.id
                WHERE m.parent_id IS NOT NULL
            )
            SELECT m.* FROM chain JOIN messages m ON m.id = chain.id ORDER BY chain.depth DESC
            """,
            (head_id,),
        )
        return [self._with_images(message_from_row(row)) for row in rows]

    def _with_images(self, message: StoredMessage) -> StoredMessage:
        """A message whose content had images: its parts again, each image as it was sent."""
        if message.parts is None:
            return message
        return dataclasses.replace(message, parts=sent_parts(message.parts, self.image))

    def image(self, sha256: str) -> tuple[str, bytes] | None:
        """A kept image's media type and bytes, by the SHA-256 of its bytes."""
        rows = self._query("SELECT media_type, bytes FROM images WHERE sha256 = ?", (sha256,))
        return (rows[0]["media_type"], bytes(rows[0]["bytes"])) if rows else None

    def children(self, message_id: int | None, session_id: str) -> list[StoredMessage]:
        if message_id is None:
            rows = self._query(
                "SELECT * FROM messages WHERE session_id = ? AND parent_id IS NULL ORDER BY id", (session_id,)
            )
        else:
            rows = self._query("SELECT * FROM messages WHERE parent_id = ? ORDER BY id", (message_id,))
        return [self._with_images(message_from_row(row)) for row in rows]

    def alternatives(self, session_id: str, user_message_id: int) -> list[int]:
        """Every version of the exchange `user_message_id` belongs to: for each prompt written at that point
        (the original and its edits), each reply to it (the original, regenerations, re-asks); a prompt
        with no reply counts once. Oldest first, as the ids of the reply (or prompt) each version starts at."""
        rows = self._query(
            """
            SELECT COALESCE(r.id, u.id) AS start FROM messages u
            LEFT JOIN messages r ON r.parent_id = u.id
            WHERE u.session_id = ? AND u.role = 'user'
              AND u.parent_id IS (SELECT parent_id FROM messages WHERE id = ?)
            ORDER BY start
            """,
            (session_id, user_message_id),
        )
        return [row["start"] for row in rows]

    def set_head(self, session_id: str, message_id: int | None) -> None:
        with self.transaction() as db:
            db.execute("UPDATE sessions SET head_id = ? WHERE id = ?", (message_id, session_id))

    def turn_of(self, message_id: int) -> int | None:
        """The turn that wrote a message (None for a prompt, or a message that is gone)."""
        rows = self._query("SELECT turn_id FROM messages WHERE id = ?", (message_id,))
        return rows[0]["turn_id"] if rows else None

    def latest_leaf(self, message_id: int) -> int:
        """Follow the newest child down from `message_id` to a leaf (where a branch continues)."""
        current = message_id
        while True:
            rows = self._query("SELECT id FROM messages WHERE parent_id = ? ORDER BY id DESC LIMIT 1", (current,))
            if not rows:
                return current
            current = rows[0]["id"]

    # ------------------------------------------------------------------ turns

    def begin_turn(self, session_id: str, user_message_id: int, preset: Preset, kind: str = "ask") -> int:
        preset_json = json.dumps(_preset_as_json(preset), sort_keys=True)
        with self.transaction() as db:
            cursor = db.execute(
                "INSERT INTO turns (session_id, user_message_id, kind, preset, preset_json, status, started)"
                " VALUES (?, ?, ?, ?, ?, 'running', ?)",
                (session_id, user_message_id, kind, preset.name, preset_json, time.time()),
            )
            db.execute(
                "UPDATE sessions SET preset = ?, updated = ? WHERE id = ?", (preset.name, time.time(), session_id)
            )
            return int(cursor.lastrowid or 0)

    def finish_turn(
        self,
        turn_id: int,
        *,
        session_id: str,
        parent_id: int,
        status: str,
        error: str | None,
        seconds: float,
        messages: Sequence[Mapping[str, object]],
        calls: list[StoredCall],
        partial_id: int | None,
        solo: bool = False,
        reference_order: list[int] | None = None,
        layers_run: int | None = None,
        layers_reason: str | None = None,
    ) -> int:
        """Replace the streamed partial with the turn's messages, record its calls; returns the new head.

        A new prompt (a turn of kind `ask`) is placed, in this one transaction, after the session's latest
        message as it stands now, not as it stood when the turn began: another process may have continued
        the same session meanwhile (two `ask -c` at once). Whatever another turn hung under this turn's
        unfinished prompt or partial reply moves after its finished reply, so that every exchange stays
        whole and each answer follows its own prompt.
        """
        with self.transaction() as db:
            kind = db.execute("SELECT kind FROM turns WHERE id = ?", (turn_id,)).fetchone()
            later: list[int] = []  # others' messages hung under this turn's prompt or partial reply
            if kind is not None and kind["kind"] == "ask":
                place_after_latest(db, session_id, parent_id)
                under = (parent_id,) if partial_id is None else (parent_id, partial_id)
                later = [
                    row["id"]
                    for row in db.execute(
                        f"SELECT id FROM messages WHERE parent_id IN ({', '.join('?' * len(under))}) AND id IS NOT ?",
                        (*under, partial_id),
                    )
                ]
                # Off the partial before it goes (deleting a message deletes what hangs under it).
                db.executemany("UPDATE messages SET parent_id = ? WHERE id = ?", [(parent_id, i) for i in later])
            if partial_id is not None:
                db.execute("DELETE FROM messages WHERE id = ?", (partial_id,))
            head = parent_id
            for message in messages:
                head = self._insert_message(db, session_id, message, head, turn_id)
            if later:
                db.executemany("UPDATE messages SET parent_id = ? WHERE id = ?", [(head, i) for i in later])
                head = latest_leaf_of(db, head)
            db.execute("UPDATE sessions SET head_id = ? WHERE id = ?", (head, session_id))
            order = json.dumps(reference_order) if reference_order is not None else None
            db.execute(
                "UPDATE turns SET status = ?, error = ?, seconds = ?, solo = ?, reference_order = ?, layers_run = ?,"
                " layers_reason = ? WHERE id = ?",
                (status, error, seconds, int(solo), order, layers_run, layers_reason, turn_id),
            )
            for call in calls:
                insert_call(db, turn_id, call)
            return head

    def mark_interrupted(self, session_id: str) -> None:
        """Turns left running by a process that died are interrupted, not running."""
        with self.transaction() as db:
            db.execute(
                "UPDATE turns SET status = 'interrupted' WHERE session_id = ? AND status = 'running'", (session_id,)
            )

    def turns(self, session_id: str) -> list[StoredTurn]:
        rows = self._query("SELECT * FROM turns WHERE session_id = ? ORDER BY id", (session_id,))
        calls: dict[int, list[StoredCall]] = {}
        for call in self._query(
            "SELECT c.* FROM calls c JOIN turns t ON t.id = c.turn_id WHERE t.session_id = ? ORDER BY c.id",
            (session_id,),
        ):
            calls.setdefault(call["turn_id"], []).append(call_from_row(call))
        return [turn_from_row(row, calls.get(row["id"], [])) for row in rows]

    def turn(self, turn_id: int) -> StoredTurn:
        rows = self._query("SELECT * FROM turns WHERE id = ?", (turn_id,))
        if not rows:
            raise StoreError(f"no turn {turn_id}")
        calls = [call_from_row(c) for c in self._query("SELECT * FROM calls WHERE turn_id = ? ORDER BY id", (turn_id,))]
        return turn_from_row(rows[0], calls)

    # ------------------------------------------------------------------ prompt history

    def add_prompt(self, text: str) -> None:
        with self.transaction() as db:
            last = db.execute("SELECT text FROM prompt_history ORDER BY id DESC LIMIT 1").fetchone()
            if last is None or last["text"] != text:
                db.execute("INSERT INTO prompt_history (text, created) VALUES (?, ?)", (text, time.time()))

    def prompt_history(self, limit: int = 1000) -> list[str]:
        rows = self._query("SELECT text FROM prompt_history ORDER BY id DESC LIMIT ?", (limit,))
        return [row["text"] for row in reversed(rows)]


def make_title(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first if len(first) <= TITLE_LENGTH else first[: TITLE_LENGTH - 1].rstrip() + "…"


def _preset_as_json(preset: Preset) -> dict[str, object]:
    """The preset as it was for this turn: models and settings (never keys: a preset holds none); read
    back as a PresetJson."""
    return dataclasses.asdict(preset)


def _text(content: object) -> str:
    if content is None:
        return ""
    text = content if isinstance(content, str) else json.dumps(content)
    return clean(text)


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _fts_query(text: str) -> str:
    """Each word as a quoted prefix term: user text never reads as FTS5 syntax."""
    words = [w.replace('"', '""') for w in text.split()]
    return " ".join(f'"{w}"*' for w in words) or '""'
