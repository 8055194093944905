"""The prompt: multi-line, Enter sends, Ctrl+J (or Shift+Enter where the terminal reports it) adds a line,
Up/Down at the first/last line walk through earlier prompts."""

from __future__ import annotations

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea

PLACEHOLDER = "Ask the panel…   Enter send · Ctrl+J new line · ↑ earlier prompts"


class PromptInput(TextArea):
    BINDINGS = [
        Binding(
            "ctrl+j,shift+enter,alt+enter",
            "newline",
            "New line",
            show=False,
            id="newline",
            tooltip="new line in the prompt",
        ),
    ]

    class Submitted(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            id=id,
            soft_wrap=True,
            tab_behavior="focus",
            placeholder=PLACEHOLDER,
            compact=True,
            highlight_cursor_line=False,
            show_line_numbers=False,
        )
        self.prompt_history: list[str] = []
        self._browsing: int | None = None  # position in history while walking it
        self._draft = ""

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.submit()
            return
        await super()._on_key(event)

    def submit(self) -> None:
        text = self.text.strip()
        if not text:
            return
        self.post_message(self.Submitted(text))

    def accept(self, text: str) -> None:
        """The app took the prompt: remember it and clear the box."""
        if not self.prompt_history or self.prompt_history[-1] != text:
            self.prompt_history.append(text)
        self._browsing = None
        self._draft = ""
        self.load_text("")

    def action_newline(self) -> None:
        self.insert("\n")

    # Up/Down fall through to history only at the edges, so editing a multi-line prompt still works.
    def action_cursor_up(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == 0 and self.prompt_history and self._browsing != 0:
            if self._browsing is None:
                self._draft = self.text
                self._browsing = len(self.prompt_history)
            self._browsing -= 1
            self._show(self.prompt_history[self._browsing])
            return
        super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        last_row = self.document.line_count - 1
        if not select and self._browsing is not None and self.cursor_location[0] == last_row:
            self._browsing += 1
            if self._browsing >= len(self.prompt_history):
                self._browsing = None
                self._show(self._draft)
            else:
                self._show(self.prompt_history[self._browsing])
            return
        super().action_cursor_down(select)

    def _show(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)
