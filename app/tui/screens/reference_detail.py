"""A reference's full answer (or why it has none), opened from its sidebar card. While the reference runs,
its text grows here as it arrives."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from ..host import Copier
from ..widgets.footer import dialog_footer
from ..widgets.markdown import ReplyMarkdown
from ..widgets.reference_card import WORDS, ReferenceCard


class ReferenceDetail(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q", "dismiss(None)", "Close", id="close_detail"),
        Binding("c", "copy", "Copy answer", id="copy_reference"),
    ]

    def __init__(self, card: ReferenceCard, clipboard: Copier) -> None:
        super().__init__()
        self.card = card
        self.clipboard = clipboard
        self.label, self.role = card.label, "Aggregator" if card.aggregator else f"Reference {card.index + 1}"
        self._read()

    def _read(self) -> None:
        card = self.card
        self.status, self.text, self.error = card.status, card.text, card.error
        facts = [WORDS[card.status]]
        if card.seconds is not None:
            facts.append(f"{card.seconds:.1f}s")
        if card.first_token_seconds is not None:
            facts.append(f"time to first token {card.first_token_seconds:.1f}s")
        if card.tokens:
            facts.append(f"{'~' if card.tokens_estimated else ''}{card.tokens:,} tokens")
        self.facts = " · ".join(facts)

    def compose(self) -> ComposeResult:
        with Vertical(id="reference-detail", classes="modal-panel"):
            yield Static(
                Content.assemble((f"{self.role} — ", "$text-muted"), (self.label, "bold")), classes="modal-title"
            )
            yield Static(Content(self.facts), classes="detail-facts")
            with VerticalScroll(id="detail-body"):
                # Both always there: a running reference's text replaces the "nothing yet" line as it arrives.
                markdown = ReplyMarkdown(self.text, id="detail-markdown")
                markdown.display = bool(self.text)
                yield markdown
                empty = Static(self._empty(), id="detail-empty", classes="detail-empty")
                empty.display = not self.text
                yield empty
            yield Static(Content.assemble(("Esc", "bold"), " close · ", ("c", "bold"), " copy"), classes="modal-hint")
        yield dialog_footer()

    def on_mount(self) -> None:
        # The card's text grows while it runs (a few times a second) and becomes the answer, or empty, when it
        # ends: follow both until this screen closes (Textual drops the watchers of a closed screen).
        self.watch(self.card, "text", self._follow, init=False)
        self.watch(self.card, "status", self._follow, init=False)

    async def _follow(self) -> None:
        before = self.text
        self._read()
        self.query_one(".detail-facts", Static).update(Content(self.facts))
        body = self.query_one("#detail-body", VerticalScroll)
        at_end = body.scroll_y >= body.max_scroll_y  # reading along the end: stay with it
        markdown = self.query_one("#detail-markdown", ReplyMarkdown)
        empty = self.query_one("#detail-empty", Static)
        markdown.display, empty.display = bool(self.text), not self.text
        if not self.text:
            empty.update(self._empty())
        elif self.text != before:
            # The whole text again, not Markdown.append: after an update, append takes its first new block for
            # a revision of the last one and drops that block. A few times a second at most (PROGRESS_INTERVAL).
            await markdown.update(self.text)
        if at_end:
            body.scroll_end(animate=False)

    def _empty(self) -> Content:
        if self.error:
            return Content.styled(f"No answer: {self.error}", "$text-error")
        if self.role == "Aggregator":
            return Content.styled("The aggregator's reply is in the chat log.", "italic $text-muted")
        if self.status in ("idle", "queued"):
            return Content.styled("Not started yet — its text shows here as it arrives.", "italic $text-muted")
        if self.status == "unasked":
            return Content.styled(
                "Not asked: this turn went to the aggregator alone (a solo turn, Ctrl+T), so no reference answered.",
                "italic $text-muted",
            )
        if self.status == "running":
            return Content.styled("Nothing written yet — its text shows here as it arrives.", "italic $text-muted")
        return Content.styled("This reference gave no answer this turn.", "italic $text-muted")

    def action_copy(self) -> None:
        if self.text:
            self.clipboard.copy_text(self.text, f"{self.label}'s answer ({len(self.text):,} characters)")
