"""One line at the top: the app, the active preset and its aggregator, the session's token total.

One line, whatever the width: the parts give way in order (the app's name, then the words "preset" and
"aggregator", then the aggregator's name shortens) rather than run into each other. The preset's name and
the token total always show, and so does a missing key: without it, the next prompt fails.
"""

from __future__ import annotations

from textual.content import Content
from textual.widget import Widget

from ...config import Config, Preset
from ...providers import readiness
from ...terminal import inert

GAP = 2  # columns between the left part and the token total, at least


class StatusHeader(Widget):
    def __init__(self, preset: Preset, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.preset = preset
        self.tokens = 0

    def _needs(self) -> str | None:
        config = getattr(self.app, "config", None)
        if not isinstance(config, Config):
            return None
        state = readiness(config, self.preset)
        return None if state.runnable else state.needs or "a fix"

    def _right(self) -> Content:
        noun = "token" if self.tokens == 1 else "tokens"
        return Content.assemble((f"{self.tokens:,}", "bold"), (f" {noun}", "$text-muted"))

    def _lefts(self, needs: str | None) -> list[Content]:
        """The left part, fullest first; the last one is cut to fit when none of them does."""
        name = (inert(self.preset.name), "bold $text-accent")
        aggregator = (inert(self.preset.aggregator.label), "bold")
        preset = [("preset ", "$text-muted"), name]
        answers = [("aggregator ", "$text-muted"), aggregator]
        if needs:
            # Without its key the preset cannot answer at all: that outranks who would have answered.
            warning = [("  ⚠ needs ", "$text-warning"), (needs, "bold $text-warning")]
            return [
                Content.assemble(("moa-chat  ", "bold"), *preset, "  ", *answers, *warning),
                Content.assemble(*preset, "  ", *answers, *warning),
                Content.assemble(*preset, *warning),
                Content.assemble(name, ("  ⚠ ", "$text-warning"), (needs, "bold $text-warning")),
            ]
        return [
            Content.assemble(("moa-chat  ", "bold"), *preset, "  ", *answers),
            Content.assemble(*preset, "  ", *answers),
            Content.assemble(name, ("  → ", "$text-muted"), aggregator),
        ]

    def render(self) -> Content:
        width = self.content_size.width
        right = self._right()
        room = width - right.cell_length - GAP
        lefts = self._lefts(self._needs())
        left = next((candidate for candidate in lefts if candidate.cell_length <= room), None)
        if left is None:
            left = lefts[-1].truncate(max(room, len(self.preset.name)), ellipsis=True)
        gap = max(GAP, width - left.cell_length - right.cell_length)
        return Content.assemble(left, " " * gap, right)

    def show(self, preset: Preset | None = None, tokens: int | None = None) -> None:
        if preset is not None:
            self.preset = preset
        if tokens is not None:
            self.tokens = tokens
        self.refresh()
