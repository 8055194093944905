"""The reference sidebar: the active preset's panel, one live card per reference, then the aggregator."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from ...config import Config, Preset
from ...config.pricing import cost_label
from ...engine import (
    AggregatorFinished,
    AggregatorStarted,
    AgreementChecked,
    CallRetrying,
    LayersDecided,
    ReferenceFinished,
    ReferenceProgress,
    ReferenceQueued,
    ReferenceStarted,
)
from ...engine.events import RequestFitted
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
    | AgreementChecked
    | LayersDecided
    | RequestFitted
)


class ReferenceSidebar(VerticalScroll, can_focus=False):
    # Shift+Tab on the first card goes back to the prompt (where Tab came from), not into the chat log.
    BINDINGS = [Binding("shift+tab", "back", "Back", show=False)]
    DEFAULT_CSS = """
    ReferenceSidebar .sidebar-layers {
        margin: 1 0 0 0;
        color: $text-muted;
    }
    """

    def __init__(self, preset: Preset, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.preset = preset
        self._cards: list[ReferenceCard] = []
        self._aggregator: ReferenceCard | None = None
        # `layers: auto`: each layer's title and cards (a layer that did not run is hidden), and the line that
        # says how many layers ran and why.
        self._layer_widgets: dict[int, list[Static | ReferenceCard]] = {}
        self._layers_line: Static | None = None
        self._layers_text = ""

    def compose(self) -> ComposeResult:
        yield from self._widgets(self.preset)

    def _widgets(self, preset: Preset) -> list[Widget]:
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
        self._layer_widgets = {}
        for layer in range(1, preset.layers + 1):
            cards = [card for card, seat in zip(self._cards, seats, strict=True) if seat.layer == layer]
            count = len(cards)
            title = plural(count, "reference")
            if preset.layers > 1:
                title = f"Layer {layer} · {title}"
            self._layer_widgets[layer] = [Static(title, classes="sidebar-title"), *cards]
            groups += self._layer_widgets[layer]
        self._layers_text = self._layers_plan()
        self._layers_line = Static(self._layers_text, classes="sidebar-layers") if preset.auto_layers else None
        if self._layers_line is not None:
            groups.append(self._layers_line)
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
        resize; `display` still reads true exactly when it shows. Shown for a moment by Tab (`peek`), F4
        keeps it shown."""
        narrow = self.screen.has_class("-narrow")
        if self.has_class("-peek"):
            self.remove_class("-peek")
            self.add_class("-open") if narrow else self.remove_class("-hidden")
        elif narrow:
            self.toggle_class("-open")
        else:
            self.toggle_class("-hidden")

    def focus_card(self, *, first: bool) -> None:
        """Tab (`first`) or Shift+Tab from the prompt: focus the first card, or the last (the aggregator's). A
        hidden panel shows over the log until the focus leaves it (`unpeek`), so that the log's view stays as
        it was: beside it, the log would wrap its lines again."""
        if self._shown_cards():
            self._focus_end(first)
            return
        self.add_class("-peek")
        self.call_after_refresh(self._focus_end, first)

    def on_mount(self) -> None:
        self.watch(self.screen, "focused", self._focus_moved, init=False)

    def _focus_moved(self, focused: Widget | None) -> None:
        """The focus left a panel Tab showed (to the prompt, the log): it hides again."""
        if self.has_class("-peek") and focused is not None and self not in focused.ancestors_with_self:
            self.remove_class("-peek")

    def _shown_cards(self) -> list[ReferenceCard]:
        if not self.display:
            return []
        return [card for card in (*self._cards, self._aggregator) if card is not None and card.display]

    def _focus_end(self, first: bool) -> None:
        shown = self._shown_cards()
        if shown:
            self.screen.set_focus(shown[0] if first else shown[-1])

    def cards(self) -> list[ReferenceCard]:
        return list(self._cards)

    def card(self, index: int) -> ReferenceCard | None:
        return self._cards[index] if 0 <= index < len(self._cards) else None

    @property
    def aggregator_card(self) -> ReferenceCard:
        assert self._aggregator is not None, "the sidebar is composed"
        return self._aggregator

    def _layers_plan(self) -> str:
        return f"Layers: auto, up to {self.preset.layers}"

    def _say_layers(self, text: str) -> None:
        self._layers_text = text
        if self._layers_line is not None:
            self._layers_line.update(text)

    def _decided(self, event: LayersDecided) -> None:
        """The layers that did not run leave the panel; the line says how many ran, and why."""
        for layer, widgets in self._layer_widgets.items():
            if layer > event.layers_run:
                for widget in widgets:
                    if isinstance(widget, ReferenceCard):
                        widget.reset("idle")
                    widget.display = False
        self._say_layers(event.line)

    def apply(self, event: PanelEvent) -> None:
        """Hand `event` to the card it is about: a reference's by its index, else the aggregator's."""
        if isinstance(event, LayersDecided):
            self._decided(event)
            return
        if isinstance(event, RequestFitted):  # the answers the aggregator (or a later layer) got cut to fit
            for cut in event.cuts:
                if (cut_card := self.card(cut.index)) is not None:
                    cut_card.cut_to_fit(cut)
            return
        if isinstance(event, AgreementChecked):
            if event.record is None or event.record.status != "cancelled":
                self._say_layers(f"After layer {event.layer}: {event.reason}")
            return
        if isinstance(event, AggregatorStarted) and event.references_total == 0:
            # The aggregator reads no reference answer this turn (a solo turn, or a regenerate of one): the
            # references still waiting were never asked, which is no failure of theirs.
            for waiting in self._cards:
                if waiting.status == "queued":
                    waiting.reset("unasked")
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
        for widgets in self._layer_widgets.values():
            for widget in widgets:
                widget.display = True
        self._say_layers(self._layers_plan())

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
            self._agreement_cost(ledger)
        for card in self.cards():
            if card.status in ("queued", "running"):
                card.finish("cancelled" if status == "cancelled" else "failed", error)
        aggregator = self.aggregator_card
        if status == "ok" and aggregator.status != "ok":
            aggregator.finish("ok")
        elif status != "ok":
            # The card keeps the reason its own call reported, when it has one; else the turn's.
            aggregator.finish(status if status in ("cancelled", "cut_off") else "failed", aggregator.error or error)

    def _agreement_cost(self, ledger: UsageLedger) -> None:
        """`layers: auto`: what the agreement checks cost, after the line that says how many layers ran."""
        cost = ledger.cost("agreement")
        if cost:
            complete = ledger.cost_complete("agreement")
            self._say_layers(f"{self._layers_text} · checks {cost_label(cost, complete=complete)}")

    def action_back(self) -> None:
        cards = self._shown_cards()
        if cards and self.screen.focused is cards[0]:
            self.post_message(self.Left())
        else:
            self.screen.focus_previous()

    class Left(Message):
        """Shift+Tab on the first card: the screen gives the prompt the focus back."""
