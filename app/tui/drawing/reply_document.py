"""A reply's Markdown as top-level blocks and the lines they draw to: what ReplyMarkdown (markdown.py) shows.

The text is split into top-level blocks. A finished block is drawn once to lines and kept (its tokens are
dropped then: another width parses its source again); only the block still growing is parsed and drawn again
as text arrives, so a batch costs the same at the end of a long reply as at its start.

Lines are drawn for one width and one look. When either changes, a block is drawn again only when it is asked
for (on screen, or by `settle`); until then its height at the last width stands in for its height at the new
one, and drawing it corrects that. So a resize of a long reply draws what is on screen, not all of it.

Only the lines of the blocks used last are kept (KEPT_LINES in all): a block further away keeps its source and
its height, and is drawn again from its source when it is next shown. So a reply's memory does not grow with its
length beyond its text.
"""

from __future__ import annotations

import bisect
import itertools
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from markdown_it.token import Token

from .markdown_blocks import EMPTY, Line, Look, block_starts, draw, parser

GAP = Line(EMPTY, EMPTY)  # the blank line between two blocks
KEPT_LINES = 500  # the drawn lines kept, of the blocks used last: a dozen screens


@dataclass
class Block:
    """A finished top-level block: its Markdown, its tokens until it is first drawn, and its lines at the
    current width and look (None where they are not drawn yet, or not kept). `height` is exact once it has been
    drawn at the current width and look (`exact`); until then it is the height it last had."""

    source: str
    tokens: Sequence[Token] | None
    lines: list[Line] | None = None
    height: int = 1
    exact: bool = False


