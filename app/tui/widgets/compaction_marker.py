"""Where a long conversation was compacted: a folded line in the log, "▸ 34 earlier exchanges summarised · 41.2k →
1.9k tokens", that opens the summary the models read in their place (Enter, or a click)."""

from __future__ import annotations

from textual.binding import Binding
from textual.content import Content
from textual.message import Message
from textual.widgets import Static

from ...engine.events import CompactionEnded


class CompactionMarker(Static, can_focus=True):
    BINDINGS = [Binding("enter", "open", "Read the summary", show=False)]

    class Opened(Message):
        def __init__(self, marker: CompactionMarker) -> None:
            super().__init__()
            self.marker = marker

    def __init__(self, compacted: CompactionEnded) -> None:
        super().__init__(Content.assemble(("▸ ", "bold"), (compacted.line, "")), classes="compaction-marker")
        self.compacted = compacted
        self.tooltip = "Enter reads the summary the models are sent in place of these exchanges"

    def action_open(self) -> None:
        self.post_message(self.Opened(self))

    def on_click(self) -> None:
        self.action_open()
