"""A reasoning model's thinking in the chat: a dimmed block above the reply that streams
while the aggregator thinks, folds to one line when the answer begins, and opens with Enter or a click; a
reference card that says "thinking…"; a stored reply with its thought folded."""

from __future__ import annotations

import threading

from moa_chat.engine import ReferenceProgress, ReferenceStarted
from moa_chat.providers.loopback_server import Reply
from moa_chat.store import SessionStore
from moa_chat.tui.app import MoAChatApp
from moa_chat.tui.widgets.markdown import ReplyMarkdown
from moa_chat.tui.widgets.reply import AssistantReply
from moa_chat.tui.widgets.sidebar import ReferenceSidebar
from moa_chat.tui.widgets.thinking import LIVE_LINES, ThinkingBlock
from tui_helpers import make_app, run_turn, send, settle, stored_session, wait_until

SIZE = (110, 32)
THOUGHT = "\n".join(
    [
        "The user wants to reverse a list.",
        "Slicing with items[::-1] makes a reversed copy.",
        "items.reverse() works in place and returns None.",
        "reversed(items) gives a lazy iterator.",
        "Which one fits depends on whether the original must stay.",
        "Mention all three, copy first.",
    ]
)
ANSWER = "Use `items[::-1]` for a reversed copy, or `items.reverse()` in place."


def _held_reply(resume: threading.Event) -> Reply:
    """The aggregator thinks, then waits for the test's cue before it writes its answer."""
    return Reply(text=ANSWER, reasoning=THOUGHT, pause_after=0, pause=30, resume=resume)


async def test_the_thinking_streams_above_the_reply_then_folds_when_the_answer_begins(wire_config, llm_server):
    resume = threading.Event()
    llm_server.script("agg", _held_reply(resume))
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "How do I reverse a list?")
        reply = app.query(AssistantReply).last()

        def thinking() -> ThinkingBlock | None:
            blocks = reply.query(ThinkingBlock)
            return blocks.first() if blocks else None

        await wait_until(pilot, lambda: (block := thinking()) is not None and block.thought == THOUGHT)
        block = thinking()
        assert block is not None and block.live and block.has_class("-live")
        assert not reply.query(ReplyMarkdown) and not reply.text  # nothing of the answer yet
        await pilot.pause()
        shown = block.render().plain.splitlines()
        # "thinking…" and the thought's last lines, not all of it.
        assert shown[0].endswith("thinking…") and shown[-1] == "Mention all three, copy first."
        assert len(shown) == 1 + LIVE_LINES and "The user wants" not in block.render().plain
        assert block.size.height == 1 + LIVE_LINES

        resume.set()
        await wait_until(pilot, lambda: reply.finished and not app.chat.turn_running)
        await pilot.pause()
        assert not block.live and not block.has_class("-live")
        assert block.render().plain.startswith("▸ thought for ") and "tokens" in block.render().plain
        assert block.size.height == 1
        # Above the answer, in the reply.
        children = list(reply.children)
        assert children.index(block) < children.index(reply.query_one(ReplyMarkdown))
        assert reply.text == ANSWER and THOUGHT not in reply.text


async def test_enter_and_a_click_open_and_close_the_thinking(wire_config, llm_server):
    llm_server.script("agg", Reply(text=ANSWER, reasoning=THOUGHT))
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=SIZE) as pilot:
        await run_turn(pilot, "How do I reverse a list?")
        block = app.query_one(ThinkingBlock)
        assert not block.opened and block.size.height == 1
        block.focus()
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert block.opened and block.has_class("-open")
        assert "The user wants to reverse a list." in block.render().plain
        assert block.size.height >= 1 + len(THOUGHT.splitlines())
        await pilot.press("enter")
        await pilot.pause()
        assert not block.opened and block.size.height == 1
        await pilot.click(block)
        await pilot.pause()
        assert block.opened
        await pilot.click(block)
        await pilot.pause()
        assert not block.opened


async def test_a_reply_without_thinking_has_no_block(wire_config, llm_server):
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=SIZE) as pilot:
        await run_turn(pilot, "hello")
        assert not app.query(ThinkingBlock)


