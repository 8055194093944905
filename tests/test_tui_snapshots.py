"""Snapshots of the TUI (pytest-textual-snapshot). Deterministic: fixed sizes, no animations, no cursor
blink, a frozen clock (every duration reads 0.0s), the demo provider or the loopback test server.

Update only after looking at each changed SVG: `pytest tests/test_tui_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import pytest
from moa_chat.config import load_config
from moa_chat.providers.loopback_server import Reply
from moa_chat.tui.widgets.reply import AssistantReply
from moa_chat.tui.widgets.sidebar import ReferenceSidebar
from tui_helpers import make_app, run_turn, send, settle, wait_until

SIZE = (110, 32)


@pytest.fixture(autouse=True)
def _frozen(frozen_clock):
    return frozen_clock


def test_empty_app(snap_compare, home):
    config = load_config()
    assert snap_compare(make_app(config, "demo"), terminal_size=SIZE, run_before=settle)


def test_finished_turn_with_a_code_block(snap_compare, home):
    async def run_before(pilot):
        await run_turn(pilot, "How do I make a Python script faster?")
        await settle(pilot)

    config = load_config()
    assert snap_compare(make_app(config, "demo"), terminal_size=(110, 44), run_before=run_before)


def test_mid_fanout(snap_compare, wire_config, llm_server):
    llm_server.script("ref-a", Reply(text="A quick, useful answer."))
    llm_server.script("ref-b", Reply(status=500, error="upstream exploded"))
    llm_server.script("ref-c", Reply(text="slow", delay=30))

    async def run_before(pilot):
        await send(pilot, "Compare SQLite and Postgres for a chat app")
        sidebar = pilot.app.query_one(ReferenceSidebar)
        await wait_until(pilot, lambda: [c.status for c in sidebar.cards()] == ["ok", "failed", "running"])
        await settle(pilot)

    assert snap_compare(make_app(wire_config(), "wire"), terminal_size=SIZE, run_before=run_before)


def test_preset_picker(snap_compare, home):
    config = load_config()
    assert snap_compare(make_app(config, "demo"), terminal_size=SIZE, press=["f2"], run_before=settle)


def test_reference_full_answer_screen(snap_compare, home):
    async def run_before(pilot):
        await run_turn(pilot, "What is a good way to structure a CLI tool?")
        pilot.app.query_one(ReferenceSidebar).card(1).focus()
        await pilot.press("enter")
        await settle(pilot)

    assert snap_compare(make_app(load_config(), "demo"), terminal_size=SIZE, run_before=run_before)


def test_aggregator_error_in_the_log(snap_compare, wire_config, llm_server):
    llm_server.script("agg", Reply(status=401, error="Incorrect API key provided: sk-...abcd"))

    async def run_before(pilot):
        await run_turn(pilot, "Hello?")
        await settle(pilot)

    assert snap_compare(make_app(wire_config(), "wire"), terminal_size=SIZE, run_before=run_before)


def test_cancelled_reply(snap_compare, wire_config, llm_server):
    llm_server.script("agg", Reply(text="Here is the first part of a long answer, and then", pause_after=7, pause=30))

    async def run_before(pilot):
        app = pilot.app
        await send(pilot, "Tell me everything")
        await wait_until(
            pilot,
            lambda: (
                bool(app.query(AssistantReply)) and app.query_one(AssistantReply).text == "Here is the first part of a"
            ),
            describe=lambda: repr(app.query(AssistantReply) and app.query_one(AssistantReply).text),
        )
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.query_one(AssistantReply).finished)
        await settle(pilot)

    assert snap_compare(make_app(wire_config(), "wire"), terminal_size=SIZE, run_before=run_before)


def test_small_terminal_with_the_sidebar_hidden(snap_compare, home):
    # Below 90 columns the sidebar hides by itself.
    async def run_before(pilot):
        await run_turn(pilot, "Explain recursion briefly")
        await settle(pilot)

    assert snap_compare(make_app(load_config(), "demo"), terminal_size=(80, 24), run_before=run_before)


NARROW, WIDE = (60, 20), (220, 50)


def test_narrow_empty_app(snap_compare, home):
    # The header gives up its parts by priority instead of running them into each other.
    assert snap_compare(make_app(load_config(), "demo"), terminal_size=NARROW, run_before=settle)


def test_narrow_sidebar_opens_over_the_log(snap_compare, home):
    async def run_before(pilot):
        await run_turn(pilot, "Explain recursion briefly")
        await pilot.press("f4")
        await settle(pilot)

    assert snap_compare(make_app(load_config(), "demo"), terminal_size=NARROW, run_before=run_before)


def test_wide_terminal_keeps_a_reading_width(snap_compare, home):
    async def run_before(pilot):
        await run_turn(pilot, "How do I make a Python script faster?")
        await settle(pilot)

    assert snap_compare(make_app(load_config(), "demo"), terminal_size=WIDE, run_before=run_before)


LONG_LINE_REPLY = (
    "Run it with every option spelled out, and keep `README.md` beside it:\n\n"
    "```bash\n"
    "moa-chat --preset frontier --theme textual-dark --no-store --reference-timeout 90 "
    "--max-iterations 8 --system-prompt 'answer in one paragraph'\n"
    "echo done\n"
    "```\n\n"
    "The long line scrolls inside its frame."
)


def test_a_long_code_line_scrolls_inside_its_frame(snap_compare, wire_config, llm_server):
    llm_server.script("agg", Reply(text=LONG_LINE_REPLY))

    async def run_before(pilot):
        await run_turn(pilot, "How do I run it with every option?")
        await settle(pilot)

    assert snap_compare(make_app(wire_config(), "wire"), terminal_size=SIZE, run_before=run_before)


def test_a_preset_without_its_key(snap_compare, home):
    # No OPENROUTER_API_KEY (the hermetic env unsets it): the header, the cards and the log all say so.
    assert snap_compare(make_app(load_config(), "frontier"), terminal_size=SIZE, run_before=settle)
