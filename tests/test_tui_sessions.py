"""Stored sessions in the TUI: every turn saved, reopened with its history, Ctrl+N keeps the old one,
↑ history survives a restart, and a long session opens with only its newest exchanges mounted."""

from __future__ import annotations

from moa_chat.providers.loopback_server import Reply
from moa_chat.store import SessionStore
from moa_chat.tui.app import MoAChatApp
from moa_chat.tui.widgets.chat_log import FIRST_BATCH, HISTORY_BATCH, EarlierMessages, UserPrompt, Welcome
from moa_chat.tui.widgets.prompt_input import PromptInput
from moa_chat.tui.widgets.reply import AssistantReply
from tui_helpers import run_turn, stored_session, wait_until


def stored_app(config, store: SessionStore, session_id: str | None = None) -> MoAChatApp:
    session = stored_session(config, store, session_id)
    app = MoAChatApp(config, config.preset("wire"), session=session, theme="textual-dark", remember_theme=False)
    app.animation_level = "none"
    return app


async def test_a_chat_is_saved_and_reopens_with_its_history(home, wire_config, llm_server):
    config = wire_config()
    store = SessionStore(home / "sessions.db")
    app = stored_app(config, store)
    async with app.run_test(size=(110, 36)) as pilot:
        await run_turn(pilot, "first question")
        await run_turn(pilot, "second question")
        session_id = app.session.id
    assert session_id is not None
    (summary,) = store.sessions()
    assert summary.turns == 2 and summary.title == "first question"

    again = stored_app(config, store, session_id)
    async with again.run_test(size=(110, 36)) as pilot:
        await pilot.pause()
        assert not again.query(Welcome)
        assert [m.text for m in again.query(UserPrompt)] == ["first question", "second question"]
        replies = list(again.query(AssistantReply))
        assert [r.text for r in replies] == ["ok from agg", "ok from agg"] and all(r.finished for r in replies)
        assert again.query_one(PromptInput).prompt_history == ["first question", "second question"]
        await run_turn(pilot, "third question")
    sent = llm_server.requests_for("agg")[-1].messages
    assert [m["content"] for m in sent if m["role"] == "user"][:3] == [
        "first question",
        "second question",
        "third question",
    ]
    assert store.session(session_id).turns == 3


async def test_ctrl_n_starts_a_new_session_and_keeps_the_old_one(home, wire_config, llm_server):
    config = wire_config()
    store = SessionStore(home / "sessions.db")
    app = stored_app(config, store)
    async with app.run_test(size=(110, 36)) as pilot:
        await run_turn(pilot, "in the first session")
        first = app.session.id
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: bool(app.query(Welcome)))
        await run_turn(pilot, "in the second session")
        assert app.session.id not in (None, first)
    titles = [s.title for s in store.sessions()]
    assert titles == ["in the second session", "in the first session"]


async def test_a_long_session_opens_with_its_newest_exchanges_and_loads_more(home, wire_config):
    config = wire_config()
    store = SessionStore(home / "sessions.db")
    session_id = store.create_session("wire", "long")
    head = None
    for n in range(60):
        head = store.add_message(session_id, {"role": "user", "content": f"question {n}"}, parent_id=head)
        head = store.add_message(session_id, {"role": "assistant", "content": f"answer {n}"}, parent_id=head)
    app = stored_app(config, store, session_id)
    async with app.run_test(size=(110, 36)) as pilot:
        await pilot.pause()
        shown = [m.text for m in app.query(UserPrompt)]
        assert len(shown) == FIRST_BATCH and shown[-1] == "question 59"
        marker = app.query_one(EarlierMessages)
        assert f"{60 - FIRST_BATCH} earlier exchanges" in str(marker.render())
        marker.focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.query(UserPrompt)) == FIRST_BATCH + HISTORY_BATCH)
        for expected in (FIRST_BATCH + 2 * HISTORY_BATCH, 60):  # scrolling to the top asks for more
            await pilot.pause()
            app.chat.chat_log.scroll_home(animate=False)
            await wait_until(pilot, lambda expected=expected: len(app.query(UserPrompt)) == expected)
        await pilot.pause()
        assert not app.query(EarlierMessages)
        assert [m.text for m in app.query(UserPrompt)] == [f"question {n}" for n in range(60)]


