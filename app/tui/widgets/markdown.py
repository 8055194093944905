"""Markdown as moa-chat shows model text: file names stay file names, and code blocks are framed and named.

Textual's default parser linkifies "fuzzy" links, so `README.md` or `setup.py` in a reply became a link to
http://README.md (both are top-level domains). Links a model writes out (https://…, <…>, [text](url)) still
work. Its code fences clip a long line silently: here the frame names the language and a line that does not
fit scrolls, with a scrollbar that says so.
"""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.token import Token
from textual.content import Content
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownBlock, MarkdownFence


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


class ReplyMarkdown(Markdown):
    BLOCKS = {**Markdown.BLOCKS, "fence": CodeFence, "code_block": CodeFence}

    def __init__(self, markdown: str | None = None, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(markdown, id=id, classes=classes, parser_factory=parser)
