"""A long reply keeps the drawn lines of the blocks it used last only (KEPT_LINES): the others keep their
source and height and are drawn again, the same, when they are shown or copied. So a reply's memory does not
grow with its length beyond its text."""

from __future__ import annotations

import pytest
from moa_chat.tui.drawing import reply_document
from moa_chat.tui.drawing.markdown_blocks import Look
from moa_chat.tui.drawing.reply_document import Document
from moa_chat.tui.widgets.chat_log import ChatLog
from moa_chat.tui.widgets.reply import AssistantReply
from test_reply_selection import long_reply
from test_stream_render import LogApp, reply_markdown
from textual.geometry import Offset
from textual.selection import Selection
from textual.style import Style

LOOK = Look((Style(bold=True),) * 6, *(Style(),) * 8)  # type: ignore[arg-type]
TEXT = long_reply(1_500)
BUDGET = 60


def kept_lines(document: Document) -> int:
    return sum(len(block.lines) for block in document._blocks if block.lines is not None)


def every_line(document: Document) -> list[object]:
    return [document.line(y) for y in range(document.height)]


@pytest.fixture
def unbounded(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every line of TEXT at 80 cells, drawn with every block's lines kept; then the budget is small."""
    document = Document(TEXT)
    document.ensure(80, LOOK, "look")
    lines = every_line(document)
    assert kept_lines(document) == len([line for line in lines if line is not reply_document.GAP]) > 5 * BUDGET
    monkeypatch.setattr(reply_document, "KEPT_LINES", BUDGET)
    return lines


def test_a_long_reply_keeps_the_lines_it_used_last_and_draws_the_others_again_the_same(unbounded):
    document = Document(TEXT)
    document.ensure(80, LOOK, "look")
    assert kept_lines(document) <= BUDGET
    assert all(block.exact for block in document._blocks)  # every height is known, the lines of most are not
    assert document.height == len(unbounded)

    assert every_line(document) == unbounded  # from the top: each block drawn again from its source
    assert kept_lines(document) <= BUDGET
    assert document.corrected is None  # drawn again at the same width, no block changed its height
    assert document.line(3) == unbounded[3]  # and back at the top again


def test_a_streamed_long_reply_keeps_as_few_lines(unbounded):
    document = Document()
    document.ensure(80, LOOK, "look")
    words = TEXT.split(" ")
    for start in range(0, len(words), 7):
        document.take(" ".join(words[start : start + 7]) + (" " if start + 7 < len(words) else ""))
        assert kept_lines(document) <= BUDGET
    document.seal()
    assert document.source == TEXT
    assert every_line(document) == unbounded


def test_after_a_new_width_it_settles_within_the_budget(unbounded):
    document = Document(TEXT)
    document.ensure(80, LOOK, "look")
    document.ensure(50, LOOK, "look")
    while document.settle(1.0):
        pass
    assert kept_lines(document) <= BUDGET
    assert all(block.exact for block in document._blocks)
    fresh = Document(TEXT)
    fresh.ensure(50, LOOK, "look")
    assert document.height == fresh.height
    assert every_line(document) == every_line(fresh)


async def test_a_selection_over_blocks_not_kept_copies_their_text(monkeypatch: pytest.MonkeyPatch):
    async def copied(budget: int) -> tuple[str, str]:
        monkeypatch.setattr(reply_document, "KEPT_LINES", budget)
        app = LogApp()
        async with app.run_test(size=(90, 40)) as pilot:
            markdown = await reply_markdown(app, pilot, TEXT)
            assert kept_lines(markdown.document) <= budget
            height = markdown.document.height
            everything = markdown.get_selection(Selection(None, None))
            third = Selection.from_offsets(Offset(4, height // 3), Offset(10, 2 * height // 3))
            middle = markdown.get_selection(third)
            assert everything is not None and middle is not None
            return everything[0], middle[0]

    kept_all = await copied(10**9)
    assert await copied(BUDGET) == kept_all
    assert "alpha1 " in kept_all[0] and "Section 27" in kept_all[0]
    assert kept_all[1].count("Section ") > 5 and "Section 1\n" not in kept_all[1]


async def test_a_removed_reply_leaves_nothing_it_drew_alive():
    # A theme watcher on the app held every reply ever mounted, and Textual's styles cache of a removed widget
    # outlives it (an lru_cache keyed by it), with the strips it drew.
    import gc
    import weakref

    from textual.strip import Strip

    marker = "zanzibar-quokka-marker"
    app = LogApp()
    async with app.run_test(size=(90, 30)) as pilot:
        markdown = await reply_markdown(app, pilot, f"# {marker}\n\nA paragraph about {marker}.\n")
        reply = markdown.parent
        assert isinstance(reply, AssistantReply)
        assert any(marker in markdown.render_line(y).text for y in range(markdown.size.height))
        gone = weakref.ref(markdown)
        await reply.remove()
        del markdown, reply
        await app.query_one(ChatLog).mount(AssistantReply("preset", "wire:agg", 1))  # the log lays out anew
        await pilot.pause()
        gc.collect()
        assert gone() is None
        assert not [strip for strip in gc.get_objects() if isinstance(strip, Strip) and marker in strip.text]