def seeded_store(home, config) -> tuple[SessionStore, list[str]]:
    """Three sessions with fixed times (2026-11-30 10:00 UTC and earlier), for deterministic screens."""
    store = SessionStore(home / "sessions.db")
    preset = config.preset("wire")
    ids = []
    for number, (title, prompt, reply, updated) in enumerate(
        (
            ("Rust lifetimes", "explain borrowing in Rust", "A borrow is a reference with a lifetime.", 1_733_000_000),
            ("Kubernetes probes", "readiness or liveness?", "A readinessProbe gates traffic.", 1_764_400_000),
            ("Caching API responses", "how do I cache in a CLI?", "Use a TTL and an ETag.", 1_764_496_800),
        )
    ):
        sid = store.create_session("wire", title, session_id=f"5e55{number:08x}")
        user = store.add_message(sid, {"role": "user", "content": prompt}, parent_id=None)
        turn = store.begin_turn(sid, user, preset)
        store.finish_turn(
            turn,
            session_id=sid,
            parent_id=user,
            status="ok",
            error=None,
            seconds=1.0,
            messages=[{"role": "assistant", "content": reply}],
            calls=[],
            partial_id=None,
        )
        with store.transaction() as db:
            db.execute("UPDATE sessions SET created = ?, updated = ? WHERE id = ?", (updated, updated, sid))
        ids.append(sid)
    return store, ids


async def test_the_sessions_screen_filters_opens_renames_and_deletes(home, wire_config, llm_server):
    from moa_chat.tui.screens.session_browser import ConfirmDelete, RenameSession, SessionsScreen

    config = wire_config()
    store, ids = seeded_store(home, config)
    app = stored_app(config, store)
    async with app.run_test(size=(110, 40)) as pilot:
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen))
        screen = app.screen
        assert [s.title for s in screen.found] == ["Caching API responses", "Kubernetes probes", "Rust lifetimes"]
        await pilot.press(*"borrow")
        await wait_until(pilot, lambda: [s.title for s in screen.found] == ["Rust lifetimes"])
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, RenameSession))
        app.screen.query_one("Input").value = "Ownership and borrowing"
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen is screen and screen.found[0].title == "Ownership and borrowing")
        await pilot.press("enter")  # open it
        await wait_until(pilot, lambda: app.session.id == ids[0])
        await pilot.pause()
        assert [m.text for m in app.query(UserPrompt)] == ["explain borrowing in Rust"]
        assert app.query_one(AssistantReply).text == "A borrow is a reference with a lifetime."
        await run_turn(pilot, "and lifetimes?")
        assert llm_server.requests_for("agg")[-1].messages[0]["content"] == "explain borrowing in Rust"

        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen))
        await pilot.press("down")  # from the open session (now the newest) to "Caching API responses"
        await pilot.press("f8")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDelete))
        await pilot.press("y")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen))
        assert [s.title for s in app.screen.found] == ["Ownership and borrowing", "Kubernetes probes"]
    assert [s.id for s in store.sessions()] == [ids[0], ids[1]]


NOW = 1_764_500_000.0  # 2026-11-30 10:53 UTC


def test_snapshot_sessions_screen(snap_compare, home, wire_config, frozen_clock, monkeypatch):
    import time as time_module

    from moa_chat.tui.screens.session_browser import SessionsScreen

    monkeypatch.setenv("TZ", "UTC")
    time_module.tzset()
    config = wire_config()
    store, _ids = seeded_store(home, config)
    app = stored_app(config, store)

    async def run_before(pilot):
        await app.push_screen(SessionsScreen(store, now=NOW))
        app.screen.query_one("Input").cursor_blink = False
        await pilot.pause()

    try:
        assert snap_compare(app, terminal_size=(110, 32), run_before=run_before)
    finally:
        monkeypatch.delenv("TZ")
        time_module.tzset()


