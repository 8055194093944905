"""Containers whose lines are all alike draw one and repeat it (tui/drawing/rows.py): the screen must look
exactly as when each line is drawn."""

from __future__ import annotations

import pytest
from moa_chat.tui.app import stylesheet_paths
from moa_chat.tui.drawing import rows
from moa_chat.tui.widgets.chat_log import ChatLog
from moa_chat.tui.widgets.markdown import ReplyMarkdown
from moa_chat.tui.widgets.reply import AssistantReply
from textual.app import App, ComposeResult
from textual.containers import Vertical

TEXT = "\n\n".join(f"Paragraph {n}: " + "words that wrap across the reply " * 4 for n in range(12))


class LogApp(App[None]):
    CSS_PATH = stylesheet_paths()

    def compose(self) -> ComposeResult:
        yield ChatLog(id="chat-log")


async def screen_cells(app: App[None], pilot) -> str:
    """The whole screen, drawn afresh (every widget repainted, no line kept from an earlier frame)."""
    for widget in app.screen.walk_children(with_self=True):
        widget.refresh()
    await pilot.pause()
    return app.export_screenshot()


@pytest.mark.parametrize("status", ["ok", "failed", "cancelled"])
async def test_a_log_drawn_a_line_per_container_looks_as_one_drawn_line_by_line(status, monkeypatch):
    app = LogApp()
    async with app.run_test(size=(90, 30)) as pilot:
        log = app.query_one(ChatLog)
        for _ in range(2):
            reply = AssistantReply("preset", "wire:agg", 1)
            await log.mount(reply)
            await reply.mount(ReplyMarkdown(TEXT, classes="reply-markdown"))
            reply.add_class(f"-{status}")
        await pilot.pause()
        await pilot.pause()
        assert log.max_scroll_y > 0, "the log should overflow: its scrollbar and clipped replies are on screen"
        for widget in (log, *app.query(AssistantReply)):
            assert rows.lines_alike(widget), f"{type(widget).__name__} should draw one line and repeat it"
        repeated = await screen_cells(app, pilot)
        monkeypatch.setattr(rows, "lines_alike", lambda widget: False)
        line_by_line = await screen_cells(app, pilot)
    assert repeated == line_by_line


async def test_a_container_with_a_top_edge_draws_every_line():
    class Framed(App[None]):
        CSS = "#framed { border: round red; height: 10; } #padded { padding: 1 0 0 0; height: 5; }"

        def compose(self) -> ComposeResult:
            yield Vertical(id="framed")
            yield Vertical(id="padded")
            yield Vertical(id="plain")

    app = Framed()
    async with app.run_test(size=(40, 20)):
        assert not rows.lines_alike(app.query_one("#framed"))
        assert not rows.lines_alike(app.query_one("#padded"))
        assert rows.lines_alike(app.query_one("#plain"))
