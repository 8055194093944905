"""The reference sidebar: the active preset's panel, one live card per reference, then the aggregator."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from ...config import Config, Preset
from ...engine import (
    AggregatorFinished,
    AggregatorStarted,
    CallRetrying,
    ReferenceFinished,
    ReferenceProgress,
    ReferenceQueued,
    ReferenceStarted,
)
from ...engine.panel import panel
from ...providers import missing_keys
from ...session import UsageLedger
from ...text.wording import plural
from .reference_card import ReferenceCard

# What the panel's cards show: a reference's life, the aggregator's, and a call of either being retried.
PanelEvent = (
    ReferenceQueued
    | ReferenceStarted
    | ReferenceProgress
    | ReferenceFinished
    | AggregatorStarted
    | AggregatorFinished
    | CallRetrying
)


class ReferenceSidebar(VerticalScroll, can_focus=False):
    def __init__(self, preset: Preset, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.preset = preset
        self._cards: list[ReferenceCard] = []
        self._aggregator: ReferenceCard | None = None

    def compose(self) -> ComposeResult:
        yield from self._widgets(self.preset)

    def _widgets(self, preset: Preset) -> list:
        # A card whose provider has no key says so before the first turn, not only when it fails.
        config = getattr(self.app, "config", None)
        missing = missing_keys(config, preset) if isinstance(config, Config) else {}
        # Kept as built: progress events look cards up by index several times a second. One card per seat:
        # a model asked `samples:` times has a card per sample, a multi-layer panel a group per layer.
        seats = panel(preset)
        self._cards = [
            ReferenceCard(seat.label, index=seat.index, needs=missing.get(seat.slot.provider)) for seat in seats
        ]
        self._aggregator = ReferenceCard(
            preset.aggregator.label, aggregator=True, needs=missing.get(preset.aggregator.provider)
        )
        groups: list[Static | ReferenceCard] = []
        for layer in range(1, preset.layers + 1):
            cards = [card for card, seat in zip(self._cards, seats, strict=True) if seat.layer == layer]
            count = len(cards)
            title = plural(count, "reference")
            if preset.layers > 1:
                title = f"Layer {layer} · {title}"
            groups += [Static(title, classes="sidebar-title"), *cards]
        return [
            *groups,
            Static("Aggregator", classes="sidebar-title"),
            self._aggregator,
            # Below the cards the column would be empty: say what they are for.
            Static(
                Content.assemble(("Tab", "bold"), " to a card, ", ("Enter", "bold"), " reads its whole answer"),
                classes="sidebar-hint",
            ),
        ]

    async def show_preset(self, preset: Preset) -> None:
        self.preset = preset
        await self.remove_children()
        await self.mount_all(self._widgets(preset))

    def toggle(self) -> None:
        """F4: hide or show it beside the log; on a narrow screen, where it starts hidden, open or close it
        over the log (sidebar.tcss). Classes, not `display`, so each width keeps its own choice across a
        resize; `display` still reads true exactly when it shows."""
        if self.screen.has_class("-narrow"):
            self.toggle_class("-open")
        else:
            self.toggle_class("-hidden")

    def cards(self) -> list[ReferenceCard]:
        return list(self._cards)

    def card(self, index: int) -> ReferenceCard | None:
        return self._cards[index] if 0 <= index < len(self._cards) else None

    @property
    def aggregator_card(self) -> ReferenceCard:
        assert self._aggregator is not None, "the sidebar is composed"
        return self._aggregator

    def apply(self, event: PanelEvent) -> None:
        """Hand `event` to the card it is about: a reference's by its index, else the aggregator's."""
        if isinstance(event, AggregatorStarted | AggregatorFinished):
            card: ReferenceCard | None = self.aggregator_card
        elif isinstance(event, CallRetrying) and event.role == "aggregator":
            card = self.aggregator_card
        else:
            card = self.card(event.index)
        if card is not None:
            card.apply(event)

    def finished(self) -> int:
        """How many of the references have answered, failed or stopped so far this turn."""
        return sum(card.status not in ("queued", "running") for card in self._cards)

    def start_turn(self) -> None:
        for card in self.cards():
            card.reset("queued")
        self.aggregator_card.reset("waiting")

    def end_turn(self, status: str, error: str | None, ledger: UsageLedger | None = None) -> None:
        """Whatever is still open when the turn ends takes the turn's outcome; the aggregator card shows
        the ledger's totals (tokens, cost) over all of the turn's rounds."""
        if ledger is not None:
            tokens = ledger.usage("aggregator").completion_tokens
            self.aggregator_card.tokens = tokens or self.aggregator_card.tokens
            # The ledger has every round (tool iterations run the aggregator again): its sum is the card's.
            if any(record.role == "aggregator" for record in ledger.records):
                self.aggregator_card.cost = ledger.cost("aggregator")
                self.aggregator_card.cost_partial = not ledger.cost_complete("aggregator")
                self.aggregator_card.refresh(layout=True)
        for card in self.cards():
            if card.status in ("queued", "running"):
                card.finish("cancelled" if status == "cancelled" else "failed", error)
        aggregator = self.aggregator_card
        if status == "ok" and aggregator.status != "ok":
            aggregator.finish("ok")
        elif status != "ok":
            # The card keeps the reason its own call reported, when it has one; else the turn's.
            aggregator.finish(status if status in ("cancelled", "cut_off") else "failed", aggregator.error or error)
