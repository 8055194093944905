"""The session store on its own: round trips, branches, migrations, refusal of a newer schema, privacy."""

from __future__ import annotations

import shutil
import sqlite3
import stat
from pathlib import Path

import pytest
from moa_chat.config import load_config
from moa_chat.engine.events import CallRecord
from moa_chat.llm.usage import Usage
from moa_chat.store import SessionStore, StoredCall, StoreError
from moa_chat.store.migrations import SCHEMA_VERSION

FIXTURES = Path(__file__).with_name("fixtures")


def test_a_conversation_round_trips(tmp_path):
    store = SessionStore(tmp_path / "data" / "sessions.db")
    preset = load_config().preset("demo")
    sid = store.create_session("demo", "How do I cache API responses in a CLI?\nmore detail")
    user = store.add_message(sid, {"role": "user", "content": "How do I cache?"}, parent_id=None)
    turn = store.begin_turn(sid, user, preset)
    partial = store.save_partial(sid, "Cache with", parent_id=user, turn_id=turn, message_id=None)
    assert store.save_partial(sid, "Cache with a TTL", parent_id=user, turn_id=turn, message_id=partial) == partial
    assert [m.content for m in store.path(sid)] == ["How do I cache?", "Cache with a TTL"]
    call = {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    reference = CallRecord("reference", "demo:a", 0, 1, "ok", Usage(3, 4, 7), 0.5, 0.1, "stop")
    aggregator = CallRecord("aggregator", "demo:agg", 0, 1, "ok", Usage(10, 5, 15), 1.0, 0.2, "stop")
    head = store.finish_turn(
        turn,
        session_id=sid,
        parent_id=user,
        status="ok",
        error=None,
        seconds=1.5,
        messages=[
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "file text"},
            {"role": "assistant", "content": "Cache with a TTL."},
        ],
        calls=[StoredCall(reference, "use a TTL"), StoredCall(aggregator)],
        partial_id=partial,
    )
    path = store.path(sid)
    assert [m.as_chat() for m in path] == [
        {"role": "user", "content": "How do I cache?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "file text", "tool_call_id": "call_1"},
        {"role": "assistant", "content": "Cache with a TTL."},
    ]
    assert path[-1].id == head and not any(m.partial for m in path)
    (stored,) = store.turns(sid)
    assert stored.status == "ok" and stored.complete and stored.preset_json["name"] == "demo"
    assert [(c.record, c.text) for c in stored.calls] == [(reference, "use a TTL"), (aggregator, "")]
    summary = store.session(sid[:5])
    assert summary.title == "How do I cache API responses in a CLI?" and summary.turns == 1
    assert summary.preset == "demo"


def test_branches_keep_every_version(tmp_path):
    store = SessionStore(tmp_path / "sessions.db")
    sid = store.create_session("demo", "q")
    user = store.add_message(sid, {"role": "user", "content": "q"}, parent_id=None)
    first = store.add_message(sid, {"role": "assistant", "content": "one"}, parent_id=user)
    second = store.add_message(sid, {"role": "assistant", "content": "two"}, parent_id=user)
    assert [m.content for m in store.path(sid)] == ["q", "two"]
    assert [m.id for m in store.children(user, sid)] == [first, second]
    store.set_head(sid, first)
    assert [m.content for m in store.path(sid)] == ["q", "one"]
    assert store.latest_leaf(user) == second


def test_search_finds_titles_and_message_text_newest_first(tmp_path):
    store = SessionStore(tmp_path / "sessions.db")
    older = store.create_session("demo", "Rust lifetimes")
    store.add_message(older, {"role": "user", "content": "explain borrowing"}, parent_id=None)
    newer = store.create_session("demo", "Kubernetes probes")
    store.add_message(newer, {"role": "assistant", "content": "a readinessProbe checks"}, parent_id=None)
    assert [s.id for s in store.sessions()] == [newer, older]
    assert [s.id for s in store.sessions("lifetimes")] == [older]
    assert [s.id for s in store.sessions("borrow")] == [older]  # a word of a message, by prefix
    assert [s.id for s in store.sessions("readinessprobe")] == [newer]
    assert store.sessions('"unbalanced AND (') == []  # user text is never FTS syntax
    store.rename(older, "Ownership")
    assert store.session(older).title == "Ownership"
    store.delete(older)
    assert [s.id for s in store.sessions()] == [newer]
    with pytest.raises(StoreError, match="no session"):
        store.session(older)


def test_prompt_history_survives_reopening(tmp_path):
    path = tmp_path / "sessions.db"
    store = SessionStore(path)
    for text in ("first", "second", "second", "third"):
        store.add_prompt(text)
    store.close()
    assert SessionStore(path).prompt_history() == ["first", "second", "third"]


def test_the_folder_and_file_are_private(tmp_path):
    folder = tmp_path / "data"
    SessionStore(folder / "sessions.db")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "sessions.db").stat().st_mode) == 0o600


