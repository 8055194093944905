"""Markdown blocks drawn to lines of text: what a reply's Markdown (markdown.py) shows, one block at a time.

markdown-it parses the text; each top-level block (a heading, a paragraph, a list, a quote, a table, a code
block, a rule) becomes a list of `Line`s for a width. A line has a left and a right part that only decorate
(indents, a quote's bar, a code block's frame) and a body: the text a mouse selection copies. Model text is
untrusted: every piece of it goes through `inert` before it is drawn.

File names stay file names: the parser links only links a model writes out (https://…, <…>, [text](url)), not
"fuzzy" ones such as README.md (a top-level domain). A code line wider than its frame wraps, with a mark at the
start of each continued line, so that all of it shows and a selection copies it as one line.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token
from rich.cells import get_character_cell_size
from textual.content import Content, Span
from textual.highlight import highlight
from textual.style import Style

from ...text.inert import inert

EMPTY = Content("")
BULLETS = ("•", "◦", "▪")
EMPHASIS = {"strong_open": Style(bold=True), "em_open": Style(italic=True), "s_open": Style(strike=True)}


@functools.cache
def parser() -> MarkdownIt:
    """GitHub-flavoured Markdown with explicit links only: one parser for every reply (an instance holds its
    rule chains, a few hundred kilobytes, and parsing does not change it)."""
    md = MarkdownIt("gfm-like")
    if md.linkify is not None:
        md.linkify.set({"fuzzy_link": False, "fuzzy_email": False, "fuzzy_ip": False})
    return md


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a drawn block. `join`: what joins its copied text to the line above (None: a new line; a
    space or nothing where a long line wrapped)."""

    left: Content
    body: Content
    right: Content = EMPTY
    join: str | None = None

    def indented(self, left: Content) -> Line:
        return Line(left + self.left, self.body, self.right, self.join)


@dataclass(frozen=True)
class Look:
    """The styles a block is drawn in (ReplyMarkdown's component classes, resolved for the current theme)."""

    headings: tuple[Style, Style, Style, Style, Style, Style]
    code: Style  # inline code
    link: Style
    quote: Style  # the quote's bar
    bullet: Style
    rule: Style
    frame: Style  # a code block's frame, and a table's lines
    title: Style  # a code block's language
    header: Style  # a table's header cells


def block_starts(tokens: Sequence[Token]) -> list[int]:
    """The index of each top-level block's first token."""
    return [n for n, token in enumerate(tokens) if token.level == 0 and token.nesting >= 0 and token.map is not None]


def _blocks(tokens: Sequence[Token]) -> list[Sequence[Token]]:
    """`tokens` (a run of sibling blocks) split into one token run per block."""
    blocks: list[Sequence[Token]] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        end = index
        if token.nesting == 1:
            depth = 0
            while end < len(tokens):
                depth += tokens[end].nesting
                if depth == 0:
                    break
                end += 1
        blocks.append(tokens[index : end + 1])
        index = end + 1
    return blocks


