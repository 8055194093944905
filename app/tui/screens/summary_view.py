"""The summary of a compacted conversation's earlier exchanges, as the models read it in their place; opened from
its marker in the log."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from ...engine.events import CompactionEnded
from ..widgets.footer import dialog_footer
from ..widgets.markdown import ReplyMarkdown


class SummaryView(ModalScreen[None]):
    BINDINGS = [Binding("escape,q", "dismiss(None)", "Close", id="close_summary")]

    def __init__(self, compacted: CompactionEnded) -> None:
        super().__init__()
        self.compacted = compacted

    def compose(self) -> ComposeResult:
        with Vertical(id="summary-view", classes="modal-panel"):
            yield Static(
                Content.assemble(("Summary — ", "$text-muted"), (self.compacted.line, "bold")), classes="modal-title"
            )
            yield Static(
                Content("What the models are sent in place of these exchanges; the exchanges themselves are kept."),
                classes="detail-facts",
            )
            with VerticalScroll(id="detail-body"):
                yield ReplyMarkdown(self.compacted.text, id="summary-markdown")
            yield Static(Content.assemble(("Esc", "bold"), " close"), classes="modal-hint")
        yield dialog_footer()
