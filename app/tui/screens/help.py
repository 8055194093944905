"""F1: what the keys do — generated from the bindings in force, so a `keymap:` remap shows here."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown, Static

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
        table = ["| Key | Does |", "| --- | --- |"]
        table += [f"| **{_cell(keys)}** | {_cell(does)} |" for keys, does in self.rows]
        return "\n".join(table) + "\n" + FOOTNOTE.format(ids=", ".join(f"`{i}`" for i in self.binding_ids))

    def compose(self) -> ComposeResult:
        with Vertical(id="help", classes="modal-panel"):
            yield Static("Keys", classes="modal-title")
            with VerticalScroll():
                yield Markdown(self.markdown())
