"""The visual design's behaviour: the sidebar by width, file names that stay text, a card's time to
first token, tool blocks that say what happened and what Enter will do, a header that fits, the welcome."""

from __future__ import annotations

import json

import pytest
from moa_chat.config import load_config
from moa_chat.engine import AggregatorFinished, AggregatorStarted, CallRecord, ReferenceFinished
from moa_chat.llm.usage import Usage
from moa_chat.providers.loopback_server import Reply
from moa_chat.session import ToolCallEvent, UsageLedger
from moa_chat.tui.app import stylesheet_paths
from moa_chat.tui.widgets.chat_log import ChatLog, UserPrompt, Welcome
from moa_chat.tui.widgets.header import StatusHeader
from moa_chat.tui.widgets.markdown import ReplyMarkdown, parser
from moa_chat.tui.widgets.reference_card import ReferenceCard
from moa_chat.tui.widgets.reply import AssistantReply
from moa_chat.tui.widgets.sidebar import ReferenceSidebar
from moa_chat.tui.widgets.tool_block import ToolBlock, ToolHeader
from textual.app import App, ComposeResult
from textual.selection import Selection
from tui_helpers import make_app, run_turn, settle


async def test_a_narrow_screen_hides_the_sidebar_and_f4_lays_it_over_the_log(home):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(60, 20)) as pilot:
        await settle(pilot)
        sidebar, log = app.query_one(ReferenceSidebar), app.query_one(ChatLog)
        assert app.screen.has_class("-narrow") and not sidebar.display
        width = log.region.width
        await pilot.press("f4")
        await settle(pilot)
        assert sidebar.display and sidebar.has_class("-open")
        # Over the log, not beside it: the log keeps its width and the sidebar covers its right edge.
        assert log.region.width == width
        assert sidebar.region.right == log.region.right and sidebar.region.width < width
        await pilot.press("f4")
        await settle(pilot)
        assert not sidebar.display


async def test_a_wide_screen_hides_and_shows_the_sidebar_in_place_and_each_width_keeps_its_choice(home):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        sidebar, log = app.query_one(ReferenceSidebar), app.query_one(ChatLog)
        assert app.screen.has_class("-wide") and sidebar.display
        beside = log.region.width
        await pilot.press("f4")
        await settle(pilot)
        assert not sidebar.display and log.region.width > beside  # the log takes the room back
        await pilot.resize_terminal(60, 20)
        await settle(pilot)
        assert not sidebar.display  # narrow: hidden by itself
        await pilot.press("f4")
        await settle(pilot)
        assert sidebar.display  # opened over the log
        await pilot.resize_terminal(120, 36)
        await settle(pilot)
        assert not sidebar.display  # back to wide: still hidden, as it was left there
        await pilot.press("f4")
        await settle(pilot)
        assert sidebar.display and log.region.width == beside


def test_file_names_are_not_links_but_written_links_are():
    tokens = parser().parseInline("See README.md, setup.py and docs/a.md; or https://example.com/x and <https://a.io>")
    hrefs = [t.attrs.get("href") for t in tokens[0].children or [] if t.type == "link_open"]
    assert hrefs == ["https://example.com/x", "https://a.io"]


def _click_actions(markdown: ReplyMarkdown) -> list[str]:
    return [
        str(style.meta["@click"])
        for y in range(markdown.size.height)
        for _, style, _ in markdown.render_line(y)
        if style is not None and "@click" in style.meta
    ]


async def test_a_reply_shows_file_names_as_text_and_code_in_a_named_frame(wire_config, llm_server):
    llm_server.script(
        "agg",
        Reply(
            text="Edit README.md or see https://example.com first.\n\n```python\nprint('hi')\n```\n\n```\nplain\n```"
        ),
    )
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(100, 36)) as pilot:
        await run_turn(pilot, "where?")
        await settle(pilot)
        reply = app.query_one(AssistantReply)
        markdown = reply.query_one(ReplyMarkdown)
        assert set(_click_actions(markdown)) == {"link('https://example.com')"}
        lines = [markdown.render_line(y).text for y in range(markdown.size.height)]
        tops = [line for line in lines if line.startswith("╭")]
        assert len(tops) == 2 and tops[0].startswith("╭─ python ─") and "plain" not in tops[1]
        assert tops[1].strip("╭─╮") == ""  # a bare block: a frame with no name
        # No blank line before the footer: the Markdown ends where its last block does.
        assert lines[-1].startswith("╰")


async def test_a_long_code_line_wraps_inside_its_frame_marked_and_copies_as_one_line(wire_config, llm_server):
    long_line = "x = [" + ", ".join(str(n) for n in range(60)) + "]"
    llm_server.script("agg", Reply(text=f"```python\n{long_line}\n```"))
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(100, 36)) as pilot:
        await run_turn(pilot, "a long line")
        await settle(pilot)
        markdown = app.query_one(ReplyMarkdown)
        lines = [markdown.render_line(y).text for y in range(markdown.size.height)]
        assert all(len(line) == markdown.size.width for line in lines)
        assert sum(line.startswith("│↪") for line in lines) >= 1  # the continued part says it continues
        assert all(line.rstrip().endswith("│") for line in lines[1:-1])  # nothing cut off at the frame
        copied, _ = markdown.get_selection(Selection(None, None))
        assert copied == long_line


class _CardApp(App[None]):
    def compose(self) -> ComposeResult:
        yield ReferenceCard("wire:agg", aggregator=True)
        yield ReferenceCard("wire:ref-a", index=0)


def _record(role: str, ttft: float, seconds: float) -> CallRecord:
    return CallRecord(
        role=role,
        label="wire:x",
        index=0,
        iteration=1,
        status="ok",
        seconds=seconds,
        first_token_seconds=ttft,
    )


