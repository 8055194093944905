"""One line at the top: the app, the active preset and its aggregator, the session's tokens and cost.

One line, whatever the width: the parts give way in order (the app's name, then the words "preset" and
"aggregator", then the aggregator's name shortens) rather than run into each other. The preset's name and
the totals always show, and so does what the preset needs to run (a key, an Ollama that is not running):
without it, the next prompt fails.

The cost shows once some call had a price: "$0.0123", or "$0.0123+" when other calls used tokens at no
known price (the sum is then a lower bound: still worth seeing, and the + says what it leaves out). A model
on this machine has a price too, nothing, so a turn on one shows "$0" where a paid model's turn shows what
it cost: `sessions`, the export and `ask` say the same. With no price at all nothing shows: a permanent
"cost n/a" would say the same thing on every screen to everyone who uses unpriced models. The demo's
simulated models are no model at all, so their "$0" is left out: it would compare nothing with nothing.

Before them, once a call has said what it sent beside its model's known window, the fullest window: "ctx
6.1k/8.2k local:smollm2", marked once it passes the preset's `compact_at` (docs/context.md); it is the first
to give way on a narrow screen.

The tokens are those the providers reported. When calls were made and none reported any (llama.cpp's server
sends no usage in a stream), the header says "tokens n/a": a "0 tokens" would claim the turn used none.

Once the session database is found damaged (the store writes nothing more), "⚠ not saving" stands before the
totals for the rest of the run: a conversation that looks saved and is not would be lost without a word.
"""

from __future__ import annotations

from textual.content import Content
from textual.widget import Widget

from ...config import Config, Preset
from ...config.pricing import cost_label
from ...providers import readiness
from ...session import UsageLedger
from ...session.compaction import Fill, latest_fill
from ...text.inert import inert

GAP = 2  # columns between the left part and the totals, at least
SIMULATED = "demo"  # the provider whose models are simulated: their price of nothing is not shown


class StatusHeader(Widget):
    def __init__(self, preset: Preset, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.preset = preset
        self.tokens: int | None = 0  # None: calls were made, and no provider reported tokens
        self.cost: float | None = None  # dollars: the sum of what is known
        self.cost_complete = True  # every call that used tokens had a price
        self.fill: Fill | None = None  # the fullest window of the latest calls (None: none known)
        self.not_saving = False  # the session database is damaged: nothing is stored any more

    def _needs(self) -> str | None:
        config = getattr(self.app, "config", None)
        if not isinstance(config, Config):
            return None
        return readiness(config, self.preset).reason  # "needs OPENROUTER_API_KEY", as F2 and `presets` say

    def cost_text(self) -> str | None:
        if self.cost is None:
            return None
        return cost_label(self.cost, complete=self.cost_complete)

    def _window_fill(self) -> list[tuple[str, str]]:
        """ "ctx 6.1k/8.2k local:smollm2 · ": the fullest window, marked once it passes the preset's compact_at."""
        if self.fill is None:
            return []
        style = "bold $text-warning" if self.fill.share > self.preset.compact_at else "$text-muted"
        return [(self.fill.line, style), (" · ", "$text-muted")]

    def _right(self, context: bool = True) -> Content:
        parts: list[tuple[str, str]] = self._window_fill() if context else []
        if self.tokens is None:
            parts += [("tokens ", "$text-muted"), ("n/a", "bold")]
        else:
            noun = "token" if self.tokens == 1 else "tokens"
            parts += [(f"{self.tokens:,}", "bold"), (f" {noun}", "$text-muted")]
        cost = self.cost_text()
        if cost is not None:
            parts += [(" · ", "$text-muted"), (cost, "bold")]
        if self.not_saving:
            parts = [("⚠ not saving", "bold $text-error"), ("  ", ""), *parts]
        return Content.assemble(*parts)

    def _lefts(self, needs: str | None) -> list[Content]:
        """The left part, fullest first; the last one is cut to fit when none of them does."""
        name = (inert(self.preset.name), "bold $text-accent")
        aggregator = (inert(self.preset.aggregator.label), "bold")
        preset = [("preset ", "$text-muted"), name]
        answers = [("aggregator ", "$text-muted"), aggregator]
        if needs:
            # Without its key the preset cannot answer at all: that outranks who would have answered.
            verb, what = ("needs ", needs.removeprefix("needs ")) if needs.startswith("needs ") else ("", needs)
            warning = [(f"  ⚠ {verb}", "$text-warning"), (what, "bold $text-warning")]
            return [
                Content.assemble(("moa-chat  ", "bold"), *preset, "  ", *answers, *warning),
                Content.assemble(*preset, "  ", *answers, *warning),
                Content.assemble(*preset, *warning),
                Content.assemble(name, ("  ⚠ ", "$text-warning"), (what, "bold $text-warning")),
            ]
        return [
            Content.assemble(("moa-chat  ", "bold"), *preset, "  ", *answers),
            Content.assemble(*preset, "  ", *answers),
            Content.assemble(name, ("  → ", "$text-muted"), aggregator),
        ]

    def render(self) -> Content:
        width = max(0, self.outer_size.width - self.styles.gutter.width)  # not content_size: see ReferenceCard
        lefts = self._lefts(self._needs())
        right = self._right()
        if lefts[-1].cell_length + right.cell_length + GAP > width:  # the window's fill gives way first
            right = self._right(context=False)
        room = width - right.cell_length - GAP
        left = next((candidate for candidate in lefts if candidate.cell_length <= room), None)
        if left is None:
            left = lefts[-1].truncate(max(room, len(self.preset.name)), ellipsis=True)
        gap = max(GAP, width - left.cell_length - right.cell_length)
        return Content.assemble(left, " " * gap, right)

    def show_not_saving(self) -> None:
        """The session database is damaged: say, from now on, that nothing is being saved."""
        self.not_saving = True
        self.refresh()

    def show(self, preset: Preset | None = None, ledger: UsageLedger | None = None) -> None:
        """A new preset, the totals of `ledger` (the session's), or both."""
        if preset is not None:
            self.preset = preset
        if ledger is not None:
            records = ledger.records
            priced = [r.cost for r in records if r.cost is not None and r.label.partition(":")[0] != SIMULATED]
            self.cost = ledger.cost() if priced else None
            self.cost_complete = ledger.cost_complete()
            reported = any(r.usage is not None for r in records) or not records
            self.tokens = ledger.usage().total_tokens if reported else None
            self.fill = latest_fill(records)
        self.refresh()
