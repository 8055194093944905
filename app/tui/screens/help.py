"""F1: what the keys do, and where to find more."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown, Static

HELP = """\
| Key | Does |
| --- | --- |
| **Enter** | send the prompt |
| **Ctrl+J** / Shift+Enter | new line in the prompt |
| **↑ / ↓** | earlier prompts (at the first / last line) |
| **Esc** | cancel the running turn (the partial reply stays) |
| **F2** | pick a preset |
| **F3 / Shift+F3** | next / previous preset |
| **F4** | show or hide the reference sidebar |
| **PgUp / PgDn** | scroll the conversation (scrolled up, a streaming reply stops pulling the view down) |
| **Tab** to a card, **Enter** | read that reference's full answer |
| **F5** | copy the last reply |
| **F6** | copy the last code block |
| **Ctrl+N** | new conversation |
| **Ctrl+P** | command palette (presets, themes, every action) |
| **Ctrl+Q** | quit |

Keys can be remapped in `config.yaml` under `keymap:` by binding id, e.g. `next_preset: f8`.
Ids: {ids}.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,f1,q", "dismiss(None)", "Close", id="close_help")]

    def __init__(self, binding_ids: list[str]) -> None:
        super().__init__()
        self.binding_ids = binding_ids  # the app's, so the list cannot drift from its bindings

    def compose(self) -> ComposeResult:
        with Vertical(id="help", classes="modal-panel"):
            yield Static("Keys", classes="modal-title")
            with VerticalScroll():
                yield Markdown(HELP.format(ids=", ".join(f"`{i}`" for i in self.binding_ids)))