def draw(tokens: Sequence[Token], width: int, look: Look) -> list[Line]:
    """One block (its tokens, as parsed) drawn at `width` cells (at least one)."""
    width = max(width, 1)
    kind = tokens[0].type
    if kind == "paragraph_open":
        return _wrapped(_inline(tokens[1], look), width)
    if kind == "heading_open":
        level = int(tokens[0].tag[1:]) if tokens[0].tag[1:].isdigit() else 1
        style = look.headings[min(level, 6) - 1]
        lines = _wrapped(_inline(tokens[1], look).stylize(style), width)
        if level == 1:  # the title: in the middle, as Textual's Markdown shows it
            return [
                Line(Content(" " * ((width - line.body.cell_length) // 2)), line.body, EMPTY, line.join)
                for line in lines
            ]
        return lines
    if kind in ("bullet_list_open", "ordered_list_open"):
        return _list(tokens, width, look, depth=0)
    if kind == "blockquote_open":
        return _quote(tokens, width, look)
    if kind in ("fence", "code_block"):
        return _fence(tokens[0], width, look)
    if kind == "hr":
        return [Line(Content.styled("─" * width, look.rule), EMPTY)]
    if kind == "table_open":
        return _table(tokens, width, look)
    text = inert(tokens[0].content).rstrip("\n")  # html and anything else: its text as written
    return _wrapped(Content(text), width)


def draw_all(tokens: Sequence[Token], width: int, look: Look, *, gap: bool) -> list[Line]:
    """Sibling blocks one under another, a blank line between them if `gap`."""
    lines: list[Line] = []
    for number, block in enumerate(_blocks(tokens)):
        if number and gap:
            lines.append(Line(EMPTY, EMPTY))
        lines.extend(draw(block, width, look))
    return lines


# --------------------------------------------------------------------------- text


def _inline(token: Token, look: Look) -> Content:
    """An inline token's children as styled text: emphasis, code, links (a click opens them)."""
    text: list[str] = []
    spans: list[Span] = []
    opened: list[tuple[int, Style]] = []
    at = 0

    def add(piece: str, style: Style | None = None) -> None:
        nonlocal at
        piece = inert(piece)
        text.append(piece)
        if style is not None and piece:
            spans.append(Span(at, at + len(piece), style))
        at += len(piece)

    for child in token.children or []:
        kind = child.type
        if kind == "text":
            add(child.content)
        elif kind == "softbreak":
            add(" ")
        elif kind == "hardbreak":
            add("\n")
        elif kind == "code_inline":
            add(child.content, look.code)
        elif kind in ("strong_open", "em_open", "s_open", "link_open"):
            style = {"strong_open": Style(bold=True), "em_open": Style(italic=True), "s_open": Style(strike=True)}.get(
                kind
            )
            if kind == "link_open":
                href = str(child.attrs.get("href", ""))
                style = look.link + Style.from_meta({"@click": f"link({inert(href)!r})"})
            assert style is not None
            opened.append((at, style))
        elif kind in ("strong_close", "em_close", "s_close", "link_close"):
            if opened:
                start, style = opened.pop()
                if at > start:
                    spans.append(Span(start, at, style))
        elif kind == "image":
            add(child.content or str(child.attrs.get("alt", "")) or "image", Style(italic=True))
        else:  # html_inline and the like: the text as written
            add(child.content)
    return Content("".join(text), spans)


def _wrapped(content: Content, width: int) -> list[Line]:
    """`content` wrapped at `width`: each line knows what the wrap took out before it (a space, or nothing in a
    word cut in two), so that a selection copies the text as it was written."""
    lines: list[Line] = []
    for piece in content.split("\n", allow_blank=True):
        plain, cursor = piece.plain, 0
        for number, line in enumerate(piece.wrap(width) or [EMPTY]):
            found = plain.find(line.plain, cursor) if line.plain else cursor
            found = cursor if found < 0 else found
            join = None if number == 0 else plain[cursor:found]
            lines.append(Line(EMPTY, line, EMPTY, join))
            cursor = found + len(line.plain)
    return lines or [Line(EMPTY, EMPTY)]


# --------------------------------------------------------------------------- containers


def _list(tokens: Sequence[Token], width: int, look: Look, depth: int) -> list[Line]:
    ordered = tokens[0].type == "ordered_list_open"
    items = [item for item in _blocks(tokens[1:-1]) if item and item[0].type == "list_item_open"]
    if ordered:
        first = int(str(tokens[0].attrs.get("start", 1)) or 1)
        marks = [f"{number}." for number in range(first, first + len(items))]
        size = max(len(mark) for mark in marks) if marks else 0
        marks = [mark.rjust(size) + " " for mark in marks]
    else:
        marks = [f"{BULLETS[depth % len(BULLETS)]} " for _ in items]
    loose = any(t.type == "paragraph_open" and not t.hidden for t in tokens)
    lines: list[Line] = []
    for mark, item in zip(marks, items, strict=True):
        indent = len(mark)
        inner = max(width - indent, 1)
        drawn: list[Line] = []
        for number, block in enumerate(_blocks(item[1:-1])):
            if number and loose:
                drawn.append(Line(EMPTY, EMPTY))
            if block[0].type in ("bullet_list_open", "ordered_list_open"):
                drawn.extend(_list(block, inner, look, depth + 1))
            else:
                drawn.extend(draw(block, inner, look))
        if not drawn:
            drawn = [Line(EMPTY, EMPTY)]
        head, *rest = drawn
        marker = Content.styled(mark, look.bullet)
        if head.left:  # the item starts with a framed block: the mark stays out of what is copied
            lines.append(head.indented(marker))
        else:
            lines.append(Line(EMPTY, marker + head.body, head.right, head.join))
        pad = Content(" " * indent)
        lines.extend(line.indented(pad) for line in rest)
    return lines


def _quote(tokens: Sequence[Token], width: int, look: Look) -> list[Line]:
    bar = Content.styled("▌ ", look.quote)
    return [line.indented(bar) for line in draw_all(tokens[1:-1], max(width - 2, 1), look, gap=True)]


def _fence(token: Token, width: int, look: Look) -> list[Line]:
    """A code block in a frame titled with its language; a line too long for the frame wraps, marked ↪."""
    language = inert(token.info.split()[0]) if token.info.strip() else ""
    code = inert(token.content).rstrip("\n").expandtabs(4)
    inner = max(width - 4, 1)
    content = highlight(code, language=language or None) if language else Content(code)
    frame = look.frame
    title = (
        Content.assemble(("╭─ ", frame), (language, look.title), (" ", frame))
        if language and len(language) + 5 <= width
        else Content.styled("╭", frame)
    )
    top = title + Content.styled("─" * max(width - title.cell_length - 1, 0) + "╮", frame)
    lines = [Line(top, EMPTY)]
    side, mark, end = (
        Content.styled("│ ", frame),
        Content.assemble(("│", frame), ("↪", frame)),
        Content.styled("│", frame),
    )
    for row in content.split("\n", allow_blank=True):
        for number, piece in enumerate(_cut(row, inner)):
            right = Content(" " * max(inner - piece.cell_length, 0) + " ") + end
            lines.append(Line(side if number == 0 else mark, piece, right, None if number == 0 else ""))
    lines.append(Line(Content.styled("╰" + "─" * max(width - 2, 0) + "╯", frame), EMPTY))
    return lines


def _cut(line: Content, width: int) -> list[Content]:
    """`line` cut into pieces of `width` cells at most, every character kept (code: no word wrapping)."""
    if line.cell_length <= width:
        return [line]
    cuts: list[int] = []
    cells = 0
    for index, character in enumerate(line.plain):
        size = get_character_cell_size(character)
        if cells + size > width:
            cuts.append(index)
            cells = 0
        cells += size
    return line.divide(cuts)


def _table(tokens: Sequence[Token], width: int, look: Look) -> list[Line]:
    """A table: a header row, a rule under it, then the rows; columns share the width, a cell too long wraps."""
    rows: list[list[Content]] = []
    header_rows = 0
    row: list[Content] = []
    in_head = False
    for token in tokens:
        if token.type == "thead_open":
            in_head = True
        elif token.type == "thead_close":
            in_head = False
        elif token.type == "tr_open":
            row = []
        elif token.type == "tr_close":
            rows.append(row)
            header_rows += in_head
        elif token.type == "inline":
            cell = _inline(token, look)
            row.append(cell.stylize(look.header) if in_head else cell)
    columns = max((len(r) for r in rows), default=0)
    if not columns:
        return [Line(EMPTY, EMPTY)]
    for r in rows:
        r.extend([EMPTY] * (columns - len(r)))
    sizes = [max(max(r[c].cell_length for r in rows), 1) for c in range(columns)]
    room = max(width - 3 * (columns - 1), columns)
    while sum(sizes) > room:  # the widest column gives up a cell at a time
        widest = max(range(columns), key=lambda c: sizes[c])
        if sizes[widest] <= 1:
            break
        sizes[widest] -= 1
    grid = look.frame
    lines: list[Line] = []
    for number, cells in enumerate(rows):
        wrapped = [cell.wrap(size) or [EMPTY] for cell, size in zip(cells, sizes, strict=True)]
        for y in range(max(len(w) for w in wrapped)):
            parts: list[Content] = []
            for c, (pieces, size) in enumerate(zip(wrapped, sizes, strict=True)):
                piece = pieces[y] if y < len(pieces) else EMPTY
                if c:
                    parts.append(Content.styled(" │ ", grid))
                parts.append(piece + Content(" " * max(size - piece.cell_length, 0)))
            lines.append(Line(EMPTY, Content("").join(parts).rstrip(), EMPTY, None if y == 0 else " "))
        if number + 1 == header_rows:
            rule = "─┼─".join("─" * size for size in sizes)
            lines.append(Line(Content.styled(rule, grid), EMPTY))
    return lines
