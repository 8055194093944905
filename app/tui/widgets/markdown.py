"""Markdown as moa-chat shows model text: file names stay file names, and code blocks are framed and named.

Textual's default parser linkifies "fuzzy" links, so `README.md` or `setup.py` in a reply became a link to
http://README.md (both are top-level domains). Links a model writes out (https://…, <…>, [text](url)) still
work. Its code fences clip a long line silently: here the frame names the language and a line that does not
fit scrolls, with a scrollbar that says so.

A long streamed reply stays cheap (issue 12). A Markdown block widget costs milliseconds to mount (its CSS),
and every layout pass walks all of them: a reply of a few thousand tokens used to fall seconds behind a fast server.
So past a few blocks a streamed ReplyMarkdown stops making a widget per block. It draws each block through a
*stamp*: a hidden, already-styled widget tree of the same shape (a paragraph, a list of two items, a python
fence, …) that takes the block's content, is arranged and drawn to lines (lists and code blocks by a drawer
of their own, the rest where Textual's layout places their parts: `_compose`). Finished
blocks go into `FrozenBlocks` (one widget of fixed height showing those lines); the block still growing is a
FrozenBlocks redrawn each batch, kept as it is when the stream ends. Stamps are the same widget
classes under the same CSS in the same place, so what is drawn is what the widgets show (tests compare them
cell by cell). A block that needs to be a widget — a table, or a code block wider than the reply, which
scrolls — is one, between frozen runs. Once it draws, a reply parses its text into light blocks (`_light`):
what a stamp reads to draw a block, without the widget Textual's parse would build for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

from markdown_it import MarkdownIt
from markdown_it.token import Token
from textual._resolve import resolve_box_models
from textual._styles_cache import StylesCache
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.css.query import NoMatches
from textual.css.scalar import Unit
from textual.dom import DOMNode
from textual.geometry import Region, Size, Spacing
from textual.highlight import highlight
from textual.layout import DockArrangeResult
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.visual import RenderOptions
from textual.widget import Widget
from textual.widgets import Label, Markdown
from textual.widgets._markdown import (
    MarkdownBlock,
    MarkdownBlockQuote,
    MarkdownBullet,
    MarkdownBulletList,
    MarkdownFence,
    MarkdownH1,
    MarkdownH2,
    MarkdownH3,
    MarkdownH4,
    MarkdownH5,
    MarkdownH6,
    MarkdownHorizontalRule,
    MarkdownList,
    MarkdownListItem,
    MarkdownOrderedList,
    MarkdownOrderedListItem,
    MarkdownParagraph,
    MarkdownTable,
    MarkdownTableCellContents,
    MarkdownTableContent,
    MarkdownUnorderedListItem,
)

from .rows import lines_alike, repeated_line

if TYPE_CHECKING:
    from textual.app import App
    from textual.await_complete import AwaitComplete
    from textual.css.styles import RulesMap

DRAW_FROM = 6  # blocks a streamed reply shows as widgets; past them it draws blocks through stamps
RUN_LINES = 300  # a frozen run takes more blocks until it is this tall (a resize redraws a run at a time)
STAMPS = 48  # stamps a reply keeps (one per block shape), the least recently used dropped past that
# The languages models write code in most: a reply's first block of each loaded Pygments' lexer for it then,
# 1-30 ms (Python's 29), in one batch of the stream; `warm_up_markdown` loads them off the UI thread.
COMMON_LANGUAGES = (
    *("python", "bash", "shell", "javascript", "typescript", "json", "yaml", "toml", "sql", "html", "css"),
    *("rust", "go", "c", "cpp", "java", "diff"),
)


def parser() -> MarkdownIt:
    """GitHub-flavoured Markdown with explicit links only."""
    md = MarkdownIt("gfm-like")
    if md.linkify is not None:
        md.linkify.set({"fuzzy_link": False, "fuzzy_email": False, "fuzzy_ip": False})
    return md


class CodeFence(MarkdownFence):
    """A code block in a frame whose title is the language (none for a bare ``` block)."""

    def __init__(self, markdown: Markdown, token: Token, code: str) -> None:
        super().__init__(markdown, token, code)
        self._title()

    def _title(self) -> None:
        language = self.lexer.split()[0] if self.lexer.strip() else ""
        self.border_title = Content(language) if language else None

    def _copy_context(self, block: MarkdownBlock) -> None:
        super()._copy_context(block)
        # While it streams, the same widget takes each newer parse of the block.
        self._title()


# --------------------------------------------------------------------------- drawn blocks


class FrozenBlocks(Widget):
    """A run of Markdown blocks shown as the lines they draw to (see the module's docstring).

    It sits among the blocks of its ReplyMarkdown with the first block's top margin and the last one's bottom
    margin, so the vertical layout collapses margins around it as it would around the blocks. Links still work
    (their click actions are in the lines). Mouse selection stays with widget blocks: the lines carry no
    selection offsets of their own.
    """

    DEFAULT_CSS = """
    FrozenBlocks {
        width: 1fr;
        height: auto;
    }
    """
    ALLOW_SELECT = False

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[Strip] = []
        self.source_text = ""  # the blocks' Markdown: a redraw (new width or theme) parses it again
        self.drawn_for: tuple[int, object] = (0, None)
        self._bottom = 0  # the last block's bottom margin
        self._redrawing = False

    def show(self, lines: list[Strip], top: int, bottom: int, drawn_for: tuple[int, object]) -> None:
        # The same box (a growing paragraph's last line got longer) is a repaint of these lines alone; a new
        # height or margin is a layout of the whole screen (20-80 ms a frame on a slow machine).
        margin = Spacing(top, 0, bottom, 0)
        same_box = len(lines) == len(self.lines) and margin == self.styles.margin
        self.lines, self._bottom, self.drawn_for = lines, bottom, drawn_for
        if not same_box:
            self.styles.margin = margin
        self.refresh(layout=not same_box)

    def extend(self, drawn: Drawn, blank: Strip) -> None:
        """Add a block below the others, with the space the layout would leave between them."""
        if not self.lines:
            self.show(drawn.lines, drawn.margin_top, drawn.margin_bottom, self.drawn_for)
            return
        self.lines.extend([blank] * gap_between(self._bottom, drawn.margin_top) + drawn.lines)
        self._bottom = drawn.margin_bottom
        self.styles.margin = Spacing(self.styles.margin.top, 0, drawn.margin_bottom, 0)
        self.refresh(layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.lines)

    def render_line(self, y: int) -> Strip:
        return self.lines[y] if 0 <= y < len(self.lines) else Strip.blank(self.outer_size.width)

    def render_lines(self, crop: Region) -> list[Strip]:
        markdown = self.parent
        if (
            isinstance(markdown, ReplyMarkdown)
            and not self._redrawing
            and self.source_text
            and self.drawn_for != (self.outer_size.width, drawing_key(self))
        ):
            # Drawn for another width or theme: draw it again (after this frame, not while painting it).
            self._redrawing = True
            self.call_later(markdown.redraw, self)
        x, y, width, height = crop
        blank = Strip.blank(width)
        lines = self.lines
        return [
            lines[row].crop_extend(x, x + width, None) if row < len(lines) else blank for row in range(y, y + height)
        ]

    async def action_link(self, href: str) -> None:
        """A link's click, posted as the block it was drawn from would have."""
        if isinstance(self.parent, Markdown):
            self.post_message(Markdown.LinkClicked(self.parent, href))


@contextlib.contextmanager
def batch_update(widget: Widget) -> Iterator[None]:
    """Changes the screen shows together (App.batch_update), then a nudge to the screen: Textual's batch end
    wakes the app, not the screen, whose update timer stays paused after a refresh it skipped, so the frame
    would wait for the next message to reach the screen (a few hundred milliseconds while streaming)."""
    with widget.app.batch_update():
        yield
    widget.screen.check_idle()


def drawing_key(widget: Widget) -> object:
    """What, besides the width, drawn lines depend on: the styles, as Textual last applied them to the screen
    (it counts its stylesheet updates), and how colours reach the terminal (a line filter, applied at once).

    Not the theme's name, as it was: Textual applies a new theme's styles a moment after `App.theme` changes
    (App.refresh_css, by call_next), so a block drawn in that moment would have been taken as drawn in the new
    theme; and an ANSI theme or a reloaded stylesheet changes styles under the same theme name."""
    return (widget.screen._css_update_count, widget.app.ansi_color)


@dataclass
class Drawn:
    """A block drawn to lines at the Markdown's content width (its horizontal margins included)."""

    lines: list[Strip]
    margin_top: int
    margin_bottom: int


def gap_between(bottom: int, top: int) -> int:
    """The blank lines the vertical layout leaves between two blocks: their margins overlap."""
    return max(bottom, top)


def stacked(blocks: list[Drawn], blank: Strip) -> Drawn:
    """Blocks drawn one under another, as the layout would space them."""
    lines: list[Strip] = []
    for above, block in zip([None, *blocks], blocks, strict=False):
        if above is not None:
            lines.extend([blank] * gap_between(above.margin_bottom, block.margin_top))
        lines.extend(block.lines)
    return Drawn(lines, blocks[0].margin_top if blocks else 0, blocks[-1].margin_bottom if blocks else 0)


# One cache for every drawing, emptied each time: StylesCache.get_inner_outer is an lru_cache on the method, so
# each instance (and the lines it holds) would stay alive in it, up to 1,024 of them.
_STYLES_CACHE = StylesCache()


_LOOKS: dict[tuple[Widget, str], Any] = {}  # a batch's resolved styles of the stamps' parts (see `_looked_up`)


def _looked_up(widget: Widget, name: str) -> Any:
    """`widget`'s `background_colors` or `link_style`, as the batch first read it. Each read walks up the widget's
    ancestors (a dozen in the chat) to add up their backgrounds: a sixth of a block's drawing, for the same
    answer for every block a batch draws through a stamp. ReplyMarkdown forgets them at each batch
    (`_looks_of_one_batch`): a theme, a class or a hover may change them in between."""
    key = (widget, name)
    looks = _LOOKS.get(key)
    if looks is None:
        looks = _LOOKS[key] = getattr(widget, name)
    return looks


@contextlib.contextmanager
def _looks_of_one_batch() -> Iterator[None]:
    """What `_looked_up` reads holds for the batch in this block, and is forgotten after it (nothing kept alive)."""
    _LOOKS.clear()
    try:
        yield
    finally:
        _LOOKS.clear()


def _content_lines(widget: Widget, width: int, height: int | None = None) -> list[Strip]:
    """What `widget`'s content draws to at `width` (and `height`; None: as many lines as it wraps to), as
    Visual.to_strips draws it for a stamp: no selection (a stamp has none), links styled (and, unlike
    to_strips, also while the user drags a selection on screen: these lines outlive the drag), the link style
    looked up once a batch (`_looked_up`)."""
    style = widget.visual_style
    # The styles object is what Textual passes as the rules too (to_strips): typed as a RulesMap, it reads as one.
    options = RenderOptions(widget._get_style, cast("RulesMap", widget.styles), None, None)
    strips = widget._render().render_strips(width, height, style, options)
    if widget.auto_links and not widget.is_container:
        link_style = _looked_up(widget, "link_style")
        strips = [strip._apply_link_style(link_style) for strip in strips]
    content_align = widget.styles.content_align
    if content_align != ("left", "top"):
        rich_style = (style + VisualStyle(reverse=False)).rich_style
        horizontal, vertical = content_align
        size = len(strips) if height is None else height
        strips = list(Strip.align(strips, rich_style, width, size, horizontal, vertical))
    return strips


def _render_at(widget: Widget, size: Size, content: list[Strip] | None = None) -> list[Strip]:
    """`widget` drawn at `size`, as Widget.render_lines draws it at the size of its region (`content`: its
    content's lines at that size, if they are drawn already)."""
    styles = widget.styles
    gutter = styles.gutter
    content_size = Size(max(0, size.width - gutter.width), max(0, size.height - gutter.height))
    visual_style = widget.visual_style
    strips = content if content is not None else _content_lines(widget, content_size.width, content_size.height)
    blank = Strip.blank(content_size.width, visual_style.rich_style)

    def content_line(y: int) -> Strip:
        return strips[y] if 0 <= y < len(strips) else blank

    base_background, background = _looked_up(widget, "background_colors")
    title = widget._border_title
    subtitle = widget._border_subtitle
    _STYLES_CACHE.clear()
    # And the line of background and side borders it keeps for a widget's plain rows, which clear() leaves (as
    # render_widget does): else one widget's padding rows came out in another's colours, an earlier theme's too.
    _STYLES_CACHE._simple_strip = None
    return _STYLES_CACHE.render(
        styles,
        size,
        base_background,
        background,
        content_line,
        widget.get_line_filters(),
        None if title is None else (title, *widget._get_title_style_information(base_background)),
        None if subtitle is None else (subtitle, *widget._get_subtitle_style_information(base_background)),
        content_size=content_size,
        padding=styles.padding,
        crop=size.region,
        opacity=widget.opacity,
        ansi_theme=widget.app.ansi_theme,
        native_ansi=widget.app.native_ansi_color,
    )


def _compose(widget: Widget, size: Size) -> list[Strip] | None:
    """`widget` and its children drawn at `size`, where Textual's own arrangement of them places them, as the
    screen's compositor draws them (each widget at its region, clipped to its parent's content); or None if it
    would need more of a compositor: a child that scrolls sideways, overlaps, or sits on a layer or an offset
    of its own (the block is then a widget).

    Textual is pinned (pyproject): this follows Compositor.add_widget. A private compositor did this before,
    and also mapped and clipped every widget, drew each container's every line and cut the lines up to lay
    them over each other: a list of two items cost 6-16 % more, a code block up to 19 % (side by side in one
    process, three runs)."""
    if not widget.is_container:
        return _render_at(widget, size)
    styles = widget.styles
    gutter = styles.gutter
    inner = Size(size.width - gutter.width, size.height - gutter.height)
    children = widget.displayed_children
    if (
        inner.width <= 0
        or widget._cover_widget is not None
        or widget.scrollbar_size_vertical
        or widget.scrollbar_size_horizontal
        or any(child.styles.has_rule("offset") for child in children)
    ):
        return None
    arranged = widget.arrange(inner)  # as the compositor arranges it (a bullet's height is its row's)
    if arranged.total_region.right > inner.width and styles.overflow_x != "hidden":
        return None  # it scrolls sideways: a widget
    # A container's own lines, behind its children (one drawn and repeated, if they are all alike: rows.py).
    lines = _render_at(widget, Size(size.width, 1)) * size.height if lines_alike(widget) else _render_at(widget, size)
    left, top = gutter.left, gutter.top
    right, bottom = size.width - gutter.right, size.height - gutter.bottom
    for placement in arranged.placements:
        child = placement.widget
        if placement.fixed or placement.overlay or placement.absolute or child.layer != "default":
            return None
        if child.styles.get_rule("visibility") == "hidden":
            continue
        region = placement.region
        drawn = _compose(child, region.size)
        if drawn is None:
            return None
        x = left + region.x
        start, end = max(x, left), min(x + region.width, right)  # clipped to the content region, as on screen
        if start >= end:
            continue
        for row, strip in enumerate(drawn, top + region.y):
            if top <= row < bottom:
                line = lines[row]
                piece = strip.crop(start - x, end - x)
                lines[row] = Strip.join([line.crop(0, start), piece, line.crop(end, size.width)])
    return lines


def _free(widget: Widget, *, least_height: bool = False) -> bool:
    """Whether `widget` has no size limits (but a least height, if `least_height`), no offset, and shows."""
    styles = widget.styles
    return (
        styles.min_width is None
        and styles.max_width is None
        and (least_height or styles.min_height is None)
        and styles.max_height is None
        and not styles.has_rule("offset")
        and styles.get_rule("visibility") != "hidden"
    )


def _bare(widget: Widget) -> bool:
    """Whether `widget` has nothing around it: no margin, border or padding."""
    styles = widget.styles
    return not styles.margin and not styles.gutter


def _flat(widget: Widget, *, margin: bool = False, gutter: bool = False) -> bool:
    """Whether `widget` takes its parent's whole width and its content's height, with nothing around it: no
    margin (unless `margin`: the caller places it), border or padding (unless `gutter`: drawn with it), no size
    limits, no offset, shown. Inside a list, Textual's CSS makes each part so (MarkdownList, its rows'
    Horizontal and Vertical, the paragraphs in an item); a theme or stylesheet that changes that sends the list
    through _compose."""
    styles = widget.styles
    width, height = styles.width, styles.height
    return (
        (margin or not styles.margin)
        and (gutter or not styles.gutter)
        and width is not None
        and width.is_fraction
        and width.value == 1
        and height is not None
        and height.is_auto
        and _free(widget)
    )


def _list_lines(stamp: Widget, width: int, *, nested: bool = False) -> list[Strip] | None:
    """A list stamp drawn at `width`: rows of a bullet beside a column of blocks, as MarkdownBulletList and
    MarkdownOrderedList compose them. None if a part of it is not as Textual's CSS makes it (see `_flat`), or
    an item holds a block other than a paragraph or a list (a code block): then _compose draws it.

    The parts are placed here as Textual's layouts place them: each row as tall as its column, the bullet as
    wide as its symbol and as tall as its row, the column the rest of the width, its blocks one under another
    (no margins between them, as _flat asks). Arranged through Textual's box models (two passes over every
    part: one for its height, one at its size), a list of two items cost five times as much, and lists are
    the commonest block in a model's answers after paragraphs. The lines are tested cell by cell against the
    widgets' (tests/test_stream_render.py)."""
    if width <= 0 or not isinstance(stamp, MarkdownList) or not _flat(stamp, margin=not nested):
        return None
    lines: list[Strip] = []
    for row in stamp.displayed_children:
        parts = row.displayed_children
        if len(parts) != 2 or not _flat(row) or row.styles.layout is None or row.styles.layout.name != "horizontal":
            return None
        bullet, column = parts
        bullet_width_rule = bullet.styles.width
        if (
            not isinstance(bullet, MarkdownBullet)
            or not _bare(bullet)
            or bullet_width_rule is None
            or not bullet_width_rule.is_auto
            or bullet.styles.height is not None  # no rule: as tall as its row
            or not _free(bullet)
            or not _flat(column)
        ):
            return None
        bullet_width = bullet.get_content_width(Size(width, 0), bullet.app.size)  # as for its `width: auto`
        column_width = width - bullet_width
        if column_width <= 0:
            return None
        column_lines: list[Strip] = []
        for block in column.displayed_children:
            if isinstance(block, MarkdownList):
                drawn = _list_lines(block, column_width, nested=True)
            elif not block.children and _flat(block):
                content = _content_lines(block, column_width)
                drawn = _render_at(block, Size(column_width, len(content)), content)
            else:
                drawn = None
            if drawn is None:
                return None
            column_lines.extend(drawn)
        if not column_lines:
            return None  # an empty item: its height is Textual's to decide
        bullets = _render_at(bullet, Size(bullet_width, len(column_lines)))
        lines.extend(Strip.join([mark, line]) for mark, line in zip(bullets, column_lines, strict=True))
    return lines


def _fence_lines(stamp: Widget, width: int) -> list[Strip] | None:
    """A code block's stamp drawn at `width`: its frame (border, title, padding) around its code's Label. None
    if a part is not as CodeFence's CSS makes it (a Label of the frame's whole width and its code's height,
    with nothing around it), or if the code is wider than the frame: it scrolls, so it is a widget.

    As for lists (`_list_lines`), arranging it through Textual's box models was a third of its cost."""
    if not isinstance(stamp, MarkdownFence) or not _flat(stamp, margin=True, gutter=True):
        return None
    parts = stamp.displayed_children
    if len(parts) != 1 or not isinstance(parts[0], Label):
        return None
    label, gutter = parts[0], stamp.styles.gutter
    label_styles = label.styles
    if (
        not _bare(label)
        or label_styles.width is None
        or not label_styles.width.is_auto
        or label_styles.height is None
        or not label_styles.height.is_auto
        or not _free(label, least_height=True)
    ):
        return None
    least = label_styles.min_height  # a Label's CSS gives it a line at least (an empty code block shows one)
    if least is not None and least.unit != Unit.CELLS:
        return None
    inner = width - gutter.width
    if inner <= 0 or label.get_content_width(Size(inner, 0), label.app.size) > inner:
        return None  # wider than the frame (or not expanded to it, as the CSS has it)
    code = _content_lines(label, inner)
    lines = _render_at(label, Size(inner, max(len(code), int(least.value) if least else 0)), code)
    return _render_at(stamp, Size(width, len(lines) + gutter.height), lines)


# --------------------------------------------------------------------------- parsed blocks, light


class _LightId:
    """A light block's `id`: Textual's parse names each heading, and the DOM's setter would update a node list
    it does not have."""

    def __get__(self, block: Any, kind: type | None = None) -> str | None:
        return None if block is None else cast("str | None", block.__dict__.get("_id"))

    def __set__(self, block: Any, value: str) -> None:
        block.__dict__["_id"] = value


def _light_init(self: MarkdownBlock, markdown: Markdown, token: Token, *args: Any) -> None:
    """What the pinned Textual's MarkdownBlock, MarkdownListItem and MarkdownFence set in `__init__` (their
    own parts), without the widget's: a stamp draws the block (`_apply` reads these), no one mounts it."""
    self._markdown_ref = weakref.ref(markdown)
    self._content = Content()
    self._token = token
    self._blocks = []
    self._inline_token = None
    self.source_range = (token.map[0], token.map[1]) if token.map is not None else (0, 0)
    self._classes = {f"level-{token.level}"}
    if isinstance(self, MarkdownListItem):
        self.bullet = args[0]
    elif isinstance(self, MarkdownFence):
        app = markdown.app
        self.code, self.lexer = args[0], token.info
        dark = app.current_theme.dark
        self._highlighted_code = self.highlight(self.code, self.lexer, ansi=app.native_ansi_color, dark=dark)


def _light_set_content(self: MarkdownBlock, content: Content) -> None:
    self._content = content


_LIGHT: dict[type[MarkdownBlock], type[MarkdownBlock]] = {}


def _light(kind: type[MarkdownBlock]) -> type[MarkdownBlock]:
    """A class that parses as `kind` (Textual's parse tells blocks apart by isinstance: a nested list's bullets)
    and builds only what drawing a block needs: no widget (a knot of styles, node lists and signals).

    A streamed reply parses its tail again at each batch, and all but the blocks that stay widgets are only
    drawn: building them as widgets was most of the parse's cost (`MarkdownBlock.__init__`, 0.26 s of 0.42 s
    at 20,000 tokens and 10,000 tok/s), and each left cycles for the collector."""
    light = _LIGHT.get(kind)
    if light is None:
        members = {"__init__": _light_init, "set_content": _light_set_content, "id": _LightId(), "light_of": kind}
        light = _LIGHT[kind] = cast("type[MarkdownBlock]", type(kind.__name__, (kind,), members))
    return light


def kind_of(block: MarkdownBlock) -> type[MarkdownBlock]:
    """The block widget class `block` stands for (itself, or the class a light block parsed as)."""
    return cast("type[MarkdownBlock]", getattr(type(block), "light_of", type(block)))


def realized(block: MarkdownBlock) -> MarkdownBlock:
    """A block widget of `block` (itself, if it is one): what Textual's parse would have built for it."""
    kind = kind_of(block)
    if kind is type(block):
        return block
    markdown, token = block._markdown, block._token
    widget: MarkdownBlock
    if issubclass(kind, MarkdownFence):
        widget = kind(markdown, token, cast(MarkdownFence, block).code)
    elif issubclass(kind, MarkdownListItem):
        widget = kind(markdown, token, cast(MarkdownListItem, block).bullet)
    else:
        widget = kind(markdown, token)
    widget.source_range = block.source_range
    if block._inline_token is not None:
        widget._inline_token = block._inline_token
        widget.set_content(block._content)
    widget._blocks = [realized(part) for part in block._blocks]
    return widget


# --------------------------------------------------------------------------- stamps


def shape(block: MarkdownBlock) -> tuple[Any, ...] | None:
    """What a stamp must match to draw `block` (its widget classes and structure), or None: draw it as a widget
    (a table: its grid lines are drawn from the screen's regions; a block of a kind not known here)."""
    kind = kind_of(block)
    if isinstance(block, MarkdownTable) or kind not in _DRAWABLE:
        return None
    classes = tuple(sorted(block.classes))
    if isinstance(block, MarkdownFence):
        return (kind, classes)
    if isinstance(block, MarkdownList):
        items = []
        for item in block._blocks:
            if not isinstance(item, MarkdownListItem):
                return None
            children = tuple(shape(child) for child in item._blocks)
            if None in children:
                return None
            items.append(children)
        return (kind, classes, tuple(items))
    children = tuple(shape(child) for child in block._blocks)
    return None if None in children else (kind, classes, children)


def _list_symbols(block: MarkdownList) -> list[str]:
    """The bullets MarkdownBulletList / MarkdownOrderedList.compose give the items."""
    items = [item for item in block._blocks if isinstance(item, MarkdownListItem)]
    if not isinstance(block, MarkdownOrderedList):
        return [item.bullet for item in items]
    suffix, start = ". ", 1
    if items:
        with contextlib.suppress(ValueError):
            start = int(items[0].bullet)
    numbers = range(start, start + len(items))
    size = max((len(f"{number}{suffix}") for number in numbers), default=0)
    return [f"{number}{suffix}".rjust(size + 1) for number in numbers]


def _apply(stamp: Widget, block: MarkdownBlock) -> None:
    """Make `stamp` (of the same shape) show `block`, as Markdown's own in-place updates do."""
    if isinstance(block, MarkdownFence):
        assert isinstance(stamp, MarkdownFence)
        stamp._copy_context(block)
        _set_content(stamp, block._highlighted_code)
    elif isinstance(block, MarkdownList):
        items = [item for item in block._blocks if isinstance(item, MarkdownListItem)]
        for row, item, symbol in zip(stamp.children, items, _list_symbols(block), strict=True):
            bullet, column = row.children
            assert isinstance(bullet, MarkdownBullet)
            bullet.symbol = symbol
            for child, part in zip(column.children, item._blocks, strict=True):
                _apply(child, part)
    elif block._blocks:
        for child, part in zip(stamp.children, block._blocks, strict=True):
            _apply(child, part)
    else:
        assert isinstance(stamp, MarkdownBlock)
        stamp._token = block._token
        _set_content(stamp, block._content)


def _set_content(stamp: MarkdownBlock, content: Content) -> None:
    """MarkdownBlock.set_content without its layout request: a stamp is hidden, yet a layout it asks for is one
    of the whole screen, each batch, for nothing on it (20-80 ms a frame on a slow machine)."""
    stamp._content = content
    if isinstance(stamp, MarkdownFence):
        with contextlib.suppress(NoMatches):  # as MarkdownFence.set_content: not composed yet
            stamp.query_one("#code-content", Label).update(content, layout=False)
    else:
        stamp.update(content, layout=False)


def _forget_layout(widget: Widget) -> None:
    """Drop what `widget` and its descendants remember of their last layout: the stamp shows new content now,
    and the screen (which never lays stamps out) will not do it for us."""
    for node in widget.walk_children(Widget, with_self=True):
        node._layout_updates += 1
        node._layout_cache.clear()
        node._clear_arrangement_cache()
        node.clear_cached_dimensions()


def _dispose(block: MarkdownBlock) -> None:
    """Free a parsed, never mounted block (and its parts) at once, rather than at the next full collection.

    Every widget is a knot of reference cycles (its styles, node list and signals point back at it): about 65
    objects a widget that only the cyclic collector frees. Blocks parsed only to be drawn are light (`_light`)
    and hold none; this is for the batch that starts drawing, whose blocks were parsed as widgets. Drawn blocks
    left as widgets were 80,000 of the 155,000 objects the full collection after a 20,000-token reply went
    through (bench/stream_render.py's reply; docs/architecture.md). Emptying the widget's attributes cuts every
    cycle through it; what it held goes as its count falls."""
    for part in block._blocks:
        _dispose(part)
    block.__dict__.clear()


class Drawer:
    """Draws parsed blocks (widgets not mounted) through stamps: hidden block widgets at the front of the
    Markdown itself, one per shape. In the same parent as the blocks they stand for, they get the same CSS;
    hidden, the layout skips them and nothing mounted beside them restyles them; in front of every block
    shown, none of them is the last child."""

    def __init__(self, markdown: ReplyMarkdown) -> None:
        self.markdown = markdown
        self.stamps: OrderedDict[tuple[Any, ...], MarkdownBlock] = OrderedDict()
        # Each stamp's shape, as its block had it unmounted: mounted, a block's parts move into its children
        # (Textual's compose empties its _blocks), so that a block drawn after it became a stamp (`prepare`)
        # would no longer show its shape.
        self._forms: dict[MarkdownBlock, tuple[Any, ...]] = {}
        self._blank: tuple[object, Strip] | None = None

    def adopt(self, widget: MarkdownBlock, form: tuple[Any, ...] | None) -> bool:
        """Keep a block widget that was shown as the stamp for its shape, if there is none yet."""
        if form is None or form in self.stamps:
            return False
        widget.display = False
        self.stamps[form] = widget
        self._forms[widget] = form
        return True

    async def prepare(self, blocks: list[MarkdownBlock]) -> None:
        """Stamps for the shapes among `blocks` that have none yet (the first block of each is its stamp), mounted
        in one go: a batch often brings several new shapes (a reply's first ones all do), and a mount awaited for
        each let a layout and a frame in between, 10-40 ms a stamp (bench/stream_render.py)."""
        new: dict[tuple[Any, ...], MarkdownBlock] = {}
        for block in blocks:
            form = shape(block)
            if form is None or form in new:
                continue
            if form in self.stamps:
                self.stamps.move_to_end(form)  # used by this batch: not the one to drop for a new shape
            else:
                stamp = realized(block)
                stamp.display = False
                new[form] = stamp
        if not new:
            return
        markdown = self.markdown
        excess = max(0, min(len(self.stamps), len(self.stamps) + len(new) - STAMPS))
        if excess:  # the least recently used go
            old = [self.stamps.popitem(last=False)[1] for _ in range(excess)]
            for stamp in old:
                del self._forms[stamp]
            await markdown.remove_children(old)
        self.stamps.update(new)
        self._forms.update((block, form) for form, block in new.items())
        await markdown.mount_all(new.values(), before=markdown.children[0] if markdown.children else None)

    async def stamp(self, block: MarkdownBlock, form: tuple[Any, ...]) -> MarkdownBlock:
        """A stamp of `form` showing `block` (mounted by `prepare` if its shape is new)."""
        if form not in self.stamps:
            await self.prepare([block])
        stamp = self.stamps[form]
        self.stamps.move_to_end(form)
        if stamp is not block:
            _apply(stamp, block)
        _forget_layout(stamp)
        return stamp

    def done_with(self, blocks: list[MarkdownBlock]) -> None:
        """`blocks` are drawn and will not be used again: their reference cycles are broken (`_dispose`), but for
        the ones kept as stamps."""
        for block in blocks:
            if block not in self._forms and kind_of(block) is type(block):  # a light block holds no cycle
                _dispose(block)

    @property
    def width(self) -> int:
        markdown = self.markdown
        return markdown.outer_size.width - markdown.styles.gutter.width

    def blank(self) -> Strip:
        """A line of the Markdown's own background: what shows between and beside blocks."""
        key = (self.width, drawing_key(self.markdown))
        if self._blank is None or self._blank[0] != key:
            self._blank = (key, _render_at(self.markdown, Size(self.width, 1))[0])
        return self._blank[1]

    async def draw(self, block: MarkdownBlock) -> Drawn | None:
        """`block` as lines, or None if it has to be a widget (no stamp fits it, or it scrolls sideways)."""
        form = self._forms.get(block) or shape(block)
        width = self.width
        if form is None or width <= 0:
            return None
        stamp = await self.stamp(block, form)
        styles = stamp.styles
        margin = styles.margin
        app = self.markdown.app
        listed = _list_lines(stamp, width - margin.width)
        if listed is None:
            listed = _fence_lines(stamp, width - margin.width)
        if listed is not None:
            return self._placed(listed, width - margin.width, margin)
        content = None
        if not stamp.children:
            # A leaf's text wrapped once, at the width a block as wide as the Markdown has inside: for its lines,
            # and for its height, which the box model below then takes from Textual's own cache (keyed by that
            # width: if the box model asks at another, it wraps the text itself). Wrapped twice, it was a third
            # of a paragraph's cost.
            inner = width - margin.width - styles.gutter.width
            if inner > 0:
                content = _content_lines(stamp, inner)
                stamp._content_height_cache = (inner, len(content))
        # As the vertical layout sizes a block of its Markdown (the height does not matter: blocks are auto).
        container, margins = Size(width, app.size.height), Size(margin.width, margin.height)
        (box,) = resolve_box_models([styles.height], [stamp], container, app.size, margins, "height")
        size = Size(int(box.width), int(box.height))
        if not stamp.children:
            # A paragraph, a heading, a rule: a widget alone, drawn as _compose would draw it at
            # `size`, without laying out a tree of one (a third of each such block's cost, bench/stream_render.py).
            gutter = styles.gutter
            if content is not None and size != Size(inner + gutter.width, len(content) + gutter.height):
                content = None  # sized otherwise (a min-height, a fixed width): drawn at that size
            return self._placed(_render_at(stamp, size, content), size.width, margin)
        composed = _compose(stamp, size)
        if composed is None:
            return None  # it scrolls sideways (a code line too long for the reply): a widget
        return self._placed(composed, size.width, margin)

    def _placed(self, rows: list[Strip], block_width: int, margin: Spacing) -> Drawn:
        """A block's rows (`block_width` wide) with the Markdown's background in its side margins."""
        blank = self.blank()
        left, right = blank.crop(0, margin.left), blank.crop(margin.left + block_width, self.width)
        return Drawn([Strip.join([left, row, right]) for row in rows], margin.top, margin.bottom)


# --------------------------------------------------------------------------- the reply's Markdown


class ReplyMarkdown(Markdown):
    """A reply's Markdown. Streamed text arrives through `stream`: the last block is parsed again with what
    arrived (as Textual's `append`, without joining and splitting the whole document each time); past DRAW_FROM
    blocks, blocks are drawn (see the module's docstring), the last one too once `end_stream` ends the stream."""

    BLOCKS: dict[str, type[MarkdownBlock]] = {**Markdown.BLOCKS, "fence": CodeFence, "code_block": CodeFence}

    def __init__(self, markdown: str | None = None, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(markdown, id=id, classes=classes, parser_factory=parser)
        self._parser = parser()
        self._tail: str | None = None  # the source from the last top-level block on: what a stream re-parses
        self._drawer: Drawer | None = None
        self._run: FrozenBlocks | None = None  # where finished blocks are drawn to
        self._live: FrozenBlocks | None = None  # the growing block, drawn
        self._live_widget: MarkdownBlock | None = None  # or, if it cannot be drawn, the growing block's widget
        self._trimmed: tuple[DockArrangeResult, DockArrangeResult] | None = None  # see arrange
        self._parsing_light = False  # see `_parsed`

    def render_lines(self, crop: Region) -> list[Strip]:
        return repeated_line(self, crop) or super().render_lines(crop)

    def get_block_class(self, block_name: str) -> type[MarkdownBlock]:
        kind = super().get_block_class(block_name)
        return _light(kind) if self._parsing_light else kind

    def _parsed(self, tokens: list[Token], *, light: bool) -> list[MarkdownBlock]:
        """The blocks of `tokens`, unmounted; `light`: blocks only to be drawn (see `_light`)."""
        self._parsing_light = light
        try:
            return list(self._parse_markdown(tokens))
        finally:
            self._parsing_light = False

    def _batch(self) -> contextlib.AbstractContextManager[None]:
        return batch_update(self)

    def arrange(self, size: Size, optimal: bool = False) -> DockArrangeResult:
        """Textual's arrangement, but the last block's bottom margin ends with it: the space after a run of text
        is the next thing's margin (a tool block, the footer), not two blank lines where a paragraph's margin
        meets it. A `MarkdownBlock:last-child` rule did this: any such rule leaves every block's styles out of
        Textual's cache and restyles a block's siblings at each mount (a third of a reply's first batches)."""
        arranged = super().arrange(size, optimal)  # cached by Textual, and dropped when the layout changes
        if self._trimmed is not None and self._trimmed[0] is arranged:
            return self._trimmed[1]
        trimmed, placements = arranged, arranged.placements
        last = next((n for n in range(len(placements) - 1, -1, -1) if not placements[n].overlay), None)
        if last is not None and placements[last].margin.bottom:
            top, right, _, left = placements[last].margin
            placements = [*placements]
            placements[last] = placements[last]._replace(margin=Spacing(top, right, 0, left))
            trimmed = DockArrangeResult(placements, arranged.widgets, arranged.scroll_spacing)
        self._trimmed = (arranged, trimmed)
        return trimmed

    def update(self, markdown: str) -> AwaitComplete:
        self._tail, self._drawer = None, None  # Textual's update removes every block, stamps too
        self._run = self._live = self._live_widget = None
        drawn = self.query_children(FrozenBlocks)
        if drawn:
            drawn.remove()  # Textual's update replaces the MarkdownBlocks only
        return super().update(markdown)

    async def stream(self, fragment: str) -> None:
        """Append `fragment` to the document (once mounted: `await mount(...)` has built the first blocks)."""
        async with self.lock:
            with _looks_of_one_batch():
                if self._tail is None:
                    self._tail = "".join(self._markdown.splitlines(keepends=True)[self._last_parsed_line :])
                self._markdown += fragment
                self._tail += fragment
                self._table_of_contents = None
                tail_lines, first_line = self._tail.splitlines(keepends=True), self._last_parsed_line
                blocks, starts = self._parse_tail(tail_lines, light=self._drawer is not None)
                if self._drawer is None:
                    shown = sum(isinstance(child, MarkdownBlock) for child in self.children)
                    if shown + len(blocks) - 1 > DRAW_FROM:  # the last block shown takes the first one parsed
                        await self._start_drawing(first_line)
                if self._drawer is None:
                    await self._append_widgets(blocks)
                else:
                    await self._draw(blocks, starts, tail_lines, first_line)

    def _parse_tail(self, tail_lines: list[str], *, light: bool) -> tuple[list[MarkdownBlock], list[int]]:
        """The blocks in the tail (not mounted; `light`: to be drawn) and the line each starts on (within the
        tail); moves the tail on to the last block. `tail_lines`: the tail split into lines (kept ends), as the
        caller has it already."""
        assert self._tail is not None
        tokens = self._parser.parse(self._tail)
        start_line = self._last_parsed_line
        blocks = self._parsed(tokens, light=light)
        starts = [block.source_range[0] for block in blocks]
        for block in blocks:
            start, end = block.source_range
            block.source_range = (start + start_line, end + start_line)
        for token in reversed(tokens):
            if token.map is not None and token.level == 0:
                if token.map[0]:
                    self._last_parsed_line += token.map[0]
                    self._tail = "".join(tail_lines[token.map[0] :])
                break
        return blocks, starts

    async def _append_widgets(self, new_blocks: list[MarkdownBlock]) -> None:
        """Textual's append: the last block widget takes the first block parsed, the others are mounted."""
        last = self.children[-1] if self.children else None
        with self._batch():
            if isinstance(last, MarkdownBlock) and new_blocks:
                last.source_range = new_blocks[0].source_range
                try:
                    await last._update_from_block(new_blocks[0])
                except IndexError:  # as Textual's append: a block that cannot take the update stays
                    pass
                else:
                    new_blocks = new_blocks[1:]
            if new_blocks:
                await self.mount_all(new_blocks)

    async def _start_drawing(self, first_line: int) -> None:
        """From widgets to drawn blocks: the finished blocks shown so far (the text before `first_line`) are
        drawn too, their widgets kept hidden as the first stamps (so the switch mounts nothing new), the others
        removed."""
        if self.outer_size.width <= 0:
            await laid_out(self)  # mounted, not laid out yet: drawing needs the width
            if self.outer_size.width <= 0:
                return
        drawer = self._drawer = Drawer(self)
        widgets = [child for child in self.children if isinstance(child, MarkdownBlock)]
        lines = self._markdown.splitlines(keepends=True)[:first_line]
        blocks = self._widgets("".join(lines), 0, light=True)
        starts = [block.source_range[0] for block in blocks] + [first_line]
        with self._batch():
            self._live = FrozenBlocks()
            await self.mount(self._live)
            gone = widgets[-1:]  # the growing block: its shape is still changing
            finished = widgets[:-1] if len(widgets) - 1 == len(blocks) else []
            for widget, block in zip(finished, blocks, strict=False):
                if not drawer.adopt(widget, shape(block)):
                    gone.append(widget)
            gone.extend(widget for widget in widgets[:-1] if widget not in finished)
            await drawer.prepare(blocks)
            for index, block in enumerate(blocks):
                start, end = starts[index], starts[index + 1]
                await self._freeze(await drawer.draw(block), "".join(lines[start:end]), start)
            await self.remove_children(gone)

    async def _draw(self, blocks: list[MarkdownBlock], starts: list[int], lines: list[str], first_line: int) -> None:
        """Draw the finished blocks onto the run and the growing one as the live block (`lines`: the tail they
        were parsed from, starting at `first_line`; `starts`: where each block starts in it)."""
        drawer = self._drawer
        assert drawer is not None
        if not blocks:
            return
        # Draw first (new shapes mount stamps: hidden, nothing on screen changes), then show it all at once.
        await drawer.prepare(blocks)
        finished = []
        for index, block in enumerate(blocks[:-1]):
            start, end = starts[index], starts[index + 1]
            finished.append((await drawer.draw(block), "".join(lines[start:end]), first_line + start))
        live = await drawer.draw(blocks[-1])
        drawer.done_with(blocks)  # parsed as widgets if this batch is the one that started drawing
        run, key = self._run, (drawer.width, drawing_key(self))
        if (
            live is not None
            and self._live is not None
            and self._live_widget is None
            and all(drawn is not None for drawn, _, _ in finished)
            and (not finished or (run is not None and run.drawn_for == key and len(run.lines) < RUN_LINES))
        ):
            # The usual batch: nothing to mount or remove, so no await, and no frame can fall in between.
            blank = drawer.blank()
            for drawn, source, _ in finished:
                assert run is not None and drawn is not None
                run.extend(drawn, blank)
                run.source_text += source
            self._live.show(live.lines, live.margin_top, live.margin_bottom, key)
            return
        with self._batch():
            for drawn, source, start in finished:
                await self._freeze(drawn, source, start)
            await self._show_live(live)

    def _widgets(self, source: str, first_line: int, *, light: bool = False) -> list[MarkdownBlock]:
        """Fresh block widgets for `source` (the parsed ones may be stamps by now), or light blocks to draw."""
        blocks = self._parsed(self._parser.parse(source), light=light)
        for block in blocks:
            start, end = block.source_range
            block.source_range = (start + first_line, end + first_line)
        return blocks

    async def _freeze(self, drawn: Drawn | None, source: str, first_line: int) -> None:
        """A finished block (`source`, starting at `first_line`): drawn onto the run, or a widget for good."""
        drawer = self._drawer
        assert drawer is not None
        live_widget, self._live_widget = self._live_widget, None
        if drawn is None:
            widgets = self._widgets(source, first_line)
            if live_widget is not None and widgets and type(live_widget) is type(widgets[0]):
                await live_widget._update_from_block(widgets[0])  # a table takes its last rows in place
                widgets = widgets[1:]
            elif live_widget is not None:
                await live_widget.remove()
            if widgets:
                await self.mount_all(widgets, before=self._live)
            self._run = None  # what follows starts a new run, below the widget
            return
        if live_widget is not None:
            await live_widget.remove()
        key = (drawer.width, drawing_key(self))
        run = self._run
        if run is None or run.drawn_for != key or len(run.lines) >= RUN_LINES:
            run = self._run = FrozenBlocks()
            run.drawn_for = key
            await self.mount(run, before=self._live)
        run.extend(drawn, drawer.blank())
        run.source_text += source

    async def _show_live(self, drawn: Drawn | None) -> None:
        """The growing block: drawn (most blocks), or a widget updated in place (a table)."""
        drawer = self._drawer
        assert drawer is not None and self._tail is not None
        if drawn is None:
            if self._live is not None:
                await self._live.remove()
                self._live = None
            widgets = self._widgets(self._tail, self._last_parsed_line)
            widget = self._live_widget
            if widget is not None and widgets and type(widget) is type(widgets[0]):
                await widget._update_from_block(widgets[0])
            else:
                if widget is not None:
                    await widget.remove()
                self._live_widget = widgets[0] if widgets else None
                if widgets:
                    await self.mount_all(widgets)
            return
        if self._live_widget is not None:
            await self._live_widget.remove()
            self._live_widget = None
        if self._live is None:
            self._live = FrozenBlocks()
            await self.mount(self._live)
        self._live.show(drawn.lines, drawn.margin_top, drawn.margin_bottom, (drawer.width, drawing_key(self)))

    async def end_stream(self) -> None:
        """The stream is over: a drawn last block stays as it is drawn, a finished block like the others (a
        redraw parses its source again). Made a widget instead, it was parsed once more, its drawing removed and
        the widget mounted, all inside the frame that ends the turn: 1.5-1.8 ms of the 4-5 the turn's end takes
        before it paints, and a new widget's layout in that paint. At 400 tokens and 200 tok/s the reply showed
        whole 15 ms after the last byte, Textual's get_stream pattern 13 (bench/stream_render.py, 9 alternating
        rounds); 12 without it. What it gave: mouse selection in that one block, the only one of a drawn reply
        that had it."""
        async with self.lock:
            if self._live is not None and self._tail is not None:
                self._live.source_text = self._tail
                self._live = None

    async def redraw(self, frozen: FrozenBlocks) -> None:
        """Draw a run again, at the width and in the theme there are now (or, if a block in it can no longer be
        drawn, make the run widgets)."""
        async with self.lock:
            with _looks_of_one_batch():
                frozen._redrawing = False
                if frozen.parent is not self or not frozen.source_text or self.outer_size.width <= 0:
                    return
                if self._drawer is None:
                    self._drawer = Drawer(self)
                drawer = self._drawer
                blocks = self._widgets(frozen.source_text, 0, light=True)
                await drawer.prepare(blocks)
                drawn = [await drawer.draw(block) for block in blocks]
                if None in drawn:
                    with self._batch():
                        await self.mount_all(self._widgets(frozen.source_text, 0), before=frozen)
                        await frozen.remove()
                    if self._run is frozen:
                        self._run = None
                    return
                whole = stacked([each for each in drawn if each is not None], drawer.blank())
                frozen.show(whole.lines, whole.margin_top, whole.margin_bottom, (drawer.width, drawing_key(self)))


# The blocks a stamp can draw (a table cannot: its grid lines are drawn from the screen's regions).
_DRAWABLE: frozenset[type] = frozenset(
    {
        *(MarkdownH1, MarkdownH2, MarkdownH3, MarkdownH4, MarkdownH5, MarkdownH6),
        *(MarkdownHorizontalRule, MarkdownParagraph, MarkdownBlockQuote, MarkdownBulletList, MarkdownOrderedList),
        CodeFence,
    }
)


async def laid_out(widget: Widget, timeout: float = 0.5) -> None:
    """Wait for the screen's next layout (done and painted), or `timeout` seconds.

    Not `call_after_refresh`: its callback can run before the layout a change asked for (a widget posts its
    layout request only when its own queue is idle).
    """
    if widget.app._batch_count:
        return  # no layout is painted inside App.batch_update: the caller goes on without one
    done = asyncio.get_running_loop().create_future()

    def on_layout(_: object) -> None:
        if not done.done():
            done.set_result(None)

    signal = widget.screen.screen_layout_refresh_signal
    signal.subscribe(widget, on_layout, immediate=True)
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done, timeout)
    finally:
        signal.unsubscribe(widget)


# The widget classes a reply's Markdown is built from (see `learn_reply_styles`).
REPLY_WIDGETS: tuple[type[Widget], ...] = (
    ReplyMarkdown,
    FrozenBlocks,
    *ReplyMarkdown.BLOCKS.values(),
    MarkdownListItem,
    MarkdownOrderedListItem,
    MarkdownUnorderedListItem,
    MarkdownBullet,
    MarkdownTableContent,
    MarkdownTableCellContents,
    Label,
    Horizontal,  # a list's rows, and the column beside each bullet
    Vertical,
)


def learn_reply_styles(app: App[Any]) -> None:
    """On the UI thread, idle after the first screen: the DEFAULT_CSS of every widget class a reply's Markdown
    is built from, added to the app's stylesheet and parsed once. Textual adds a class's DEFAULT_CSS when its
    first widget mounts, and then parses the whole stylesheet again: six times in the first reply of a session,
    about 20 ms of its first batches (bench/stream_render.py). When those mounts come, there is nothing new."""
    stylesheet = app.stylesheet
    for kind in REPLY_WIDGETS:
        # Textual's own list, as it makes it for a widget of this class (its bases' CSS, where each comes from):
        # the same sources, so that the mount finds them there already.
        node = cast(DOMNode, SimpleNamespace(_node_bases=kind._css_bases(kind)))
        for read_from, css, tie_breaker, scope in DOMNode._get_default_css(node):
            stylesheet.add_source(css, read_from=read_from, is_default_css=True, tie_breaker=tie_breaker, scope=scope)
    stylesheet.rules_map  # noqa: B018 (parsed now, not in a reply's first batches)


# A little of what models write, links and file names included, parsed once by `warm_up_markdown`.
WARM_UP_TEXT = (
    "## A heading\n\nA paragraph with **bold**, `code`, a file like setup.py and https://example.com/x.\n\n"
    "- a point\n\n1. a step\n\n> a quote\n\n| a | b |\n| - | - |\n| 1 | 2 |\n"
)


def warm_up_markdown() -> None:
    """On the warm-up thread (tui/app.py), what a reply's first batches would otherwise pay for on the UI thread:
    - the first parse compiles the regular expressions of markdown-it's rules and of linkify-it (Python caches
      them for the process): a first parse of 400 tokens took 8-10 ms, 2.3-2.5 ms after this;
    - the lexers of COMMON_LANGUAGES: the Python lexer's import alone held a batch 29 ms longer
      (bench/stream_render.py)."""
    parser().parse(WARM_UP_TEXT)
    for language in COMMON_LANGUAGES:
        highlight("", language=language)
