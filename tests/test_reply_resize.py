"""A reply's Markdown at a new width: each block is drawn again when it is shown, the rest a little at a time,
and once settled the reply shows exactly what a reply drawn at that width from the start shows."""

from __future__ import annotations

from moa_chat.tui.drawing.markdown_blocks import Look
from moa_chat.tui.drawing.reply_document import Document
from moa_chat.tui.widgets.chat_log import ChatLog
from test_stream_render import CORPUS, LogApp, render, reply_markdown, shown
from textual.style import Style
from tui_helpers import wait_until

LOOK = Look((Style(bold=True),) * 6, *(Style(),) * 8)  # type: ignore[arg-type]
TEXT = CORPUS * 4


def drawn(document: Document) -> int:
    """How many finished blocks are drawn at the current width."""
    return sum(block.exact for block in document._blocks)


def test_a_new_width_draws_only_the_blocks_asked_for_and_settles_to_the_lines_of_that_width():
    fresh = Document(TEXT)
    fresh.ensure(48, LOOK, "look")
    document = Document(TEXT)
    document.ensure(100, LOOK, "look")
    blocks = drawn(document)
    assert blocks > 40

    document.ensure(48, LOOK, "look")
    assert drawn(document) == 0
    assert document.height < fresh.height  # the heights at 100 cells stand in until the blocks are drawn

    assert document.line(2) == fresh.line(2)  # drawn when asked for: the paragraph under the heading only
    assert drawn(document) == 1
    assert document.corrected == 4  # it wraps to more lines than its two at 100 cells: those below moved

    while document.settle(1.0):
        pass
    assert drawn(document) == blocks
    assert document.height == fresh.height
    assert document.all_lines() == fresh.all_lines()
    assert [document.line(y) for y in range(fresh.height)] == fresh.all_lines()


def test_a_new_look_keeps_every_height():
    document = Document(TEXT)
    document.ensure(80, LOOK, "dark")
    height = document.height
    document.ensure(80, LOOK, "light")
    assert drawn(document) == 0 and document.height == height
    document.line(height - 1)
    assert document.corrected is None


async def test_a_resized_reply_shows_what_a_reply_drawn_at_that_width_shows():
    app = LogApp()
    async with app.run_test(size=(100, 50)) as pilot:
        markdown = await reply_markdown(app, pilot, TEXT)
        await pilot.resize_terminal(64, 50)
        await wait_until(pilot, lambda: markdown.size.width < 64 and not markdown.settling, describe="settled")
        await pilot.pause()
        await pilot.pause()
        assert markdown.size.height == markdown.document.height
        got = shown(markdown)
    want = await render(TEXT, pieces=None, size=(64, 50))
    assert len(got) == len(want)
    for number, (line, expected) in enumerate(zip(got, want, strict=True)):
        assert line == expected, f"line {number}"


async def test_a_view_scrolled_into_a_reply_keeps_its_top_line_while_the_blocks_above_it_settle():
    from test_reply_selection import line_of, long_reply

    app = LogApp()
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.query_one(ChatLog)
        markdown = await reply_markdown(app, pilot, long_reply(3_000))
        heading, _ = line_of(markdown, "Section 40")
        log.scroll_to(y=markdown.virtual_region.y + heading, animate=False, immediate=True)
        await pilot.pause()

        def top_line() -> str:
            return markdown.render_line(round(log.scroll_y) - markdown.virtual_region.y).text.strip()

        assert top_line() == "Section 40"
        await pilot.resize_terminal(56, 30)  # the 39 sections above wrap to more lines
        await wait_until(pilot, lambda: markdown.size.width < 56 and not markdown.settling, describe="settled")
        await pilot.pause()
        assert markdown.size.height == markdown.document.height
        assert line_of(markdown, "Section 40")[0] > heading  # it moved down the reply…
        assert top_line() == "Section 40"  # …and the view with it
