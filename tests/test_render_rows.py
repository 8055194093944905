"""Containers whose lines are all alike draw one and repeat it (tui/widgets/rows.py): the screen must look
exactly as when each line is drawn."""

from __future__ import annotations

import pytest
from moa_chat.tui.app import stylesheet_paths
from moa_chat.tui.widgets import rows
from moa_chat.tui.widgets.chat_log import ChatLog
from moa_chat.tui.widgets.markdown import ReplyMarkdown
from moa_chat.tui.widgets.reply import AssistantReply
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.strip import Strip

TEXT = "\n\n".join(f"Paragraph {n}: " + "words that wrap across the reply " * 4 for n in range(12))


class LogApp(App[None]):
    CSS_PATH = stylesheet_paths()

    def compose(self) -> ComposeResult:
        yield ChatLog(id="chat-log")


def screen_cells(app: App[None]) -> list[list[tuple[str, object]]]:
    """Every cell of the screen, drawn afresh (no line kept from an earlier frame)."""
    for widget in app.screen.walk_children(with_self=True):
        widget._styles_cache.clear()
    strips: list[Strip] = app.screen._compositor.render_strips()
    return [[(char, style) for text, style, _ in strip for char in text] for strip in strips]


@pytest.mark.parametrize("status", ["ok", "failed", "cancelled"])
async def test_a_log_drawn_a_line_per_container_looks_as_one_drawn_line_by_line(status, monkeypatch):
    app = LogApp()
    async with app.run_test(size=(90, 30)) as pilot:
        log = app.query_one(ChatLog)
        for _ in range(2):
            reply = AssistantReply("preset", "wire:agg", 1)
            await log.mount(reply)
            await reply.mount(ReplyMarkdown(TEXT, classes="reply-markdown"))
            reply._mark(status)
        await pilot.pause()
        await pilot.pause()
        assert log.max_scroll_y > 0, "the log should overflow: its scrollbar and clipped replies are on screen"
        for widget in (log, *app.query(AssistantReply), *app.query(ReplyMarkdown)):
            assert rows.lines_alike(widget), f"{type(widget).__name__} should draw one line and repeat it"
        repeated = screen_cells(app)
        monkeypatch.setattr(rows, "lines_alike", lambda widget: False)
        line_by_line = screen_cells(app)
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


def cells(strips: list[Strip]) -> list[list[tuple[str, object]]]:
    return [[(char, style) for text, style, _ in strip for char in text] for strip in strips]


async def test_the_logs_scrollbar_drawn_a_line_per_run_looks_as_textuals_drawn_line_by_line(monkeypatch):
    """The chat log's scrollbar draws one line of each run of like lines (the track above the thumb, the thumb's
    ends and body, the track below): every thumb size and position, hovered, grabbed, in another theme, and in a
    crop of part of it, it looks as Textual's own drawing of every line."""
    from textual._styles_cache import StylesCache
    from textual.geometry import Offset, Region
    from textual.scrollbar import ScrollBar

    app = LogApp()
    async with app.run_test(size=(60, 40)) as pilot:
        log = app.query_one(ChatLog)
        await log.mount(Vertical(classes="tall"))
        log.query_one(".tall").styles.height = 400
        await pilot.pause()
        bar = log.vertical_scrollbar
        assert isinstance(bar, rows.RunScrollBar) and bar.display and bar.size.height == 40
        drawn = [0]
        render_line = StylesCache.render_line

        def counted(self, *args, **kwargs):
            drawn[0] += 1
            return render_line(self, *args, **kwargs)

        monkeypatch.setattr(StylesCache, "render_line", counted)
        full = Region(0, 0, bar.size.width, bar.size.height)
        compared = 0
        for theme in ("textual-dark", "textual-light"):
            app.theme = theme
            for state in ("plain", "hover", "grabbed"):
                bar.mouse_over = state == "hover"
                bar.grabbed = Offset(0, 0) if state == "grabbed" else None
                for virtual in (45, 97, 400, 4_000):
                    for position in (0, 0.37 * (virtual - 40), virtual - 40):
                        bar.window_virtual_size, bar.window_size, bar.position = virtual, 40, position
                        for crop in (full, Region(0, 7, bar.size.width, 21)):
                            bar._styles_cache.clear()
                            drawn[0] = 0
                            runs = bar.render_lines(crop)
                            assert drawn[0] <= 5, f"{drawn[0]} lines drawn for {crop.height}: one a run at most"
                            bar._styles_cache.clear()
                            assert cells(runs) == cells(ScrollBar.render_lines(bar, crop)), (theme, state, virtual)
                            compared += 1
        assert compared == 2 * 3 * 4 * 3 * 2
