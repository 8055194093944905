"""The strategies in the TUI: live previews and speed on running cards, what calls cost (cards and header), the
side-by-side screen of a turn's answers, and a turn's trace.

Snapshots are deterministic (see test_tui_snapshots.py): a frozen clock, no animations, scripted servers.
Update only after looking at each changed SVG: `pytest tests/test_tui_strategies.py --snapshot-update`.
"""

from __future__ import annotations

import pytest
from loop_helpers import tool_loop
from moa_chat.config import load_config
from moa_chat.engine import ReferenceFinished, ReferenceProgress, ReferenceStarted
from moa_chat.engine.events import CallRecord
from moa_chat.llm.usage import Usage
from moa_chat.providers.loopback_server import Reply
from moa_chat.store import SessionStore, StoredTurn
from moa_chat.tui.screens.side_by_side import SideBySide, fits_columns
from moa_chat.tui.screens.trace import TraceScreen, calls_for_turn, load_turn_trace
from moa_chat.tui.widgets.header import StatusHeader
from moa_chat.tui.widgets.markdown import ReplyMarkdown
from moa_chat.tui.widgets.reference_card import ReferenceCard
from moa_chat.tui.widgets.reply import PanelAnswer
from moa_chat.tui.widgets.sidebar import ReferenceSidebar
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static, TabbedContent
from tui_helpers import make_app, run_turn, send, settle, stored_session, wait_until

SIZE = (120, 40)
QUESTION = [{"role": "user", "content": "How do I reverse a list in Python?"}]

PRICING = """
pricing:
  wire:ref-a: {input: 1.0, output: 2.0}
  wire:ref-b: {input: 2.0, output: 4.0}
  wire:agg: {input: 3.0, output: 15.0}
"""


def priced_config(wire_config):
    config = wire_config()
    config.path.write_text(config.path.read_text() + PRICING.lstrip(), encoding="utf-8")
    return load_config(config.path)


def traced_config(wire_config, extra: str = ""):
    config = wire_config()
    config.path.write_text(config.path.read_text() + "save_traces: true\n" + extra, encoding="utf-8")
    return load_config(config.path)


def stored_app(config, home):
    """Traces are kept beside saved sessions only."""
    return make_app(config, "wire", session=stored_session(config, SessionStore(home / "sessions.db")))


# --------------------------------------------------------------------------- live references


def test_progress_events_carry_the_text_so_far(wire_config, llm_server):
    config = wire_config()
    first = "a" * 300
    llm_server.script("ref-a", Reply(text=first + "bcd", pieces=[first, "b", "c", "d"], piece_delay=0.3))
    events: list = []
    tool_loop(config, observer=events.append).run(QUESTION)
    progress = [e for e in events if isinstance(e, ReferenceProgress) and e.index == 0]
    # More than PROGRESS_INTERVAL between pieces: each one is reported, and the text only grows.
    assert [e.text for e in progress] == [first, first + "b", first + "bc", first + "bcd"]


def cost_shown(card: ReferenceCard) -> str | None:
    """The cost a card shows at the end of its name's line (None: it shows none)."""
    last = card.render().plain.splitlines()[0].split()[-1]
    return last if last.startswith("$") else None


def _progress(text: str, *, chunks: int, seconds: float, ttft: float | None) -> ReferenceProgress:
    return ReferenceProgress(0, "wire:ref-a", chunks, seconds, ttft, text=text)


async def test_a_running_card_shows_its_last_line_and_speed_then_its_answer(wire_config):
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=SIZE) as pilot:
        card = app.query_one(ReferenceSidebar).card(0)
        assert card is not None
        seen: list[str] = []
        # What a detail view of the card does to follow its text.
        app.screen.watch(card, "text", lambda text: seen.append(text), init=False)
        card.reset("queued")
        card.apply(ReferenceStarted(0, "wire:ref-a"))
        await pilot.pause()
        height = card.size.height
        text = "Use reversed().\n\nIt walks the list backwards\twithout copying \x1b[31mit"
        card.apply(_progress(text, chunks=60, seconds=2.5, ttft=0.5))
        await pilot.pause()
        lines = card.render().plain.splitlines()
        assert "~60 tok · 30 tok/s" in lines[1]
        # One line, whitespace folded, the start cut off to fit, control characters made harmless.
        preview = lines[-1]
        assert preview.startswith("  …") and preview.endswith("without copying ␛[31mit")
        assert len(preview) <= card.content_size.width
        assert card.size.height == height + 1  # laid out again for the new line
        assert card.text == text and seen == [text]

        card.apply(_progress(text + " twice", chunks=61, seconds=2.6, ttft=0.5))
        await pilot.pause()
        assert seen[-1] == text + " twice"

        record = CallRecord("reference", "wire:ref-a", 0, 1, "ok", Usage(10, 70, 80), seconds=3.0, cost=0.0123)
        card.apply(ReferenceFinished(record, "The whole answer."))
        await pilot.pause()
        lines = card.render().plain.splitlines()
        assert lines[0].startswith("✓ wire:ref-a ") and lines[0].endswith(" $0.012")  # the cost, on the right
        assert len(lines[0]) == card.content_size.width
        assert lines[1:] == ["  done 3.0s · 70 tok"]  # no speed and no preview once it is done
        assert card.text == "The whole answer." and seen[-1] == "The whole answer."
        assert card.size.height == height
        card.styles.width = 14 + card.styles.gutter.width  # a sidebar with 14 columns for the card's text
        await pilot.pause()
        narrow = card.render().plain.splitlines()  # no room beside the name: the cost joins the facts
        assert "$" not in narrow[0] and any(line.strip() == "$0.012" for line in narrow[1:])


