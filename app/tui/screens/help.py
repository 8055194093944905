"""F1: what the keys do — generated from the bindings in force, so a `keymap:` remap shows here.

One line per key where the width allows, in two columns (the key, what it does), inside a frame whose edges
carry the title and the way out. On a 36-row terminal every key shows and the footnote under them is a scroll
away; on a smaller one the keys scroll too. The scrolling part is never taller than the frame's inside, so End,
PgDn and ↓ reach its last line.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from ..widgets.footer import dialog_footer
from ..widgets.markdown import ReplyMarkdown

FOOTNOTE = """
Keys can be remapped in `config.yaml` under `keymap:` by binding id, e.g. `next_preset: f8`.
Ids: {ids}.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,f1,q", "dismiss(None)", "Close", id="close_help")]

    def __init__(self, rows: list[tuple[str, str]], binding_ids: list[str]) -> None:
        super().__init__()
        self.rows = rows
        self.binding_ids = binding_ids

    def markdown(self) -> str:
        """The same help as a Markdown table."""
        table = ["| Key | Does |", "| --- | --- |"]
        table += [f"| **{_cell(keys)}** | {_cell(does)} |" for keys, does in self.rows]
        return "\n".join(table) + "\n" + self.footnote()

    def footnote(self) -> str:
        return FOOTNOTE.format(ids=", ".join(f"`{i}`" for i in self.binding_ids))

    def compose(self) -> ComposeResult:
        with Vertical(id="help", classes="modal-panel") as panel:
            panel.border_title = Content.styled("Keys", "bold")
            panel.border_subtitle = Content.assemble(("Esc", "bold"), " close · ", ("↑↓", "bold"), " scroll")
            with VerticalScroll(id="help-body"):
                with Grid(id="help-keys"):
                    for keys, does in self.rows:
                        yield Static(Content(keys), classes="help-key")
                        yield Static(Content(does), classes="help-does")
                yield ReplyMarkdown(self.footnote(), classes="help-footnote")
        yield dialog_footer()
