"""Every reply, at any length, streamed or loaded, can be selected with the mouse and copied: a drag
across a long reply's blocks selects what the screen shows, and the copied text is the reply's text as written
(wrapped lines joined again; frames, bars and indents left out)."""

from __future__ import annotations

import pytest
from moa_chat.providers.loopback_server import Reply
from moa_chat.tui.widgets.chat_log import ChatLog
from moa_chat.tui.widgets.markdown import ReplyMarkdown
from moa_chat.tui.widgets.reply import AssistantReply
from test_stream_render import LogApp
from textual.selection import Selection
from tui_helpers import make_app, run_turn, settle


def section(number: int) -> str:
    return (
        f"## Section {number}\n\n"
        f"Paragraph {number} opens with alpha{number} and goes on long enough to wrap across the reply's width "
        f"before it ends with omega{number}.\n\n"
        f"- point{number} first\n- point{number} second\n\n"
        f"> quote{number} from someone wise\n\n"
        f"| rate | cell{number} |\n| --- | --- |\n| 200 | value{number} |\n\n"
        f"```python\ndef handler{number}(event):\n    return event\n```\n\n"
    )


def long_reply(tokens: int) -> str:
    """A reply of about `tokens` words, block-heavy as long answers are."""
    text, number = "", 0
    while len(text.split()) < tokens:
        number += 1
        text += section(number)
    return text


def line_of(markdown: ReplyMarkdown, word: str) -> tuple[int, int]:
    """The line of `markdown` that shows `word`, and the cell it starts at."""
    for y in range(markdown.size.height):
        text = markdown.render_line(y).text
        if word in text:
            return y, text.index(word)
    raise AssertionError(f"{word!r} is not shown")


async def drag(pilot, markdown: ReplyMarkdown, start: str, end: str) -> str | None:
    """Scroll `start` into view, drag from its first cell to just past `end`, and return the selected text."""
    app = pilot.app
    log = app.query_one(ChatLog)
    first, x1 = line_of(markdown, start)
    last, x2 = line_of(markdown, end)
    log.scroll_to(y=markdown.virtual_region.y + first - 2, animate=False, immediate=True)
    await pilot.pause()
    top = markdown.region.y
    assert log.region.y <= top + first and top + last < log.region.bottom, "the drag should be all on screen"
    left = markdown.region.x
    await pilot.mouse_down(app.screen, offset=(left + x1, top + first))
    await pilot.hover(app.screen, offset=(left + (x1 + x2) // 2, top + (first + last) // 2))
    await pilot.hover(app.screen, offset=(left + x2 + len(end), top + last))
    await pilot.mouse_up(app.screen, offset=(left + x2 + len(end), top + last))
    await pilot.pause()
    return app.screen.get_selected_text()


@pytest.mark.parametrize("run", range(3))
async def test_a_drag_across_a_long_streamed_reply_copies_the_text_of_every_block_it_crosses(
    run, wire_config, llm_server
):
    text = long_reply(4_000)
    llm_server.script("agg", Reply(text=text))
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(100, 60)) as pilot:
        await run_turn(pilot, "a long one")
        await settle(pilot)
        markdown = app.query_one(AssistantReply).query_one(ReplyMarkdown)
        assert markdown.source == text
        middle = 40 + run * 7  # a section deep in the reply
        selected = await drag(pilot, markdown, f"alpha{middle}", f"point{middle + 1}")
    assert selected is not None
    # It starts where the drag did; the paragraph's wrapped lines come back as one line, with the spaces the wrap
    # took, and the list under it on lines of its own.
    assert selected.startswith(
        f"alpha{middle} and goes on long enough to wrap across the reply's width before it ends with omega{middle}."
        f"\n\n• point{middle} first\n"
    )
    for shown in (
        f"point{middle} first",
        f"quote{middle} from someone wise",
        f"cell{middle}",
        f"value{middle}",
        f"def handler{middle}(event):",
        "    return event",
        f"Section {middle + 1}",
        f"point{middle + 1}",
    ):
        assert shown in selected, shown
    # Decoration is not copied: a code block's frame, a quote's bar (a table keeps its column lines).
    assert "╭" not in selected and "▌" not in selected
    assert not any(line.startswith("│") for line in selected.splitlines())
    assert selected.index(f"point{middle}") < selected.index(f"Section {middle + 1}")


async def test_a_reply_loaded_whole_is_selectable_too_and_a_paragraph_copies_as_written():
    app = LogApp()
    paragraph = "words that wrap " * 30
    async with app.run_test(size=(60, 40)) as pilot:
        reply = AssistantReply("preset", "wire:agg", 1)
        await app.query_one(ChatLog).mount(reply)
        await reply.mount(ReplyMarkdown(f"# Title\n\n{paragraph.strip()}\n\n- one\n- two\n", classes="reply-markdown"))
        await pilot.pause()
        markdown = reply.query_one(ReplyMarkdown)
        assert markdown.size.height > 6  # the paragraph wraps
        everything, _ = markdown.get_selection(Selection(None, None))
        assert everything == f"Title\n\n{paragraph.strip()}\n\n• one\n• two"
        selected = await drag(pilot, markdown, "Title", "two")
    assert selected == everything


async def test_a_drag_that_ends_past_a_lines_text_selects_to_its_end():
    # Past the text (the padding, a code block's right-hand frame) the line's cells carry no offsets of their
    # own: Textual reads the end of the text there.
    app = LogApp()
    async with app.run_test(size=(60, 30)) as pilot:
        reply = AssistantReply("preset", "wire:agg", 1)
        await app.query_one(ChatLog).mount(reply)
        await reply.mount(
            ReplyMarkdown("# Title\n\nshort line\n\n```python\ncode here\n```\n", classes="reply-markdown")
        )
        await pilot.pause()
        markdown = reply.query_one(ReplyMarkdown)
        left, top = markdown.region.x, markdown.region.y
        title, x = line_of(markdown, "Title")
        short, _ = line_of(markdown, "short line")
        code, _ = line_of(markdown, "code here")
        for row, cell, expected in (
            (short, 40, "Title\n\nshort line"),  # the padding after the text
            (code, markdown.region.width - 1, "Title\n\nshort line\n\ncode here"),  # the frame's right edge
        ):
            assert markdown.render_line(row).text[cell] in " │"
            await pilot.mouse_down(app.screen, offset=(left + x, top + title))
            await pilot.hover(app.screen, offset=(left + cell, top + row))
            await pilot.mouse_up(app.screen, offset=(left + cell, top + row))
            await pilot.pause()
            assert app.screen.get_selected_text() == expected