async def test_the_speed_waits_for_half_a_second_of_writing(wire_config):
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=SIZE) as pilot:
        card = app.query_one(ReferenceSidebar).card(0)
        assert card is not None
        card.apply(ReferenceStarted(0, "wire:ref-a"))
        card.apply(_progress("Hi", chunks=3, seconds=0.7, ttft=0.5))
        await pilot.pause()
        assert "tok/s" not in card.render().plain


def test_live_previews_mid_run(snap_compare, wire_config, llm_server, frozen_clock):
    llm_server.script(
        "ref-a",
        Reply(
            text="Reverse it in place with items.reverse(), which returns None, and more",
            pieces=["Reverse it in place with items.reverse(), which returns None", ", and more"],
            pause_after=1,
            pause=30,
        ),
    )
    llm_server.script(
        "ref-b",
        Reply(
            text="Two ways:\n\n- slicing: items[::-1] gives a new list\n- then",
            pieces=["Two ways:\n\n- slicing: items[::-1] gives a new list", "\n- then"],
            pause_after=1,
            pause=30,
        ),
    )
    llm_server.script("ref-c", Reply(text="reversed(items) is lazy."))

    async def run_before(pilot):
        await send(pilot, "How do I reverse a list in Python?")
        sidebar = pilot.app.query_one(ReferenceSidebar)
        cards = sidebar.cards()
        await wait_until(
            pilot,
            lambda: bool(cards[0].tail and cards[1].tail) and cards[2].status == "ok",
            describe=lambda: repr([(c.status, c.tail) for c in cards]),
        )
        # The frozen clock reads every duration as 0, so no speed shows: give the first card one that has
        # been writing for two seconds.
        text = cards[0].text
        cards[0].apply(_progress(text, chunks=64, seconds=2.5, ttft=0.5))
        await settle(pilot)

    assert snap_compare(make_app(wire_config(), "wire"), terminal_size=SIZE, run_before=run_before)


# --------------------------------------------------------------------------- layers


def test_a_two_layer_sidebar(snap_compare, wire_config, llm_server, frozen_clock):
    async def run_before(pilot):
        await run_turn(pilot, "How do I reverse a list in Python?")
        await settle(pilot)

    assert snap_compare(make_app(wire_config("layers: 2"), "wire"), terminal_size=(120, 44), run_before=run_before)


# --------------------------------------------------------------------------- cost


def _script_usage(llm_server) -> None:
    llm_server.script("ref-a", Reply(text="alpha", usage={"prompt_tokens": 1000, "completion_tokens": 500}))
    llm_server.script("ref-b", Reply(text="beta", usage={"prompt_tokens": 2000, "completion_tokens": 1000}))
    llm_server.script("ref-c", Reply(text="gamma", usage={"prompt_tokens": 1000, "completion_tokens": 100}))
    llm_server.script("agg", Reply(text="The answer.", usage={"prompt_tokens": 3000, "completion_tokens": 1000}))


async def test_costs_on_the_cards_and_a_lower_bound_in_the_header(wire_config, llm_server):
    _script_usage(llm_server)
    app = make_app(priced_config(wire_config), "wire")
    async with app.run_test(size=SIZE) as pilot:
        header = app.query_one(StatusHeader)
        assert header.cost_text() is None  # nothing spent yet
        await run_turn(pilot, "hello")
        cards = app.query_one(ReferenceSidebar).cards()
        assert [cost_shown(c) for c in cards] == ["$0.0020", "$0.0080", None]  # ref-c has no price
        aggregator = app.query_one(ReferenceSidebar).aggregator_card
        assert cost_shown(aggregator) == "$0.024"
        # ref-c used tokens at no known price: the session's sum is a lower bound.
        assert header.cost_text() == "$0.034+"
        assert "$0.034+" in header.render().plain
        await run_turn(pilot, "again")
        assert header.cost_text() == "$0.068+"


