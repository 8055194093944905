"""Containers whose lines all look the same, drawn one line a frame instead of one per line.

A container's own lines (its background and side borders, behind its children) are drawn again whenever its
size changes, line by line. While a reply streams, the reply, its Markdown and the chat log grow at every
batch, so each frame drew some 100 such lines, 40-55 µs each: 4-5 ms of every frame at the end of a long reply
(bench/stream_render.py, 20,000 tokens). Where the container has no top or bottom border or padding and shows
no content of its own, every line is the same: one is drawn and repeated.

A vertical scrollbar is drawn in runs of like lines too (the track above the thumb, the thumb, the track below
it), and Textual draws it whole, 40 lines of a tall screen, whenever its position or size changes by any amount:
at every batch of a streaming reply, since the log grows. That was 1.4-2.3 ms of each frame, the most of any
widget on the chat screen while a long reply streamed (bench/stream_render.py, 20,000 tokens at 10,000 tok/s).
`RunScrollBar` draws one line of each run.
"""

from __future__ import annotations

from textual.geometry import Region
from textual.scrollbar import ScrollBar
from textual.strip import Strip
from textual.widget import Widget


def lines_alike(widget: Widget) -> bool:
    """Whether every line `widget` draws itself is the same (a container with nothing above or below)."""
    styles = widget.styles
    gutter = styles.gutter
    return (
        widget.is_container
        and type(widget).render is Widget.render  # a blank of its background: the same on every line
        and not widget.BLANK
        and not styles.has_rule("keyline")  # else its lines are keylines drawn between its children
        and gutter.top == 0
        and gutter.bottom == 0
    )


def repeated_line(widget: Widget, crop: Region) -> list[Strip] | None:
    """The lines of `crop`, drawing just its first (None when they may differ: draw them all)."""
    if crop.height <= 1 or not lines_alike(widget):
        return None
    (line,) = widget._styles_cache.render_widget(widget, Region(crop.x, crop.y, crop.width, 1))
    return [line] * crop.height


class RunScrollBar(ScrollBar):
    """Textual's scrollbar, drawing one line of each run of like lines and repeating it."""

    def render_lines(self, crop: Region) -> list[Strip]:
        styles = self.styles
        if (
            not self.vertical
            or self.BLANK
            or styles.gutter
            or styles.has_any_rules("outline_top", "outline_bottom")  # drawn on the first and last lines only
            or self._border_title is not None
            or self._border_subtitle is not None
        ):
            return super().render_lines(crop)
        # Each line is its content's line, styled alike (nothing around it): like content, like lines. The content
        # is rendered whole (cheap: one renderable), as Widget.render_line does.
        if self._dirty_regions:
            self._render_content()
        content = self._render_cache.lines

        def content_line(y: int) -> Strip | None:
            return content[y] if y < len(content) else None

        lines: list[Strip] = []
        y, bottom = crop.y, crop.bottom
        while y < bottom:
            line, end = content_line(y), y + 1
            while end < bottom and content_line(end) == line:
                end += 1
            (drawn,) = self._styles_cache.render_widget(self, Region(crop.x, y, crop.width, 1))
            lines.extend([drawn] * (end - y))
            y = end
        return lines
