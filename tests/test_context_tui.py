"""A long conversation in the chat: the compaction's marker in the log (Enter opens the summary, and a reopened
session shows it where it was), the header's window fill, "Compact now", a card whose answer was cut to fit,
and a prompt no window can hold kept in its box. Against a scripted server that enforces each model's window."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import write_config
from moa_chat.config import load_config
from moa_chat.providers.loopback_server import Reply
from moa_chat.providers.loopback_windows import ModelWindow
from moa_chat.store import SessionStore
from moa_chat.tui.screens.summary_view import SummaryView
from moa_chat.tui.widgets.compaction_marker import CompactionMarker
from moa_chat.tui.widgets.header import StatusHeader
from moa_chat.tui.widgets.prompt_input import PromptInput
from scripted_server import ScriptedServer
from test_long_conversation import CONFIG, MAX_TOKENS, SENTENCE, WINDOW, answer
from tui_helpers import make_app, run_turn, send, stored_session, wait_until


@pytest.fixture
def windowed() -> Iterator[ScriptedServer]:
    server = ScriptedServer(windows={m: ModelWindow(WINDOW, "vllm") for m in ("ref-a", "ref-b", "agg")})
    for model in ("ref-a", "ref-b", "agg"):
        server.script(model, answer)
    yield server
    server.stop()


def app_on(home, server: ScriptedServer, store: SessionStore, session_id: str | None = None):
    config = load_config(write_config(home, CONFIG.format(base_url=server.base_url, max_tokens=MAX_TOKENS)))
    return make_app(config, "long", session=stored_session(config, store, session_id, preset="long"))


async def test_a_compacted_conversation_shows_its_marker_and_the_summary_opens(home, windowed):
    store = SessionStore(home / "sessions.db")
    app = app_on(home, windowed, store)
    async with app.run_test(size=(120, 40)) as pilot:
        turns = 0
        while not app.query(CompactionMarker):
            turns += 1
            assert turns <= 12, "no compaction in 12 exchanges"
            await run_turn(pilot, f"Question {turns}: how long does the cache keep answer {turns}?")
        marker = app.query_one(CompactionMarker)
        assert "earlier exchanges summarised" in str(marker.render()) or "earlier exchange summarised" in str(
            marker.render()
        )
        # It stands above the prompt of the turn that compacted the conversation.
        children = list(app.chat.chat_log.children)
        assert children[children.index(marker) + 1] is app.chat.chat_log.last_prompt()
        # The header shows the fullest window, as the latest calls filled it.
        header = app.query_one(StatusHeader)
        assert header.fill is not None and header.fill.window == WINDOW and "ctx " in str(header.render())
        marker.focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, SummaryView))
        assert "numbered questions about a cache" in str(app.screen.query_one("#summary-markdown").source)
        await pilot.press("escape")
        session_id = app.session.id
    reopened = app_on(home, windowed, SessionStore(home / "sessions.db"), session_id)
    async with reopened.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: bool(reopened.query(CompactionMarker)))
        marker = reopened.query_one(CompactionMarker)
        assert marker.compacted.text.startswith("The user asks numbered questions")


async def test_compact_now_summarises_at_once_and_says_so(home, windowed):
    store = SessionStore(home / "sessions.db")
    app = app_on(home, windowed, store)
    async with app.run_test(size=(120, 40)) as pilot:
        for n in range(1, 4):
            await run_turn(pilot, f"Question {n}?")
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: bool(app.query(CompactionMarker)))
        assert app.session.context.summary is not None
        # The marker sits at the log's end: the summary was made after the last exchange.
        assert list(app.chat.chat_log.children)[-1] is app.query_one(CompactionMarker)


async def test_a_prompt_no_window_can_hold_stays_in_the_box(home, windowed, monkeypatch):
    store = SessionStore(home / "sessions.db")
    app = app_on(home, windowed, store)
    said: list[tuple[str, str]] = []
    async with app.run_test(size=(120, 40)) as pilot:
        monkeypatch.setattr(app.chat, "notify", lambda message, **kw: said.append((kw.get("title", ""), message)))
        await run_turn(pilot, "Question 1?")  # the first turn learns the windows
        asked = len(windowed.requests)
        huge = SENTENCE * 300
        await send(pilot, huge)
        await wait_until(pilot, lambda: any(title == "Not sent" for title, _ in said))
        (problem,) = [message for title, message in said if title == "Not sent"]
        assert problem.startswith("The prompt is about ") and f"context window is {WINDOW:,} tokens" in problem
        assert app.query_one(PromptInput).full_text == huge  # kept, to shorten
        assert len(windowed.requests) == asked  # nothing was sent


async def test_a_card_whose_answer_was_cut_to_fit_says_so(home, windowed):
    windowed.script("ref-a", Reply(text=SENTENCE * 90))
    windowed.script("ref-b", Reply(text=SENTENCE * 45))
    store = SessionStore(home / "sessions.db")
    app = app_on(home, windowed, store)
    async with app.run_test(size=(120, 40)) as pilot:
        await run_turn(pilot, "How long does the cache keep an answer?")
        cards = app.chat.sidebar.cards()
        assert all(card.cut is not None for card in cards)
        assert all("cut to fit" in str(card.render()) for card in cards)