def test_wal_and_foreign_keys_are_on(tmp_path):
    store = SessionStore(tmp_path / "sessions.db")
    assert store._query("PRAGMA journal_mode")[0][0] == "wal"
    assert store._query("PRAGMA foreign_keys")[0][0] == 1


def test_a_database_from_the_first_release_opens_and_upgrades(tmp_path):
    """fixtures/sessions-v1.db was written by schema 1 (before full-text search): it opens, keeps its data,
    reaches the latest schema, and its old messages become searchable."""
    path = tmp_path / "sessions.db"
    shutil.copy(FIXTURES / "sessions-v1.db", path)
    store = SessionStore(path)
    assert store._query("PRAGMA user_version")[0][0] == SCHEMA_VERSION
    (summary,) = store.sessions()
    assert summary.title == "A session from schema 1"
    assert [m.content for m in store.path(summary.id)] == ["hello", "hi there"]
    assert [s.id for s in store.sessions("there")] == [summary.id]  # text stored before search existed
    assert store._query("PRAGMA integrity_check")[0][0] == "ok"


def test_a_newer_schema_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "sessions.db"
    SessionStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = path.read_bytes()
    with pytest.raises(StoreError, match="newer moa-chat"):
        SessionStore(path)
    assert path.read_bytes() == before


def test_a_file_that_is_not_a_database_gives_a_clear_error(tmp_path):
    path = tmp_path / "sessions.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable session database"):
        SessionStore(path)


def test_a_commit_that_fails_is_rolled_back_and_the_store_keeps_working(tmp_path):
    """SQLite keeps the transaction open when COMMIT itself fails. Here the failure is a foreign key
    deferred to COMMIT (a real SQLite error, raised by COMMIT and by no other statement): the store must
    roll back, say what happened, and let the next write on the same connection succeed."""
    path = tmp_path / "sessions.db"
    store = SessionStore(path)
    sid = store.create_session("demo", "kept")
    orphan = "INSERT INTO messages (session_id, role, content, created) VALUES ('gone', 'user', 'orphan', 0)"
    with (
        pytest.raises(StoreError, match=r"could not save to .*FOREIGN KEY.*not kept") as failed,
        store.transaction() as db,
    ):
        db.execute("PRAGMA defer_foreign_keys = ON")
        db.execute(orphan)
    assert isinstance(failed.value.__cause__, sqlite3.IntegrityError)
    assert not store._db.in_transaction
    store.add_message(sid, {"role": "user", "content": "after"}, parent_id=None)
    store.add_prompt("after")
    store.close()
    reopened = SessionStore(path)  # what came next was committed; the orphan never was
    assert [m.content for m in reopened.path(sid)] == ["after"]
    assert reopened._query("SELECT COUNT(*) FROM messages")[0][0] == 1
    assert reopened.prompt_history() == ["after"]


