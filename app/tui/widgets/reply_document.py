"""A reply's Markdown as top-level blocks and the lines they draw to: what ReplyMarkdown (markdown.py) shows.

The text is split into top-level blocks. A finished block is drawn once to lines and kept (its tokens are
dropped then: a new width parses its source again); only the block still growing is parsed and drawn again as
text arrives, so a batch costs the same at the end of a long reply as at its start. Lines are drawn for one
width and one look: either changing draws every block again.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from markdown_it.token import Token

from .markdown_blocks import EMPTY, Line, Look, block_starts, draw, parser

GAP = Line(EMPTY, EMPTY)  # the blank line between two blocks


@dataclass
class Block:
    """A finished top-level block: its Markdown, and its tokens until it is first drawn."""

    source: str
    tokens: Sequence[Token] | None


class Document:
    """The text of one reply's Markdown, its blocks, and their lines at the width last asked for."""

    def __init__(self, markdown: str = "") -> None:
        self._parser = parser()
        self.source = ""
        self._tail = ""  # the text from the growing block on: what a batch parses again
        self._blocks: list[Block] = []  # the finished blocks
        self._open: Sequence[Token] | None = None  # the growing block's tokens
        self._open_lines: list[Line] | None = None  # and its lines, once drawn
        self._sealed = False  # the stream ended: the growing block is a finished one
        self.lines: list[Line] = []  # the finished blocks' lines, the gaps between them included
        self._drawn = 0  # how many finished blocks those lines hold
        self._drawn_for: tuple[int, object] | None = None
        if markdown:
            self.take(markdown)
            self.seal()

    def take(self, fragment: str) -> None:
        """Append `fragment`: the blocks it finishes join the finished ones, the last one grows."""
        if self._sealed:  # more text after the end: the last block grows again
            self._sealed = False
            if self._blocks:
                last = self._blocks.pop()
                self._drawn_for = None  # its lines are among the finished ones: draw them all again
                self._tail = last.source
        self.source += fragment
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

    def seal(self) -> None:
        """No more text will come: the growing block is a finished one."""
        if self._sealed:
            return
        self._sealed = True
        if self._open is not None:
            self._blocks.append(Block(self._tail, self._open))
            self._open, self._open_lines = None, None
            self._tail = ""

    def ensure(self, width: int, look: Look, key: object) -> bool:
        """Lines for every block at `width` in `look` (`key`: what else they depend on): the new finished blocks
        drawn, or all of them if the width or the look changed. Whether everything was drawn again."""
        again = (width, key) != self._drawn_for
        if again:
            self._drawn_for, self.lines, self._drawn, self._open_lines = (width, key), [], 0, None
        while self._drawn < len(self._blocks):
            block = self._blocks[self._drawn]
            tokens = block.tokens if block.tokens is not None else self._parser.parse(block.source)
            block.tokens = None
            if self.lines:
                self.lines.append(GAP)
            starts = block_starts(tokens)
            self.lines.extend(draw(tokens[starts[0] :], width, look) if starts else [GAP])
            self._drawn += 1
        if self._open is not None and self._open_lines is None:
            self._open_lines = draw(self._open, width, look)
        return again

    @property
    def height(self) -> int:
        open_lines = self._open_lines or []
        return len(self.lines) + len(open_lines) + (1 if self.lines and open_lines else 0)

    def line(self, y: int) -> Line | None:
        lines = self.lines
        if y < len(lines):
            return lines[y]
        y -= len(lines) + (1 if lines else 0)
        open_lines = self._open_lines or []
        return open_lines[y] if 0 <= y < len(open_lines) else (GAP if y == -1 else None)

    def all_lines(self) -> list[Line]:
        open_lines = self._open_lines or []
        return [*self.lines, *([GAP] if self.lines and open_lines else []), *open_lines]


def _first_line(token: Token) -> int:
    assert token.map is not None
    return token.map[0]