async def test_regenerate_edit_and_versions_in_the_chat(home, wire_config, llm_server):
    from moa_chat.tui.screens.panel import PanelAnswers

    config = wire_config()
    llm_server.script("agg", [Reply(text="answer one"), Reply(text="answer two"), Reply(text="about dogs")])
    store = SessionStore(home / "sessions.db")
    app = stored_app(config, store)
    async with app.run_test(size=(110, 36)) as pilot:
        await run_turn(pilot, "tell me about cats")
        references = len([r for r in llm_server.requests if r.model.startswith("ref-")])
        await pilot.press("ctrl+g")  # regenerate: the aggregator only
        await wait_until(pilot, lambda: not app.chat.turn_running and app.query(AssistantReply).last().finished)
        assert len([r for r in llm_server.requests if r.model.startswith("ref-")]) == references
        replies = list(app.query(AssistantReply))
        assert [r.text for r in replies] == ["answer two"]  # the old version is off screen, kept in the store
        assert "version 2/2" in str(replies[0].query_one(".reply-meta").render())
        await pilot.press("f9")
        await wait_until(pilot, lambda: app.query(AssistantReply).last().text == "answer one")
        assert "version 1/2" in str(app.query_one(".reply-meta").render())
        await pilot.press("f7")  # what the panel said for this reply
        await wait_until(pilot, lambda: isinstance(app.screen, PanelAnswers))
        assert "ok from ref-b" in app.screen.query_one("#panel-markdown").source
        await pilot.press("escape")
        await pilot.press("f8")
        assert app.query_one(PromptInput).text == "tell me about cats"
        app.query_one(PromptInput).load_text("tell me about dogs")
        await pilot.press("enter")
        await wait_until(
            pilot, lambda: not app.chat.turn_running and app.query(AssistantReply).last().text == "about dogs"
        )
        assert [m.text for m in app.query(UserPrompt)] == ["tell me about dogs"]
        assert "version 3/3" in str(app.query_one(".reply-meta").render())
    prompts = [m.content for m in store.children(None, store.latest().id)]
    assert prompts == ["tell me about cats", "tell me about dogs"]


def test_snapshot_a_reply_with_versions(snap_compare, home, wire_config, llm_server, frozen_clock):
    from tui_helpers import settle

    config = wire_config()
    llm_server.script(
        "agg",
        [
            Reply(text="Use a **TTL** cache: store each response with the time it expires."),
            Reply(text="Cache by **ETag**: keep the response, and revalidate it with `If-None-Match`."),
        ],
    )
    app = stored_app(config, SessionStore(home / "sessions.db"))

    async def run_before(pilot):
        await run_turn(pilot, "How do I cache API responses in a CLI?")
        await pilot.press("ctrl+g")
        await wait_until(pilot, lambda: not app.chat.turn_running and "ETag" in app.query(AssistantReply).last().text)
        await settle(pilot)

    assert snap_compare(app, terminal_size=(110, 24), run_before=run_before)


async def test_a_renamed_row_stays_selected_and_the_delete_question_names_the_session(home, wire_config):
    from moa_chat.tui.screens.session_browser import ConfirmDelete, RenameSession, SessionsScreen
    from textual.widgets import OptionList, Static

    config = wire_config()
    store, _ids = seeded_store(home, config)
    app = stored_app(config, store)
    async with app.run_test(size=(110, 40)) as pilot:
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen))
        screen = app.screen
        await pilot.press("down", "down")  # the third row: "Rust lifetimes"
        chosen = screen.found[2]
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, RenameSession))
        app.screen.query_one("Input").value = "Why is the borrow checker upset?"
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen is screen and chosen.id in [s.id for s in screen.found])
        highlighted = screen.query_one(OptionList).highlighted
        assert highlighted is not None and screen.found[highlighted].id == chosen.id
        await pilot.press("f8")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDelete))
        which = str(app.screen.query_one("#delete-which", Static).render())
        texts = " ".join(str(s.render()) for s in app.screen.query(Static))
        assert chosen.id in which and "Why is the borrow checker upset?" in which and "-" in which.split(" · ")[1]
        assert "??" not in texts
        await pilot.press("n")
