"""One line at the top: the app, the active preset and its aggregator, the session's token total."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content
from textual.widgets import Static

from ...config import Preset


class StatusHeader(Horizontal):
    def __init__(self, preset: Preset, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.preset = preset
        self.tokens = 0

    def compose(self) -> ComposeResult:
        yield Static(self._left(), id="header-left")
        yield Static(self._right(), id="header-right")

    def _left(self) -> Content:
        return Content.assemble(
            ("moa-chat", "bold"),
            "  ",
            ("preset ", "$text-muted"),
            (self.preset.name, "bold $accent"),
            "  ",
            ("aggregator ", "$text-muted"),
            (self.preset.aggregator.label, "bold"),
        )

    def _right(self) -> Content:
        return Content.assemble((f"{self.tokens:,}", "bold"), (" tokens", "$text-muted"))

    def show(self, preset: Preset | None = None, tokens: int | None = None) -> None:
        if preset is not None:
            self.preset = preset
        if tokens is not None:
            self.tokens = tokens
        self.query_one("#header-left", Static).update(self._left())
        self.query_one("#header-right", Static).update(self._right())
