"""A session database damaged in the middle of its file (one page overwritten, as `dd … seek=N conv=notrunc`
does) is never written: the store checks its file as it opens and, once damage is seen, refuses every write
and says so, once. `moa-chat ask` as a real process, the chat through Pilot, a real SQLite file."""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_moa
from moa_chat.store import SessionStore, StoreError, default_path
from moa_chat.tui.screens.session_browser import SessionsScreen
from moa_chat.tui.widgets.chat_log import NoticeLine
from moa_chat.tui.widgets.header import StatusHeader
from textual.widgets import OptionList
from tui_helpers import make_app, run_turn, stored_session, wait_until

PAGE = 4096


def many_sessions(count: int = 40) -> Path:
    """A store of `count` sessions of 20 messages: a few hundred pages."""
    store = SessionStore()
    for n in range(count):
        sid = store.create_session("demo", f"session {n}")
        parent = None
        for m in range(20):
            text = f"message {m} of session {n}: " + "how do I cache API responses? " * 8
            parent = store.add_message(sid, {"role": "user", "content": text}, parent_id=parent)
    store.close()
    return default_path()


def damage_a_page_of_messages(path: Path) -> int:
    """Overwrite, with random bytes, a leaf page of the messages table from the middle of the file."""
    with sqlite3.connect(path) as db:
        pages = [
            row[0] for row in db.execute("SELECT pageno FROM dbstat WHERE name = 'messages' AND pagetype = 'leaf'")
        ]
    page = pages[len(pages) // 2]
    with path.open("r+b") as file:
        file.seek((page - 1) * PAGE)
        file.write(random.Random(page).randbytes(PAGE))
    return page


def nothing_written(path: Path, before: bytes) -> bool:
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes() == before and (not wal.exists() or wal.stat().st_size == 0)


def test_ask_on_a_store_damaged_in_the_middle_answers_writes_nothing_and_says_so(home):
    path = many_sessions()
    damage_a_page_of_messages(path)
    before = path.read_bytes()
    result = run_moa("ask", "--preset", "demo", "fresh q")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()  # the answer
    assert "This conversation is not being saved: the session database" in result.stderr
    assert "is damaged" in result.stderr and "moa-chat writes nothing more to it" in result.stderr
    assert "moa-chat doctor" in result.stderr and "session " not in result.stderr.splitlines()[-1]
    assert nothing_written(path, before)  # before: 14 pages changed, and a session left "incomplete (running)"


async def test_the_chat_says_at_start_that_the_store_is_damaged_and_a_turn_writes_nothing(
    home, llm_server, wire_config
):
    path = many_sessions()
    damage_a_page_of_messages(path)
    before = path.read_bytes()
    config = wire_config()
    store = SessionStore()
    app = make_app(config, "wire", session=stored_session(config, store))
    async with app.run_test(size=(120, 30)) as pilot:

        def told() -> bool:
            notices = [n.message for n in app.query(NoticeLine)]
            return any("Conversations are not being saved: the session database" in n for n in notices)

        await wait_until(pilot, told)
        assert "⚠ not saving" in app.query_one(StatusHeader).render().plain
        await run_turn(pilot, "fresh q")
        notices = [n.message for n in app.query(NoticeLine)]
        assert sum("is damaged" in n for n in notices) == 2  # said once at start, once for the turn not saved
        assert app.chat.session.id is None
    store.close()
    assert nothing_written(path, before)


async def test_ctrl_o_on_a_damaged_store_shows_why_instead_of_crashing(home, wire_config):
    path = many_sessions()
    damage_a_page_of_messages(path)
    config = wire_config()
    store = SessionStore()
    app = make_app(config, "wire", session=stored_session(config, store))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen))
        options = app.screen.query_one(OptionList)
        shown = options.get_option_at_index(0).prompt
        assert "The sessions cannot be listed: the session database" in str(shown)
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, SessionsScreen))
        assert "⚠ not saving" in app.query_one(StatusHeader).render().plain
    store.close()


def test_a_disk_io_error_at_opening_is_called_passing_and_the_file_is_whole_afterwards(home):
    """Another process writes while the -wal file is removed under it: opening fails with a disk I/O error,
    though the database is intact. It is tried again, then said to be passing, never "move it aside"."""
    store = SessionStore()
    sid = store.create_session("demo", "kept")
    store.add_message(sid, {"role": "user", "content": "still here"}, parent_id=None)
    path = default_path()
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("INSERT INTO prompt_history (text, created) VALUES ('one', 1)")
        os.unlink(path.with_name(path.name + "-wal"))
        writer.execute("INSERT INTO prompt_history (text, created) VALUES ('two', 2)")
        result = run_moa("sessions")
        assert result.returncode == 2
        assert "cannot open the session database" in result.stderr and "just now" in result.stderr
        assert "not known to be damaged" in result.stderr and "tried 3 times" in result.stderr
        assert "move it aside" not in result.stderr
    finally:
        writer.close()
        store.close()
    listed = subprocess.run(
        [sys.executable, "-m", "moa_chat", "sessions"], capture_output=True, text=True, env=dict(os.environ)
    )
    assert listed.returncode == 0 and "kept" in listed.stdout  # nothing was lost


def test_the_store_refuses_every_write_once_its_check_finds_damage(home):
    path = many_sessions()
    damage_a_page_of_messages(path)
    store = SessionStore()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="is damaged"):
        store.create_session("demo", "new")
    with pytest.raises(StoreError, match="moa-chat writes nothing more to it"):
        store.add_prompt("anything")
    store.close()
    assert nothing_written(path, before)


def test_a_damaged_store_still_reads_a_sessions_summary_and_learned_windows(home):
    """Reads go on once damage is seen (only writes stop): a reopened compacted session still sends its summary,
    and a learned window is still known. They were read inside a write transaction, and refused with it."""
    from moa_chat.llm.windows import LearnedWindow

    path = many_sessions(count=30)
    store = SessionStore()
    sid = store.sessions()[0].id
    upto = store.path(sid, None)[-1].id
    store.summaries.add(
        sid, upto, "The user asked about caching.", after_message_id=upto, exchanges=10, tokens_before=900,
        tokens_after=40, model="wire:agg",
    )  # fmt: skip
    store.model_facts.learn_window("wire", "agg", LearnedWindow(2048, 2100, None, 1.0))
    store.close()
    damage_a_page_of_messages(path)
    damaged = SessionStore()
    with pytest.raises(StoreError, match="is damaged"):
        damaged.add_prompt("anything")  # the check at opening found the damage: nothing is written
    found = damaged.summaries.latest_on(sid, [upto])
    assert found is not None and found[0].text == "The user asked about caching."
    assert damaged.model_facts.learned_window("wire", "agg") == LearnedWindow(2048, 2100, None, 1.0)
    damaged.close()
