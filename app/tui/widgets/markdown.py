"""A reply's Markdown: one widget that shows its text as lines (Textual's Line API), streamed or whole.

The text is split into top-level blocks (tui/drawing/markdown_blocks.py). A finished block is drawn once to lines
and kept; only the block still growing is parsed and drawn again as text arrives, so a batch costs the same at the
end of a long reply as at its start. Lines become strips only when they are on screen. After a new width or a new
theme, a block is drawn again from its source when it is on screen, and the rest a little at a time in the frames
that follow (`settle`): until then a block keeps its last height, so the scroll bar is close to right at once and
exactly right soon after.

Every line can be selected with the mouse and copied: each line's text carries its selection offsets, and
`get_selection` gives back the reply's text as written (wrapped lines joined again, frames and indents left out).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.geometry import Region, Size
from textual.highlight import highlight
from textual.selection import Selection
from textual.strip import Strip
from textual.style import Style
from textual.widget import Widget

from ..drawing.markdown_blocks import Look, parser
from ..drawing.reply_document import Document

if TYPE_CHECKING:
    from textual.app import App
    from textual.theme import Theme

__all__ = ["ReplyMarkdown", "batch_update", "learn_reply_styles", "parser", "warm_up_markdown"]

STRIPS = 300  # lines kept as strips (those on screen, and a little more); past that the oldest goes
SETTLE = 0.02  # seconds of drawing blocks again per pass after a new width or theme, one pass a frame
SETTLE_PAUSE = 1 / 60  # between two such passes: the frames in between paint
# The languages models write code in most: `warm_up_markdown` loads their Pygments lexers off the UI thread.
COMMON_LANGUAGES = (
    *("python", "bash", "shell", "javascript", "typescript", "json", "yaml", "toml", "sql", "html", "css"),
    *("rust", "go", "c", "cpp", "java", "diff"),
)


class ReplyMarkdown(Widget):
    """Markdown shown as lines. Streamed text arrives through `stream`; `end_stream` says no more will come."""

    COMPONENT_CLASSES = {
        *(f"reply--h{level}" for level in range(1, 7)),
        *("reply--code", "reply--link", "reply--quote", "reply--bullet", "reply--rule"),
        *("reply--frame", "reply--title", "reply--header"),
    }
    DEFAULT_CSS = """
    ReplyMarkdown {
        width: 1fr;
        height: auto;
        color: $foreground;
    }
    ReplyMarkdown > .reply--h1 { color: $markdown-h1-color; text-style: $markdown-h1-text-style; }
    ReplyMarkdown > .reply--h2 { color: $markdown-h2-color; text-style: $markdown-h2-text-style; }
    ReplyMarkdown > .reply--h3 { color: $markdown-h3-color; text-style: $markdown-h3-text-style; }
    ReplyMarkdown > .reply--h4 { color: $markdown-h4-color; text-style: $markdown-h4-text-style; }
    ReplyMarkdown > .reply--h5 { color: $markdown-h5-color; text-style: $markdown-h5-text-style; }
    ReplyMarkdown > .reply--h6 { color: $markdown-h6-color; text-style: $markdown-h6-text-style; }
    ReplyMarkdown > .reply--code { color: $text-warning 95%; background: $warning 10%; }
    ReplyMarkdown > .reply--link { color: $text-accent; text-style: underline; }
    ReplyMarkdown > .reply--quote { color: $text-primary 50%; }
    ReplyMarkdown > .reply--bullet { color: $text-primary; text-style: bold; }
    ReplyMarkdown > .reply--rule { color: $secondary; }
    ReplyMarkdown > .reply--frame { color: $foreground 25%; }
    ReplyMarkdown > .reply--title { color: $text-muted; text-style: bold; }
    ReplyMarkdown > .reply--header { color: $text-primary; text-style: bold; }
    """

    def __init__(self, markdown: str | None = None, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.document = Document(markdown or "")
        self.reply_look: tuple[Look, Style] | None = None  # the styles resolved for the current theme
        self.strips: dict[int, Strip] = {}  # lines drawn as strips, by their y
        self.settling = False  # blocks are being drawn again after a new width or theme

    # ------------------------------------------------------------------ the text

    @property
    def source(self) -> str:
        """The Markdown shown."""
        return self.document.source

    async def update(self, markdown: str) -> None:
        """Show `markdown` instead."""
        self.document = Document(markdown)
        self.strips.clear()
        self.refresh(layout=True)

    async def stream(self, fragment: str) -> None:
        """Append `fragment` to the text: the finished blocks it closes are drawn, the growing one drawn again."""
        if not fragment:
            return
        height, done = self.document.height, self.document.done
        self.document.take(fragment)
        self.show_changes(height, done)

    async def end_stream(self) -> None:
        """No more text will come: the growing block is finished."""
        height, done = self.document.height, self.document.done
        self.document.seal()
        self.show_changes(height, done)

    def show_changes(self, height: int, done: int) -> None:
        """Show what changed below line `done` (where the finished blocks ended): a layout if the height did, else
        a repaint of the growing block's lines."""
        width = self.size.width
        if width <= 0:
            self.refresh(layout=True)
            return
        done = min(done, self.document.done)  # the last block grows again after the stream's end
        self.draw_lines(width)
        for y in [y for y in self.strips if y >= done]:
            del self.strips[y]
        if self.document.height != height:
            self.refresh(layout=True)
        else:
            self.refresh(Region(0, done, width, max(height - done, 1)))

    # ------------------------------------------------------------------ drawing

    def resolved_look(self) -> tuple[Look, Style]:
        """The styles blocks are drawn in, and the style under them, for the current theme."""
        if self.reply_look is None:
            style = self.get_visual_style

            def part(name: str) -> Style:
                return style(f"reply--{name}")

            headings = tuple(part(f"h{level}") for level in range(1, 7))
            look = Look(
                (headings[0], headings[1], headings[2], headings[3], headings[4], headings[5]),
                *(part(name) for name in ("code", "link", "quote", "bullet", "rule", "frame", "title", "header")),
            )
            self.reply_look = (look, self.visual_style)
        return self.reply_look

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self.restyle()

    def restyle(self) -> None:
        """Styles may have changed (a theme, a stylesheet): resolve them again; a change draws it all again."""
        self.reply_look = None
        self.refresh()

    def on_mount(self) -> None:
        # A new theme's styles are applied a moment after it is chosen (App.refresh_css): look again after that.
        self.app.theme_changed_signal.subscribe(self, self.theme_chosen)

    def on_unmount(self) -> None:
        # The subscription holds this widget: a reply folded away (chat_log.py) or closed leaves it. Textual's
        # styles cache of a widget outlives it for a while (its lru_cache of background colours holds it), so
        # the lines drawn for it go too: a refresh empties it.
        self.app.theme_changed_signal.unsubscribe(self)
        self.strips.clear()
        self.refresh()

    def theme_chosen(self, _theme: Theme) -> None:
        self.call_after_refresh(self.restyle)

    def draw_lines(self, width: int) -> None:
        """Lines for every block at `width` (see Document.ensure)."""
        look, base = self.resolved_look()
        if self.document.ensure(width, look, (look, base)):
            self.strips.clear()
            if not self.settling:
                self.settling = True
                self.set_timer(SETTLE_PAUSE, self.settle)

    def settle(self) -> None:
        """Draw again, for a moment, blocks not yet drawn at this width; again after a frame if some remain.
        A view scrolled into the reply keeps its top line where it is while the blocks above it change height."""
        view = self.scroll_view()
        top = 0 if view is None else round(view.scroll_y) - self.virtual_region.y
        place = None if view is None else self.document.locate(top)
        remaining = self.document.settle(SETTLE)
        if view is not None and place is not None and (shift := self.document.y_of(place) - top):
            view.scroll_relative(y=shift, animate=False, immediate=True)
        self.follow_moves()
        if remaining:
            self.set_timer(SETTLE_PAUSE, self.settle)
        else:
            self.settling = False

    def scroll_view(self) -> Widget | None:
        """The container that scrolls this reply, if one does."""
        for ancestor in self.ancestors:
            if isinstance(ancestor, Widget) and ancestor.allow_vertical_scroll:
                return ancestor
        return None

    def follow_moves(self) -> None:
        """A block drawn again at a new height moved the lines below it: forget their strips, lay out again."""
        moved = self.document.corrected
        if moved is None:
            return
        self.document.corrected = None
        for y in [y for y in self.strips if y >= moved]:
            del self.strips[y]
        self.call_later(self.refresh, layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        self.draw_lines(width)
        return self.document.height

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        self.draw_lines(width)
        strip = self.strips.get(y)
        if strip is None:
            if len(self.strips) >= STRIPS:
                del self.strips[next(iter(self.strips))]
            strip = self.strip_at(y, width)
            self.follow_moves()
            self.strips[y] = strip
        return strip

    def strip_at(self, y: int, width: int) -> Strip:
        """Line `y` as a strip: its body carries selection offsets, its decoration maps to the body's ends."""
        line = self.document.line(y)
        base = self.resolved_look()[1]
        rich_base = base.rich_style
        if line is None:
            return Strip.blank(width, rich_base)
        text = line.body.plain
        body = line.body.render_segments(base)
        selection = self.text_selection
        span = selection.get_span(y) if selection is not None else None
        if span is not None:
            start, end = span
            body = _selected(body, start, len(text) if end == -1 else end, self.chosen_text_style())
        right_segments = line.right.render_segments(base)
        if text:
            # Past the last cell with an offset, Textual's hit test reads the end of that cell's text: the text's
            # end. So what follows the text (the padding, the right-hand decoration) needs no offsets, each of
            # which is a style of its own that Textual keeps in its cache of rendered styles.
            right = Strip(right_segments)
        else:
            # A line with no text: its padding or its decoration carries the line's offset.
            room = width - line.left.cell_length - line.right.cell_length
            if room > 0 and not line.right:
                body.append(Segment(" " * room, rich_base))
            right = Strip(right_segments).apply_offsets(0, y)
        body_strip = Strip(body).apply_offsets(0, y)
        left = _pinned(line.left.render_segments(base), 0, y)
        # adjust_cell_length, not crop_extend: crop_extend caches a strip of the right length in itself, a cycle
        # that makes every drawn line garbage only a full collection frees (tui/heap.py runs none mid-turn).
        return Strip.join([left, body_strip, right]).adjust_cell_length(width, rich_base)

    def chosen_text_style(self) -> RichStyle:
        return Style.from_styles(self.screen.get_component_styles("screen--selection")).rich_style

    # ------------------------------------------------------------------ selection and links

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        """The selected text as written: a wrapped line joined again, decoration (bars, frames) left out."""
        if self.size.width > 0:
            self.draw_lines(self.size.width)
        copied: list[str] = []
        last = -2
        first_y = selection.start.y if selection.start is not None else 0
        last_y = selection.end.y if selection.end is not None else self.document.height - 1
        for y in range(first_y, last_y + 1):
            line = self.document.line(y)
            span = selection.get_span(y)
            if line is None or span is None:
                continue
            if not line.body and (line.left or line.right):
                continue  # a line that only decorates (a frame's edge, a rule): nothing to copy
            start, end = span
            text = line.body.plain
            piece = text[start:] if end == -1 else text[start:end]
            if copied and last == y - 1 and line.join is not None:
                copied[-1] += line.join + piece
            else:
                copied.append(piece)
            last = y
        self.follow_moves()
        return "\n".join(copied), "\n"

    def selection_updated(self, selection: Selection | None) -> None:
        self.strips.clear()
        self.refresh()

    def action_link(self, href: str) -> None:
        """A link's click: open it."""
        self.app.open_url(href)


def _selected(segments: list[Segment], start: int, end: int, style: RichStyle) -> list[Segment]:
    """`segments` with characters `start` to `end` in the selection's style."""
    out: list[Segment] = []
    at = 0
    for text, seg_style, _ in segments:
        stop = at + len(text)
        cut_from, cut_to = max(start, at) - at, min(end, stop) - at
        if cut_from >= cut_to:
            out.append(Segment(text, seg_style))
        else:
            picked = (seg_style + style) if seg_style else style
            for piece, piece_style in (
                (text[:cut_from], seg_style),
                (text[cut_from:cut_to], picked),
                (text[cut_to:], seg_style),
            ):
                if piece:
                    out.append(Segment(piece, piece_style))
        at = stop
    return out


def _pinned(segments: list[Segment], x: int, y: int) -> Strip:
    """Decoration as a strip whose every cell selects from character `x` of line `y` (a click on a frame or an
    indent starts or ends a selection at the text after it)."""
    meta = RichStyle.from_meta({"offset": (x, y)})
    cells = [Segment(char, (style + meta) if style else meta) for text, style, _ in segments for char in text]
    return Strip(cells)


@contextlib.contextmanager
def batch_update(widget: Widget) -> Iterator[None]:
    """Changes the screen shows together (App.batch_update), then a nudge to the screen: Textual's batch end
    wakes the app, not the screen, whose update timer stays paused after a refresh it skipped, so the frame
    would wait for the next message to reach the screen."""
    with widget.app.batch_update():
        yield
    widget.screen.check_idle()


def learn_reply_styles(app: App[Any]) -> None:
    """On the UI thread, idle after the first screen: ReplyMarkdown's DEFAULT_CSS added to the app's stylesheet
    and parsed, where Textual would add it when the first reply mounts (the same source, so it finds it there)
    and parse the whole stylesheet again in that reply's first batch."""
    try:
        path = inspect.getfile(ReplyMarkdown)
    except (TypeError, OSError):
        path = ""
    app.stylesheet.add_source(
        ReplyMarkdown.DEFAULT_CSS,
        read_from=(path, "ReplyMarkdown.DEFAULT_CSS"),
        is_default_css=True,
        tie_breaker=0,
        scope="ReplyMarkdown",
    )
    app.stylesheet.rules_map  # noqa: B018 (parsed now, not in a reply's first batch)


# A little of what models write, links and file names included, parsed once by `warm_up_markdown`.
WARM_UP_TEXT = (
    "## A heading\n\nA paragraph with **bold**, `code`, a file like setup.py and https://example.com/x.\n\n"
    "- a point\n\n1. a step\n\n> a quote\n\n| a | b |\n| - | - |\n| 1 | 2 |\n"
)


def warm_up_markdown() -> None:
    """On the warm-up thread (tui/app.py), what a reply's first batches would otherwise pay for on the UI thread:
    the first parse compiles markdown-it's and linkify-it's regular expressions, and each language's first code
    block loads its Pygments lexer."""
    parser().parse(WARM_UP_TEXT)
    for language in COMMON_LANGUAGES:
        highlight("", language=language)
