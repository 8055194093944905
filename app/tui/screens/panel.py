"""What each reference answered for one reply, that turn's and not the sidebar's current one: F7 for the
last reply, or a click on any reply's footer."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from ...session.reply_parts import PanelAnswer
from ...text.inert import inert
from ..widgets.footer import dialog_footer
from ..widgets.markdown import ReplyMarkdown
from ..widgets.reference_card import WORDS


def panel_markdown(answers: tuple[PanelAnswer, ...]) -> str:
    if not answers:
        return "*No reference answers were kept for this reply.*"
    parts = []
    for number, answer in enumerate(answers, 1):
        parts.append(f"### Reference {number} — {answer.label} ({WORDS.get(answer.status, answer.status)})")
        parts.append(answer.text.strip() if answer.text.strip() else f"*No answer: {answer.error or answer.status}*")
    return "\n\n".join(parts)


class PanelAnswers(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,f7", "dismiss(None)", "Close", id="close_panel")]

    def __init__(self, answers: tuple[PanelAnswer, ...], aggregator: str) -> None:
        super().__init__()
        self.answers, self.aggregator = answers, aggregator

    def compose(self) -> ComposeResult:
        with Vertical(id="panel-answers", classes="modal-panel"):
            yield Static(
                Content.assemble(("The panel's answers", "bold"), (f" — what {self.aggregator} read", "$text-muted")),
                classes="modal-title",
            )
            with VerticalScroll(id="panel-body"):
                yield ReplyMarkdown(inert(panel_markdown(self.answers)), id="panel-markdown")
            yield Static(Content.assemble(("Esc", "bold"), " close"), classes="modal-hint")
        yield dialog_footer()
