"""A reply's Markdown: one widget that shows its text as lines (Textual's Line API), streamed or whole.

The text is split into top-level blocks (markdown_blocks.py). A finished block is drawn once to lines and kept;
only the block still growing is parsed and drawn again as text arrives, so a batch costs the same at the end
of a long reply as at its start. Lines become strips only when they are on screen. A new width or a new theme
draws every block again, from its source.

Every line can be selected with the mouse and copied: each line's text carries its selection offsets, and
`get_selection` gives back the reply's text as written (wrapped lines joined again, frames and indents left out).
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from markdown_it.token import Token
from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.geometry import Region, Size
from textual.highlight import highlight
from textual.selection import Selection
from textual.strip import Strip
from textual.style import Style
from textual.widget import Widget

from .markdown_blocks import EMPTY, Line, Look, block_starts, draw, parser

if TYPE_CHECKING:
    from textual.app import App

__all__ = ["ReplyMarkdown", "batch_update", "learn_reply_styles", "parser", "warm_up_markdown"]

GAP = Line(EMPTY, EMPTY)  # the blank line between two blocks
STRIPS = 1_000  # lines kept as strips (those on screen, and a little more); past that the cache starts again
# The languages models write code in most: `warm_up_markdown` loads their Pygments lexers off the UI thread.
COMMON_LANGUAGES = (
    *("python", "bash", "shell", "javascript", "typescript", "json", "yaml", "toml", "sql", "html", "css"),
    *("rust", "go", "c", "cpp", "java", "diff"),
)


@dataclass
class Block:
    """A top-level block: its Markdown, and its tokens until it is first drawn (parsed again after that)."""

    source: str
    tokens: Sequence[Token] | None


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
        self._parser = parser()
        self._reset(markdown or "")

    def _reset(self, markdown: str) -> None:
        self._source = ""
        self._tail = ""  # the text from the growing block on: what a batch parses again
        self._blocks: list[Block] = []  # the finished blocks
        self._open: Sequence[Token] | None = None  # the growing block's tokens
        self._open_lines: list[Line] | None = None  # and its lines, once drawn
        self._sealed = False  # the stream ended: the growing block is a finished one
        self._lines: list[Line] = []  # the finished blocks' lines, the gaps between them included
        self._drawn = 0  # how many finished blocks those lines hold
        self._drawn_for: tuple[int, Look, Style] | None = None
        self._look: tuple[Look, Style] | None = None
        self._strips: dict[int, Strip] = {}
        if markdown:
            self._take(markdown)
            self._seal()

    # ------------------------------------------------------------------ the text

    @property
    def source(self) -> str:
        """The Markdown shown."""
        return self._source

    async def update(self, markdown: str) -> None:
        """Show `markdown` instead."""
        self._reset(markdown)
        self.refresh(layout=True)

    async def stream(self, fragment: str) -> None:
        """Append `fragment` to the text: the finished blocks it closes are drawn, the growing one drawn again."""
        if not fragment:
            return
        height = self._height()
        self._take(fragment)
        self._changed(height)

    async def end_stream(self) -> None:
        """No more text will come: the growing block is finished."""
        height = self._height()
        self._seal()
        self._changed(height)

    def _take(self, fragment: str) -> None:
        if self._sealed:  # more text after the end: the last block grows again
            self._sealed = False
            if self._blocks:
                last = self._blocks.pop()
                self._drawn = min(self._drawn, len(self._blocks))
                self._drawn_for = None  # its lines are among the finished ones: draw them all again
                self._tail = last.source
        self._source += fragment
        self._tail += fragment
        tokens = self._parser.parse(self._tail)
        starts = block_starts(tokens)
        if not starts:
            self._open, self._open_lines = None, None
            return
        lines = self._tail.splitlines(keepends=True)
        for start, following in itertools.pairwise(starts):
            first, until = _first_line(tokens[start]), _first_line(tokens[following])
            self._blocks.append(Block("".join(lines[first:until]), tokens[start:following]))
        self._tail = "".join(lines[_first_line(tokens[starts[-1]]) :])
        self._open, self._open_lines = tokens[starts[-1] :], None

    def _seal(self) -> None:
        if self._sealed:
            return
        self._sealed = True
        if self._open is not None:
            self._blocks.append(Block(self._tail, self._open))
            self._open, self._open_lines = None, None
            self._tail = ""

    def _changed(self, height: int) -> None:
        """Show what changed: a layout if the height did, else a repaint of the growing block's lines."""
        width = self.size.width
        if width <= 0:
            self.refresh(layout=True)
            return
        done = len(self._lines)
        self._ensure(width)
        for y in [y for y in self._strips if y >= done]:
            del self._strips[y]
        if self._height() != height:
            self.refresh(layout=True)
        else:
            self.refresh(Region(0, done, width, max(height - done, 1)))

    # ------------------------------------------------------------------ drawing

    def _resolved_look(self) -> tuple[Look, Style]:
        """The styles blocks are drawn in, and the style under them, for the current theme."""
        if self._look is None:
            style = self.get_visual_style

            def part(name: str) -> Style:
                return style(f"reply--{name}")

            headings = tuple(part(f"h{level}") for level in range(1, 7))
            look = Look(
                (headings[0], headings[1], headings[2], headings[3], headings[4], headings[5]),
                *(part(name) for name in ("code", "link", "quote", "bullet", "rule", "frame", "title", "header")),
            )
            self._look = (look, self.visual_style)
        return self._look

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._restyle()

    def _restyle(self) -> None:
        """Styles may have changed (a theme, a stylesheet): resolve them again; a change draws it all again."""
        self._look = None
        self.refresh()

    def on_mount(self) -> None:
        # A new theme's styles are applied a moment after it is chosen (App.refresh_css): look again after that.
        self.watch(self.app, "theme", self._theme_chosen, init=False)

    def _theme_chosen(self) -> None:
        self.call_after_refresh(self._restyle)

    def _ensure(self, width: int) -> None:
        """Lines for every block at `width`: the new finished blocks drawn, or all of them if the width or the
        styles changed."""
        look, base = self._resolved_look()
        key = (width, look, base)
        if key != self._drawn_for:
            self._drawn_for, self._lines, self._drawn, self._open_lines = key, [], 0, None
            self._strips.clear()
        while self._drawn < len(self._blocks):
            block = self._blocks[self._drawn]
            tokens = block.tokens if block.tokens is not None else self._parser.parse(block.source)
            block.tokens = None  # drawn: its tokens go (a new width parses its source again)
            if self._lines:
                self._lines.append(GAP)
            starts = block_starts(tokens)
            self._lines.extend(draw(tokens[starts[0] :] if starts else tokens, width, look) if tokens else [GAP])
            self._drawn += 1
        if self._open is not None and self._open_lines is None:
            self._open_lines = draw(self._open, width, look)

    def _height(self) -> int:
        open_lines = self._open_lines or []
        return len(self._lines) + len(open_lines) + (1 if self._lines and open_lines else 0)

    def _line(self, y: int) -> Line | None:
        lines = self._lines
        if y < len(lines):
            return lines[y]
        y -= len(lines) + (1 if lines else 0)
        open_lines = self._open_lines or []
        return open_lines[y] if 0 <= y < len(open_lines) else (GAP if y == -1 else None)

    def _all_lines(self) -> list[Line]:
        open_lines = self._open_lines or []
        return [*self._lines, *([GAP] if self._lines and open_lines else []), *open_lines]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        self._ensure(width)
        return self._height()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        self._ensure(width)
        strip = self._strips.get(y)
        if strip is None:
            if len(self._strips) > STRIPS:
                self._strips.clear()
            strip = self._strips[y] = self._strip(y, width)
        return strip

    def _strip(self, y: int, width: int) -> Strip:
        """Line `y` as a strip: its body carries selection offsets, its decoration maps to the body's ends."""
        line = self._line(y)
        base = self._resolved_look()[1]
        rich_base = base.rich_style
        if line is None:
            return Strip.blank(width, rich_base)
        text = line.body.plain
        body = line.body.render_segments(base)
        selection = self.text_selection
        span = selection.get_span(y) if selection is not None else None
        if span is not None:
            start, end = span
            body = _selected(body, start, len(text) if end == -1 else end, self._selection_style())
        room = width - line.left.cell_length - line.right.cell_length - line.body.cell_length
        if room > 0 and not line.right:
            body.append(Segment(" " * room, rich_base))
        body_strip = Strip(body).apply_offsets(0, y)
        left = _pinned(line.left.render_segments(base), 0, y)
        right = _pinned(line.right.render_segments(base), len(text), y)
        return Strip.join([left, body_strip, right]).crop_extend(0, width, rich_base)

    def _selection_style(self) -> RichStyle:
        return Style.from_styles(self.screen.get_component_styles("screen--selection")).rich_style

    # ------------------------------------------------------------------ selection and links

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        """The selected text as written: a wrapped line joined again, decoration (bars, frames) left out."""
        if self.size.width > 0:
            self._ensure(self.size.width)
        copied: list[str] = []
        last = -2
        for y, line in enumerate(self._all_lines()):
            span = selection.get_span(y)
            if span is None:
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
        return "\n".join(copied), "\n"

    def selection_updated(self, selection: Selection | None) -> None:
        self._strips.clear()
        self.refresh()

    def action_link(self, href: str) -> None:
        """A link's click: open it."""
        self.app.open_url(href)


def _first_line(token: Token) -> int:
    assert token.map is not None
    return token.map[0]


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
    indent starts or ends a selection at the text beside it)."""
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