async def test_free_and_unpriced_calls_show_no_cost(wire_config, llm_server):
    app = make_app(wire_config(), "wire")  # no pricing: nothing is known
    async with app.run_test(size=SIZE) as pilot:
        await run_turn(pilot, "hello")
        header = app.query_one(StatusHeader)
        assert header.cost is None and header.cost_text() is None
        assert "$" not in header.render().plain
        assert all(cost_shown(c) is None for c in app.query_one(ReferenceSidebar).cards())


def test_cost_display(snap_compare, wire_config, llm_server, frozen_clock):
    _script_usage(llm_server)

    async def run_before(pilot):
        await run_turn(pilot, "How do I reverse a list in Python?")
        await settle(pilot)

    assert snap_compare(make_app(priced_config(wire_config), "wire"), terminal_size=SIZE, run_before=run_before)


# --------------------------------------------------------------------------- side by side

LONG = "## Use `reversed()`\n\n" + "\n\n".join(
    f"Point {n}: `reversed()` walks the list backwards without copying it." for n in range(1, 13)
)
LIST = "Slicing makes a **copy**:\n\n" + "\n".join(
    f"- step {n}: `items[::-1]` is fine for small lists" for n in range(30)
)
CODE = "In place:\n\n```python\nitems.reverse()  # returns None\n```\n\nShort and sweet."
ANSWERS = (
    PanelAnswer("wire:ref-a", "ok", LONG, None),
    PanelAnswer("wire:ref-b", "ok", LIST, None),
    PanelAnswer("wire:ref-c", "failed", "", "HTTP 500: upstream exploded"),
)


def test_columns_need_forty_cells_each():
    assert fits_columns(3, 126) and not fits_columns(3, 125)
    assert fits_columns(1, 44) and not fits_columns(0, 200)


async def _show_side_by_side(pilot, answers=ANSWERS) -> SideBySide:
    screen = SideBySide(answers, "wire:agg")
    pilot.app.push_screen(screen)

    # Wait until every answer's Markdown is there and the ones shown are laid out (a tab not chosen is not), then
    # for the screen to settle.
    def rendered() -> bool:
        markdowns = list(screen.query(ReplyMarkdown))
        return len(markdowns) == len(answers) and any(m.size.height for m in markdowns)

    await wait_until(pilot, rendered)
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    return screen


def _push_side_by_side(answers=ANSWERS):
    async def run_before(pilot):
        await settle(pilot)
        await _show_side_by_side(pilot, answers)

    return run_before


def test_side_by_side_columns(snap_compare, home):
    answers = (*ANSWERS[:2], PanelAnswer("wire:ref-c", "ok", CODE, None))
    app = make_app(load_config(), "demo")
    assert snap_compare(app, terminal_size=(130, 30), run_before=_push_side_by_side(answers))


def test_side_by_side_tabs_on_a_narrow_terminal(snap_compare, home):
    assert snap_compare(make_app(load_config(), "demo"), terminal_size=(100, 30), run_before=_push_side_by_side())


async def test_side_by_side_columns_scroll_together_and_become_tabs_when_narrow(home):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(130, 30)) as pilot:
        screen = await _show_side_by_side(pilot)
        assert screen.columns
        first, second, third = screen.query(".sbs-scroll").results(VerticalScroll)
        await wait_until(pilot, lambda: first.max_scroll_y > 0 and second.max_scroll_y > 0)
        assert first.has_focus
        second.scroll_to(y=second.max_scroll_y / 2, animate=False, immediate=True)
        # The others follow through messages: a frame or more later on a loaded machine.
        await wait_until(pilot, lambda: first.scroll_y == pytest.approx(first.max_scroll_y / 2, abs=1))
        await pilot.press("end")  # keys scroll the focused column; the others follow to their own end
        await wait_until(pilot, lambda: first.scroll_y == first.max_scroll_y and second.scroll_y == second.max_scroll_y)
        assert third.max_scroll_y == 0
        await pilot.press("right")
        assert second.has_focus
        await pilot.press("left", "left")
        assert third.has_focus

        await pilot.resize_terminal(100, 30)
        await wait_until(pilot, lambda: bool(screen.query(TabbedContent)))
        assert not screen.columns
        tabs = screen.query_one(TabbedContent)
        await wait_until(pilot, lambda: tabs.active == "sbs-answer-1")  # set once the tabs are mounted
        await pilot.press("right")
        await wait_until(pilot, lambda: tabs.active == "sbs-answer-2")
        assert screen.focused is not None and screen.focused in tabs.active_pane.query(VerticalScroll)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is not screen


