"""The prompt: multi-line, Enter sends, Ctrl+J (or Shift+Enter where the terminal reports it) adds a line,
Up/Down at the first/last line walk through earlier prompts.

A long text (a pasted log, a file, an earlier prompt recalled) stands in the box as one placeholder line,
"[pasted text #1 · 12,500 lines · 1,000,000 characters]", and is sent whole in its place. The box is ten
lines tall, so the text itself would not be readable there anyway, and a TextArea holding a megabyte (worse,
a megabyte on one line) re-wraps and re-renders it on every key: typing around it would lag by a second.
"""

from __future__ import annotations

import re

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea

PLACEHOLDER = "Ask the panel…   Enter send · Ctrl+J new line · ↑ earlier prompts"

# Past either, a text goes in as a placeholder. Well below both, editing in the box stays instant.
INLINE_CHARACTERS = 10_000
INLINE_LINES = 200


def is_long(text: str) -> bool:
    return len(text) > INLINE_CHARACTERS or text.count("\n") >= INLINE_LINES


def as_document_text(text: str) -> str:
    """`text` with the newlines the box would give it (\\r\\n and \\r become \\n), so a placeholder sends
    what the same text pasted into the box would have sent. The sentinel keeps a trailing newline."""
    return "\n".join((text + "x").splitlines())[:-1]


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
        self._long_texts: dict[str, str] = {}  # placeholder → the text it stands for, until the prompt is sent

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.submit()
            return
        await super()._on_key(event)

    async def _on_paste(self, event: events.Paste) -> None:
        # All of it here: TextArea's own handler would insert it a second time (prevent_default), and a paste
        # posted to the box itself would come back from the app to the focused widget (stop).
        event.stop()
        event.prevent_default()
        if not self.read_only:
            self._insert_pasted(event.text)
            self.focus()

    def action_paste(self) -> None:
        """Ctrl+V: what moa-chat copied (a reply, a code block), long texts as a placeholder here too."""
        if not self.read_only:
            self._insert_pasted(self.app.clipboard)

    def _insert_pasted(self, text: str) -> None:
        text = as_document_text(text)
        if is_long(text):
            text = self._placeholder(text)
        result = self.replace(text, *self.selection, maintain_selection_offset=False)
        self.move_cursor(result.end_location)

    def load_text(self, text: str) -> None:
        """Replace the box's text; a long one (an earlier prompt, the last prompt to edit) as a placeholder."""
        super().load_text(self._placeholder(text) if is_long(text) else text)

    @property
    def full_text(self) -> str:
        """The prompt as it will be sent: each placeholder replaced by its text."""
        text = self.text
        if not self._long_texts:
            return text
        # One pass: a pasted text that happens to contain a placeholder's wording is not expanded again.
        pattern = "|".join(re.escape(placeholder) for placeholder in self._long_texts)
        return re.sub(pattern, lambda match: self._long_texts[match.group()], text)

    def _placeholder(self, text: str) -> str:
        for placeholder, known in self._long_texts.items():
            if known == text:  # walking the history past the same prompt again
                return placeholder
        lines = text.count("\n") + (not text.endswith("\n"))
        shape = f"{lines:,} lines · " if lines > 1 else ""
        placeholder = f"[pasted text #{len(self._long_texts) + 1} · {shape}{len(text):,} characters]"
        self._long_texts[placeholder] = text
        return placeholder

    def _placeholder_at_cursor(self, *, before: bool) -> tuple[tuple[int, int], tuple[int, int]] | None:
        start, end = self.selection
        if start != end or not self._long_texts:
            return None
        row, column = end
        line = self.document[row]
        for placeholder in self._long_texts:
            if before and line.endswith(placeholder, 0, column):
                return (row, column - len(placeholder)), (row, column)
            if not before and line.startswith(placeholder, column):
                return (row, column), (row, column + len(placeholder))
        return None

    # A placeholder goes as one piece: half of one would be sent as its literal wording.
    def action_delete_left(self) -> None:
        span = self._placeholder_at_cursor(before=True)
        if span is None or self.read_only:
            super().action_delete_left()
        else:
            self.delete(*span, maintain_selection_offset=False)

    def action_delete_right(self) -> None:
        span = self._placeholder_at_cursor(before=False)
        if span is None or self.read_only:
            super().action_delete_right()
        else:
            self.delete(*span, maintain_selection_offset=False)

    def submit(self) -> None:
        text = self.full_text.strip()
        if not text:
            return
        self.post_message(self.Submitted(text))

    def accept(self, text: str) -> None:
        """The app took the prompt: remember it and clear the box."""
        if not self.prompt_history or self.prompt_history[-1] != text:
            self.prompt_history.append(text)
        self._browsing = None
        self._draft = ""
        self._long_texts.clear()
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
                self._show(self._draft, as_typed=True)
            else:
                self._show(self.prompt_history[self._browsing])
            return
        super().action_cursor_down(select)

    def _show(self, text: str, *, as_typed: bool = False) -> None:
        # The draft goes back as it was typed: placeholders and all, never folded into one of its own.
        if as_typed:
            super().load_text(text)
        else:
            self.load_text(text)
        self.move_cursor(self.document.end)