async def test_a_stored_reply_shows_its_thinking_folded(home, wire_config, llm_server):
    llm_server.script("agg", Reply(text=ANSWER, reasoning=THOUGHT))
    config = wire_config()
    store = SessionStore(home / "sessions.db")
    app = MoAChatApp(
        config, config.preset("wire"), session=stored_session(config, store), theme="textual-dark", remember_theme=False
    )
    async with app.run_test(size=SIZE) as pilot:
        await run_turn(pilot, "How do I reverse a list?")
        session_id = app.session.id
    again = MoAChatApp(
        config,
        config.preset("wire"),
        session=stored_session(config, store, session_id),
        theme="textual-dark",
        remember_theme=False,
    )
    async with again.run_test(size=SIZE) as pilot:
        await pilot.pause()
        reply = again.query_one(AssistantReply)
        block = reply.query_one(ThinkingBlock)
        assert block.thought == THOUGHT and not block.live and not block.opened
        assert block.render().plain.startswith("▸ thought · ~")
        children = list(reply.children)
        assert children.index(block) < children.index(reply.query_one(ReplyMarkdown))
        await pilot.click(block)
        await pilot.pause()
        assert "Slicing with items[::-1]" in block.render().plain


async def test_a_reference_that_only_thinks_says_thinking_with_its_speed(wire_config, llm_server):
    resume = threading.Event()
    llm_server.script("ref-a", Reply(text="Reverse it.", reasoning=THOUGHT, pause_after=0, pause=30, resume=resume))
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(120, 40)) as pilot:
        await send(pilot, "How do I reverse a list?")
        card = app.query_one(ReferenceSidebar).card(0)
        assert card is not None
        await wait_until(pilot, lambda: "thinking…" in card.render().plain, describe=lambda: card.render().plain)
        resume.set()
        await wait_until(pilot, lambda: card.status == "ok")
        assert "thinking…" not in card.render().plain
        # Its speed, once it has thought for half a second, counts from its first reasoning delta.
        card.apply(ReferenceStarted(0, "wire:ref-a"))
        card.apply(ReferenceProgress(0, "wire:ref-a", 64, 2.5, None, text="", thinking_seconds=0.5))
        await pilot.pause()
        rendered = card.render().plain
        assert "thinking…" in rendered and "32 tok/s" in rendered


def test_a_reply_with_its_thinking_folded(snap_compare, wire_config, llm_server, frozen_clock):
    llm_server.script("agg", Reply(text=ANSWER, reasoning=THOUGHT))

    async def run_before(pilot):
        await run_turn(pilot, "How do I reverse a list?")
        await settle(pilot)

    assert snap_compare(make_app(wire_config(), "wire"), terminal_size=SIZE, run_before=run_before)


async def test_an_aggregator_asked_again_after_thinking_shows_only_the_fresh_thought(home, wire_config, llm_server):
    from conftest import WIRE_CONFIG, write_config
    from moa_chat.config import load_config

    path = write_config(
        home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra="").replace("max_retries: 0", "max_retries: 1")
    )
    llm_server.script(
        "agg",
        [
            Reply(text=ANSWER, reasoning="A first attempt's thought.", drop_after=0),
            Reply(text=ANSWER, reasoning=THOUGHT),
        ],
    )
    app = make_app(load_config(path), "wire")
    async with app.run_test(size=SIZE) as pilot:
        await run_turn(pilot, "How do I reverse a list?")
        assert len(llm_server.requests_for("agg")) == 2
        block = app.query_one(ThinkingBlock)
        assert block.thought == THOUGHT


async def test_a_reply_built_again_after_the_log_folded_it_keeps_its_thought(wire_config, llm_server):
    llm_server.script("agg", Reply(text=ANSWER, reasoning=THOUGHT))
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=SIZE) as pilot:
        await run_turn(pilot, "How do I reverse a list?")
        recipe = app.query_one(AssistantReply).recipe()
        assert recipe is not None
        rebuilt = recipe()
        await app.chat.chat_log.mount(rebuilt)
        await pilot.pause()
        block = rebuilt.query_one(ThinkingBlock)
        assert block.thought == THOUGHT and not block.live and block.render().plain.startswith("▸ thought for ")
        children = list(rebuilt.children)
        assert children.index(block) < children.index(rebuilt.query_one(ReplyMarkdown))