# --------------------------------------------------------------------------- traces


def _turn(turn_id: int, started: float) -> StoredTurn:
    return StoredTurn(turn_id, "s", None, "ask", "wire", {}, "ok", None, started, 1.0)


def test_trace_entries_go_to_the_turn_that_had_started_when_they_were_written():
    turns = [_turn(1, 100.0), _turn(2, 200.0)]
    entries = [
        {"time": 99.0, "label": "before any turn"},
        {"time": 100.0, "label": "a"},  # rounded to the millisecond: may read a hair before its start
        {"time": 150.0, "label": "b"},
        {"time": 199.9995, "label": "c"},
        {"time": 250.0, "label": "d"},
        {"time": 120.0, "turn": 2, "label": "named"},  # a turn the core names wins over the time
    ]
    assert [e["label"] for e in calls_for_turn(entries, turns, 1)] == ["a", "b"]
    assert [e["label"] for e in calls_for_turn(entries, turns, 2)] == ["c", "d", "named"]


async def _open_trace(pilot, app, **kwargs) -> TraceScreen:
    session = app.session
    screen = TraceScreen(session.store, session.id, traces_on=session.config.save_traces, **kwargs)
    app.push_screen(screen)
    await wait_until(pilot, lambda: screen.trace is not None)
    await pilot.pause()
    return screen


async def test_the_trace_screen_lists_a_turns_calls_and_shows_each_request_and_answer(home, wire_config, llm_server):
    llm_server.script("agg", [Reply(text="The first answer."), Reply(text="The second answer.")])
    app = stored_app(traced_config(wire_config), home)
    async with app.run_test(size=SIZE) as pilot:
        await run_turn(pilot, "first question")
        await run_turn(pilot, "second question")
        screen = await _open_trace(pilot, app)  # the last turn
        table = screen.query_one(DataTable)
        rows = [table.get_row_at(n) for n in range(table.row_count)]
        assert [(r[1], r[2], r[4]) for r in rows] == [
            ("reference", "wire:ref-a", "done"),
            ("reference", "wire:ref-b", "done"),
            ("reference", "wire:ref-c", "done"),
            ("aggregator", "wire:agg", "done"),
        ]
        text = str(screen.query_one("#trace-text", Static).render())
        assert "second question" in text and "ok from ref-a" in text and "first question" in text  # the history
        await pilot.press("down", "down", "down")  # the table has the focus: to the aggregator's call
        await pilot.pause()
        text = str(screen.query_one("#trace-text", Static).render())
        assert "The second answer." in text and "── user" in text
        await pilot.press("escape")
        await pilot.pause()

        first_turn = app.session.store.turns(app.session.id)[0]
        screen = await _open_trace(pilot, app, turn_id=first_turn.id)
        assert screen.trace is not None and len(screen.trace.calls) == 4
        table = screen.query_one(DataTable)
        table.move_cursor(row=3)
        await pilot.pause()
        text = str(screen.query_one("#trace-text", Static).render())
        assert "The first answer." in text and "second question" not in text


async def test_the_trace_screen_says_how_to_turn_traces_on(home, wire_config, llm_server):
    app = stored_app(wire_config(), home)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_trace(pilot, app)
        assert "no turn" in str(screen.query_one("#trace-empty", Static).render()).lower()
        await pilot.press("escape")
        await run_turn(pilot, "hello")
        screen = await _open_trace(pilot, app)
        message = str(screen.query_one("#trace-empty", Static).render())
        assert "Traces are off" in message and "save_traces: true" in message
        assert not screen.query_one(DataTable).display


def test_trace_screen(snap_compare, home, wire_config, llm_server, frozen_clock):
    _script_usage(llm_server)

    async def run_before(pilot):
        await run_turn(pilot, "How do I reverse a list in Python?")
        await _open_trace(pilot, pilot.app)
        await settle(pilot)

    app = stored_app(traced_config(wire_config, PRICING.lstrip()), home)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_an_unsaved_conversation_has_no_trace():
    trace = load_turn_trace(None, "abc", None, traces_on=True)
    assert trace.calls == [] and "not being saved" in (trace.empty or "")
