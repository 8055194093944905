"""The reference sidebar: the active preset's panel, one live card per reference, then the aggregator."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from ...config import Preset
from .reference_card import ReferenceCard


class ReferenceSidebar(VerticalScroll, can_focus=False):
    def __init__(self, preset: Preset, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.preset = preset

    def compose(self) -> ComposeResult:
        yield from self._widgets(self.preset)

    def _widgets(self, preset: Preset) -> list:
        count = len(preset.references)
        return [
            Static(f"References · {count}", classes="sidebar-title"),
            *(ReferenceCard(slot.label, index=i) for i, slot in enumerate(preset.references)),
            Static("Aggregator", classes="sidebar-title"),
            ReferenceCard(preset.aggregator.label, aggregator=True),
        ]

    def on_mount(self) -> None:
        self.set_interval(0.1, self._tick)

    def _tick(self) -> None:
        for card in self.query(ReferenceCard):
            card.tick()

    async def show_preset(self, preset: Preset) -> None:
        self.preset = preset
        await self.remove_children()
        await self.mount_all(self._widgets(preset))

    def cards(self) -> list[ReferenceCard]:
        return [card for card in self.query(ReferenceCard) if not card.aggregator]

    def card(self, index: int) -> ReferenceCard | None:
        cards = self.cards()
        return cards[index] if 0 <= index < len(cards) else None

    @property
    def aggregator_card(self) -> ReferenceCard:
        return next(card for card in self.query(ReferenceCard) if card.aggregator)

    def start_turn(self) -> None:
        for card in self.cards():
            card.reset("queued")
        self.aggregator_card.reset("waiting")

    def end_turn(self, status: str, error: str | None) -> None:
        """Whatever is still open when the turn ends takes the turn's outcome."""
        for card in self.cards():
            if card.status in ("queued", "running"):
                card.finish("cancelled" if status == "cancelled" else "failed", error)
        aggregator = self.aggregator_card
        if status == "ok" and aggregator.status != "ok":
            aggregator.finish("ok")
        elif status != "ok":
            aggregator.finish("cancelled" if status == "cancelled" else "failed", error)