class Document:
    """The text of one reply's Markdown, its blocks, and their lines at the width last asked for."""

    def __init__(self, markdown: str = "") -> None:
        self._parser = parser()
        self.source = ""
        self._tail = ""  # the text from the growing block on: what a batch parses again
        self._blocks: list[Block] = []  # the finished blocks
        self._starts: list[int] | None = None  # the first line of each finished block, while the heights hold
        self._open: Sequence[Token] | None = None  # the growing block's tokens
        self._open_lines: list[Line] | None = None  # and its lines, once drawn
        self._sealed = False  # the stream ended: the growing block is a finished one
        self._drawn_for: tuple[int, object] | None = None
        self._kept: OrderedDict[int, None] = OrderedDict()  # the blocks whose lines are kept, used last at the end
        self._kept_lines = 0
        self._look: Look | None = None
        self.corrected: int | None = None  # the first line that moved since the widget last looked (a height changed)
        if markdown:
            self.take(markdown)
            self.seal()

    def take(self, fragment: str) -> None:
        """Append `fragment`: the blocks it finishes join the finished ones, the last one grows."""
        if self._sealed:  # more text after the end: the last block grows again
            self._sealed = False
            if self._blocks:
                self._forget(len(self._blocks) - 1)
                self._tail = self._blocks.pop().source
                self._starts = None
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
            self._add(Block("".join(lines[first:until]), tokens[start:following]))
        self._tail = "".join(lines[_first_line(tokens[starts[-1]]) :])
        self._open, self._open_lines = tokens[starts[-1] :], None

    def seal(self) -> None:
        """No more text will come: the growing block is a finished one."""
        if self._sealed:
            return
        self._sealed = True
        if self._open is not None:
            self._add(Block(self._tail, self._open))
            self._open, self._open_lines = None, None
            self._tail = ""

    def _add(self, block: Block) -> None:
        """A newly finished block, drawn at once if lines are being drawn (it is at the end, where a stream
        is watched)."""
        if self._starts is not None:
            self._starts.append(self.done + (1 if self._blocks else 0))
        self._blocks.append(block)
        if self._look is not None and self._drawn_for is not None:
            self._draw(block, self._drawn_for[0], self._look)
            self._keep(len(self._blocks) - 1, recent=True)

    def ensure(self, width: int, look: Look, key: object) -> bool:
        """Lines at `width` in `look` (`key`: what else they depend on): the growing block's drawn if they are not,
        and every block's marked to be drawn again if the width or the look changed (whether they did)."""
        again = (width, key) != self._drawn_for
        if again:
            first = self._drawn_for is None
            self._drawn_for, self._look, self._open_lines = (width, key), look, None
            self._kept.clear()
            self._kept_lines = 0
            for index, block in enumerate(self._blocks):
                block.lines, block.exact = None, False
                if first:
                    self._draw(block, width, look)
                    self._keep(index, recent=True)
            self._starts = None
        if self._open is not None and self._open_lines is None:
            self._open_lines = draw(self._open, width, look)
        return again

    def _draw(self, block: Block, width: int, look: Look) -> None:
        tokens = block.tokens if block.tokens is not None else self._parser.parse(block.source)
        block.tokens = None
        starts = block_starts(tokens)
        block.lines = draw(tokens[starts[0] :], width, look) if starts else [GAP]
        block.height, block.exact = len(block.lines), True

    def _keep(self, index: int, *, recent: bool) -> None:
        """Block `index` was drawn or used: its lines are kept, the first to go if not `recent`; the lines of
        the blocks used longest ago go past KEPT_LINES."""
        if index in self._kept:
            if recent:
                self._kept.move_to_end(index)
            return
        lines = self._blocks[index].lines
        assert lines is not None
        self._kept[index] = None
        self._kept.move_to_end(index, last=recent)
        self._kept_lines += len(lines)
        while self._kept_lines > KEPT_LINES and len(self._kept) > 1:
            self._forget(next(iter(self._kept)))

    def _forget(self, index: int) -> None:
        """Drop block `index`'s lines (it keeps its source and height)."""
        if index in self._kept:
            del self._kept[index]
            block = self._blocks[index]
            self._kept_lines -= len(block.lines or ())
            block.lines = None

    def _drawn(self, index: int) -> list[Line]:
        """Block `index`'s lines, drawn now if they are not; a height that changes moves the lines below it."""
        if self._blocks[index].lines is None:
            self._redraw(index)
        lines = self._blocks[index].lines
        assert lines is not None
        self._keep(index, recent=True)
        return lines

    def _redraw(self, index: int) -> None:
        """Draw block `index` at the current width and look; a height that changes moves the lines below it."""
        assert self._drawn_for is not None and self._look is not None
        block = self._blocks[index]
        height = block.height
        self._draw(block, self._drawn_for[0], self._look)
        if block.height != height:
            moved = self.starts()[index] + min(height, block.height)
            self.corrected = moved if self.corrected is None else min(self.corrected, moved)
            self._starts = None

    def settle(self, seconds: float) -> bool:
        """Draw blocks not drawn at the current width, the last first, for about `seconds`. Whether any remain."""
        if self._drawn_for is None:
            return False
        until = time.perf_counter() + seconds
        for index in range(len(self._blocks) - 1, -1, -1):
            if not self._blocks[index].exact:
                if time.perf_counter() > until:
                    return True
                self._redraw(index)
                self._keep(index, recent=False)  # drawn for its height: its lines are the first to go
        return False

    def locate(self, y: int) -> tuple[int, int] | None:
        """The finished block line `y` is in and how far into it: a place that stays put while the blocks above
        it are drawn again at new heights (`y_of` finds it then). None past the finished blocks."""
        if not 0 <= y < self.done:
            return None
        starts = self.starts()
        index = bisect.bisect_right(starts, y) - 1
        return index, y - starts[index]

    def y_of(self, place: tuple[int, int]) -> int:
        """The line a place from `locate` is on now."""
        index, within = place
        return self.starts()[index] + min(within, self._blocks[index].height)

    def starts(self) -> list[int]:
        """The first line of each finished block (a blank line between two)."""
        if self._starts is None:
            self._starts = list(itertools.accumulate((block.height + 1 for block in self._blocks[:-1]), initial=0))
            if not self._blocks:
                self._starts = []
        return self._starts

    @property
    def done(self) -> int:
        """How many lines the finished blocks take, the gaps between them included."""
        if not self._blocks:
            return 0
        return self.starts()[-1] + self._blocks[-1].height

    @property
    def height(self) -> int:
        open_lines = self._open_lines or []
        done = self.done
        return done + len(open_lines) + (1 if done and open_lines else 0)

    def line(self, y: int) -> Line | None:
        while y < self.done:
            starts = self.starts()
            index = bisect.bisect_right(starts, y) - 1
            block = self._blocks[index]
            if block.lines is None:
                self._drawn(index)  # its height may change, and with it where y falls: look again
                continue
            self._keep(index, recent=True)
            at = y - starts[index]
            return block.lines[at] if at < len(block.lines) else GAP
        y -= self.done + (1 if self.done else 0)
        open_lines = self._open_lines or []
        return open_lines[y] if 0 <= y < len(open_lines) else (GAP if y == -1 else None)

    def all_lines(self) -> list[Line]:
        """Every line, each block drawn if it is not."""
        lines: list[Line] = []
        for index in range(len(self._blocks)):
            if index:
                lines.append(GAP)
            lines.extend(self._drawn(index))
        open_lines = self._open_lines or []
        return [*lines, *([GAP] if lines and open_lines else []), *open_lines]


def _first_line(token: Token) -> int:
    assert token.map is not None
    return token.map[0]
