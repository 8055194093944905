"""A yes/no question before something the user may not want (a turn above its cost limit)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from ...text.inert import inert
from ..widgets.footer import dialog_footer


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "dismiss(True)", "Yes", id="confirm_yes"),
        Binding("n,escape", "dismiss(False)", "No", id="confirm_no"),
    ]

    def __init__(self, title: str, question: str) -> None:
        super().__init__()
        self.title_text, self.question = title, question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm", classes="modal-panel"):
            yield Static(inert(self.title_text), classes="modal-title")
            yield Static(Content(inert(self.question)))
            yield Static(
                Content.assemble(("y", "bold"), " send anyway · ", ("n", "bold"), " or ", ("Esc", "bold"), " don't"),
                classes="modal-hint",
            )
        yield dialog_footer()