def _shown(card: ReferenceCard) -> tuple[float, float]:
    facts = card.render().plain.splitlines()[1]
    elapsed = float(facts.split("done ")[1].split("s")[0])
    ttft = float(facts.split("ttft ")[1].split("s")[0])
    return elapsed, ttft


async def test_time_to_first_token_never_reads_more_than_the_elapsed_time(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr("moa_chat.engine.clock.monotonic", lambda: now[0])
    app = _CardApp()
    async with app.run_test(size=(60, 10)) as pilot:
        aggregator, reference = list(app.query(ReferenceCard))
        # The UI hears of the aggregator late: its own clock says 0.2s, the engine's first token 0.9s.
        aggregator.apply(AggregatorStarted("wire:agg", 1, 1, 1))
        now[0] += 0.2
        aggregator.apply(AggregatorFinished(_record("aggregator", 0.9, 0.9)))
        reference.apply(ReferenceFinished(_record("reference", 1.26, 1.24), text="ok"))
        await pilot.pause()
        for card in (aggregator, reference):
            elapsed, ttft = _shown(card)
            assert ttft <= elapsed, card.render().plain
            assert card.first_token_seconds is not None and card.seconds is not None
            assert card.first_token_seconds <= card.seconds  # the reference detail screen reads these


async def test_a_tool_block_says_its_status_first_and_enter_says_what_it_will_do(home, tmp_path, monkeypatch):
    (tmp_path / "README.md").write_text("# Sample\n")
    monkeypatch.chdir(tmp_path)
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(100, 36)) as pilot:
        await run_turn(pilot, "What does README.md in this folder say?")
        header = app.query(ToolHeader).last()
        assert header.render().plain.startswith("▸ ✓ done")
        header.focus()
        await pilot.pause()

        def enter_does() -> str:
            return app.screen.active_bindings["enter"].binding.description

        assert enter_does() == "Expand tool"
        await pilot.press("enter")
        assert app.query(ToolBlock).last().expanded and enter_does() == "Collapse tool"
        await pilot.press("enter")
        assert not app.query(ToolBlock).last().expanded and enter_does() == "Expand tool"


class _BlockApp(App[None]):
    CSS_PATH = stylesheet_paths()

    def compose(self) -> ComposeResult:
        arguments = json.dumps({"path": "notes/" + "a-very-long-file-name-" * 6 + ".md", "content": "x" * 300})
        yield ToolBlock(ToolCallEvent("c1", "write_file", arguments, "denied", "denied by the user"))


async def test_a_denied_call_says_denied_even_when_its_arguments_are_long():
    app = _BlockApp()
    async with app.run_test(size=(50, 6)) as pilot:
        await pilot.pause()
        header = app.query_one(ToolHeader)
        assert header.render().plain.startswith("▸ ⊘ denied")
        # What shows on the one line: the status survives the ellipsis.
        line = "".join(segment.text for segment in header.render_line(0))
        assert "⊘ denied" in line and line.rstrip().endswith("…")


@pytest.mark.parametrize("width", [60, 80, 120])
async def test_the_header_never_runs_its_parts_together(home, width):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(width, 20)) as pilot:
        await settle(pilot)
        header = app.query_one(StatusHeader)
        text = header.render().plain
        assert len(text) <= header.content_size.width
        assert text.rstrip().endswith("0 tokens") and "demo" in text
        left = text[: text.rindex("0 tokens")]
        assert left.endswith("  "), text  # a gap before the total, never an overlap
        assert ("moa-chat" in text) == (width >= 80)


async def test_a_preset_without_its_key_says_so_in_the_header_and_on_its_cards(home):
    app = make_app(load_config(), "frontier")
    async with app.run_test(size=(60, 20)) as pilot:
        await settle(pilot)
        header = app.query_one(StatusHeader).render().plain
        assert "⚠" in header and "OPENROUTER_API_KEY" in header
        cards = app.query_one(ReferenceSidebar).cards()
        assert all("needs OPENROUTER_API_KEY" in card.render().plain for card in cards)


async def test_the_welcome_fills_the_empty_log_and_names_the_preset_its_models_and_keys(home):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        welcome = app.query_one(Welcome)
        text = welcome.render().plain
        preset = app.session.preset
        assert preset.name in text and preset.aggregator.label in text
        assert all(slot.label in text for slot in preset.references)
        assert "F2 presets" in text and "F4 sidebar" in text and "F1 help" in text
        # Not pinned to the bottom: it takes the log's height and its text sits in the middle.
        log = app.query_one(ChatLog)
        assert welcome.region.height >= log.region.height - 2 and welcome.styles.content_align_vertical == "middle"


async def test_the_user_and_the_aggregator_are_named(wire_config, llm_server):
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        await run_turn(pilot, "hello")
        message = app.query_one(UserPrompt)
        assert message.border_title == "You" and message.render().plain == "hello"
        header = app.query_one(AssistantReply).query_one(".reply-header")
        assert header.render().plain == "◆ wire:agg"


async def test_counts_of_one_are_singular(wire_config, llm_server):
    config = wire_config()
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        reply = AssistantReply("wire", "wire:agg", 1)
        await app.query_one(ChatLog).mount(reply)
        assert "consulting 1 reference…" in reply.query_one(".reply-header").render().plain
        header = app.query_one(StatusHeader)
        header.show(ledger=UsageLedger([CallRecord("aggregator", "wire:agg", 0, 1, "ok", Usage(0, 1, 1))]))
        assert header.render().plain.rstrip().endswith("1 token")
