"""Containers whose lines all look the same, drawn one line a frame instead of one per line.

A container's own lines (its background and side borders, behind its children) are drawn again whenever its
size changes, line by line; while a reply streams, the reply and the chat log grow at every batch. Where the
container has no top or bottom border or padding and shows no content of its own, every line is the same: one
is drawn (Textual's own drawing, for a crop one line high) and repeated.
"""

from __future__ import annotations

from textual.geometry import Region
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
    (line,) = Widget.render_lines(widget, Region(crop.x, crop.y, crop.width, 1))
    return [line] * crop.height
