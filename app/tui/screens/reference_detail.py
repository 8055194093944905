"""A reference's full answer (or why it has none), opened from its sidebar card."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Markdown, Static

from ..widgets.reference_card import WORDS, ReferenceCard

if TYPE_CHECKING:
    from ..app import MoAChatApp


class ReferenceDetail(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q", "dismiss(None)", "Close", id="close_detail"),
        Binding("c", "copy", "Copy answer", id="copy_reference"),
    ]

    def __init__(self, card: ReferenceCard) -> None:
        super().__init__()
        self.label, self.status, self.text, self.error = card.label, card.status, card.text, card.error
        facts = [WORDS[card.status]]
        if card.seconds is not None:
            facts.append(f"{card.seconds:.1f}s")
        if card.first_token_seconds is not None:
            facts.append(f"time to first token {card.first_token_seconds:.1f}s")
        if card.tokens:
            facts.append(f"{card.tokens:,} tokens")
        self.facts = " · ".join(facts)
        self.role = "Aggregator" if card.aggregator else f"Reference {card.index + 1}"

    def compose(self) -> ComposeResult:
        with Vertical(id="reference-detail", classes="modal-panel"):
            yield Static(
                Content.assemble((f"{self.role} — ", "$text-muted"), (self.label, "bold")), classes="modal-title"
            )
            yield Static(Content(self.facts), classes="detail-facts")
            with VerticalScroll(id="detail-body"):
                if self.text:
                    yield Markdown(self.text, id="detail-markdown")
                elif self.error:
                    yield Static(Content(f"No answer: {self.error}"), classes="reply-error")
                else:
                    yield Static(Content(self._empty_reason()), classes="detail-empty")
            yield Static(Content.assemble(("Esc", "bold"), " close · ", ("c", "bold"), " copy"), classes="modal-hint")

    def _empty_reason(self) -> str:
        if self.role == "Aggregator":
            return "The aggregator's reply is in the chat log."
        if self.status in ("idle", "queued", "running"):
            return "No answer yet — it shows here once this reference has finished."
        return "This reference gave no answer this turn."

    def action_copy(self) -> None:
        if self.text:
            cast("MoAChatApp", self.app).copy_text(self.text, f"{self.label}'s answer ({len(self.text):,} characters)")