class _CommitFails:
    """The store's connection, except that the first COMMIT fails as SQLITE_FULL or SQLITE_BUSY do: with
    the transaction still open."""

    def __init__(self, db: sqlite3.Connection, error: str) -> None:
        self.db, self.error = db, error

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if sql == "COMMIT" and self.error:
            error, self.error = self.error, ""
            raise sqlite3.OperationalError(error)
        return self.db.execute(sql, *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self.db, name)


@pytest.mark.parametrize("error", ["database or disk is full", "database is locked"])
def test_a_commit_refused_by_the_disk_or_a_lock_leaves_no_stale_transaction(tmp_path, error):
    store = SessionStore(tmp_path / "sessions.db")
    sid = store.create_session("demo", "kept")
    real = store._db
    store._db = _CommitFails(real, error)  # type: ignore[assignment]
    with pytest.raises(StoreError, match="free space"):
        store.add_message(sid, {"role": "user", "content": "lost"}, parent_id=None)
    assert not real.in_transaction
    kept = store.add_message(sid, {"role": "user", "content": "kept"}, parent_id=None)
    assert [m.id for m in store.path(sid)] == [kept]
    assert [m.content for m in store.children(None, sid)] == ["kept"]  # the failed write left nothing behind


# --------------------------------------------------------------------------- two continuations at once


class _Continuation:
    """One `ask -c` as the store sees it: its prompt under the head it read, a partial reply, its finish."""

    def __init__(self, store: SessionStore, sid: str, prompt: str, preset) -> None:
        self.store, self.sid, self.prompt = store, sid, prompt
        parent = store.path(sid)[-1].id
        self.user = store.add_message(sid, {"role": "user", "content": prompt}, parent_id=parent)
        self.turn = store.begin_turn(sid, self.user, preset)
        self.partial: int | None = None

    def stream(self) -> None:
        self.partial = self.store.save_partial(
            self.sid, f"half of {self.prompt}", parent_id=self.user, turn_id=self.turn, message_id=None
        )

    def finish(self) -> int:
        return self.store.finish_turn(
            self.turn,
            session_id=self.sid,
            parent_id=self.user,
            status="ok",
            error=None,
            seconds=1.0,
            messages=[{"role": "assistant", "content": f"answer to {self.prompt}"}],
            calls=[],
            partial_id=self.partial,
        )


@pytest.mark.parametrize(
    "steps",
    [
        "A B A.finish B.finish",
        "A B B.finish A.finish",
        "A A.stream B B.stream A.finish B.finish",
        "A A.stream B B.stream B.finish A.finish",
        "A B A.stream B.finish A.finish",  # B ends while A's partial reply is the head
        "A B B.stream A.stream A.finish B.finish",
    ],
)
def test_two_continuations_at_once_keep_both_exchanges_whole_and_in_order(tmp_path, steps):
    store = SessionStore(tmp_path / "sessions.db")
    preset = load_config().preset("demo")
    sid = store.create_session("demo", "first")
    first = store.add_message(sid, {"role": "user", "content": "first"}, parent_id=None)
    store.add_message(sid, {"role": "assistant", "content": "answer to first"}, parent_id=first)
    runs: dict[str, _Continuation] = {}
    for step in steps.split():
        name, _, action = step.partition(".")
        if not action:
            runs[name] = _Continuation(store, sid, f"prompt {name}", preset)
        else:
            getattr(runs[name], action)()
    contents = [m.content for m in store.path(sid)]
    assert contents[:2] == ["first", "answer to first"]
    exchanges = list(zip(contents[2::2], contents[3::2], strict=True))
    assert sorted(exchanges) == [("prompt A", "answer to prompt A"), ("prompt B", "answer to prompt B")]
    assert not any(m.partial for m in store.path(sid))
    with sqlite3.connect(store.file) as db:
        assert db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 6  # nothing lost, nothing left over
