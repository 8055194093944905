"""The prompt: multi-line, Enter sends, Ctrl+J (or Alt+Enter, or Shift+Enter where the terminal reports it)
adds a line, Up/Down at the first/last line walk through earlier prompts, Tab after an @ completes a file name.

The box's own keys act as they are read, in order: Textual runs a focused widget's bindings only once the key
has travelled up to the app, while letters are inserted as soon as the box reads them, so in a burst of keys
(fast typing, key repeat, a busy moment) "a Ctrl+J b" came out as "ab" with the new line after it.

A long text (a pasted log, a file, an earlier prompt recalled) stands in the box as one placeholder line,
"[pasted text #1 · 12,500 lines · 1,000,000 characters]", and is sent whole in its place. The box is ten
lines tall, so the text itself would not be readable there anyway, and a TextArea holding a megabyte (worse,
a megabyte on one line) re-wraps and re-renders it on every key: typing around it would lag by a second.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from textual import events
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.geometry import Offset
from textual.message import Message
from textual.widgets import TextArea

from .path_completion import Candidates, Mention, PathCompletion, candidates, mention_at

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
        # Ctrl+J first: every terminal sends it (as LF), and the hints name the first key. Alt+Enter arrives as
        # ESC CR, Shift+Enter only where the terminal tells it from Enter (keys.KeyParser).
        Binding(
            "ctrl+j,alt+enter,shift+enter",
            "newline",
            "New line",
            show=False,
            id="newline",
            tooltip="new line in the prompt (Shift+Enter only where the terminal tells it from Enter, e.g. kitty)",
        ),
        Binding(
            "tab",
            "complete_path",
            "Complete",
            show=False,
            id="complete_path",
            tooltip="after @, complete a file name from the working folder (↑↓ choose · Enter or Tab take · Esc close)",
        ),
        Binding("escape", "close_completion", "Close list", show=False),
    ]

    class Submitted(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, *, id: str | None = None, working_folder: Callable[[], Path] = Path.cwd) -> None:
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
        self.working_folder = working_folder  # where @paths are looked up (read when completing)
        self._shown: Candidates | None = None  # what the completion list shows, while it is open

    async def on_key(self, event: events.Key) -> None:
        # Runs before TextArea's own key handler (Textual calls a class's handlers before its base classes').
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            if self._shown is not None:
                self._take_highlighted()
            else:
                self.submit()
            return
        if await self._run_own_binding(event.key):
            # Handled: it goes no further up (the app would run the binding again). TextArea's handler, next in
            # line, still restarts the cursor's blink; it would insert a printable key, so that one stops here.
            event.stop()
            if event.is_printable:
                event.prevent_default()
        # Otherwise TextArea's handler, next in line, inserts it, or it goes on up to the screen's keys.

    async def _run_own_binding(self, key: str) -> bool:
        """Run this box's binding for `key` now, as Textual would later: the screen's active bindings are the
        focus chain's with the keymap applied and check_action asked, and the box is first in that chain."""
        active = self.screen.active_bindings.get(key)
        if active is None or active.node is not self or not active.enabled or active.binding.priority:
            # Another node's (or nobody's) key; a priority binding ran before the key reached the box.
            return False
        return bool(await self.app.run_action(active.binding.action, self))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "complete_path":
            return self._shown is not None or self._mention() is not None
        if action == "close_completion":
            return self._shown is not None
        return super().check_action(action, parameters)

    # ------------------------------------------------------------------ @path completion

    def _mention(self) -> Mention | None:
        start, end = self.selection
        if start != end:
            return None
        row, column = end
        return mention_at(self.document[row], column)

    def _dropdown(self) -> PathCompletion | None:
        try:
            return self.screen.query_one(PathCompletion)
        except NoMatches:
            return None

    def action_complete_path(self) -> None:
        """Tab at an @word: complete it as far as the names allow and list them when several remain; Tab again
        (nothing left in common) takes the highlighted one."""
        mention = self._mention()
        found = candidates(mention.typed, self.working_folder()) if mention is not None else None
        if mention is None or found is None:
            if self._shown is not None:
                self._take_highlighted()
            elif mention is not None:
                self.notify("@ completes names in the working folder only.", severity="warning", timeout=4)
            return
        if not found.names:
            self._hide()
            self.notify(f"Nothing in the working folder starts with @{mention.typed}.", severity="warning", timeout=4)
        elif len(found.names) == 1:
            self._take(mention, found.folder + found.names[0])
        elif found.common != found.typed:
            self._replace_typed(mention, found.folder + found.common)
            self._refresh_completion()
        elif self._shown is not None:
            self._take_highlighted()
        else:
            self._list(found)

    def action_close_completion(self) -> None:
        self._hide()

    def move_completion(self, step: int) -> bool:
        """↑/↓ while the list is open move its highlight; False when it is closed."""
        dropdown = self._dropdown()
        if self._shown is None or dropdown is None:
            return False
        if step < 0:
            dropdown.action_cursor_up()
        else:
            dropdown.action_cursor_down()
        return True

    def take_completion(self, index: int) -> None:
        """The list's option `index` chosen (a click): put it in the prompt."""
        if self._shown is not None and 0 <= index < len(self._shown.names):
            mention = self._mention()
            if mention is not None:
                self._take(mention, self._shown.folder + self._shown.names[index])
        self.focus()

    def _take_highlighted(self) -> None:
        dropdown = self._dropdown()
        index = dropdown.highlighted if dropdown is not None else None
        self.take_completion(index if index is not None else 0)

    def _take(self, mention: Mention, path: str) -> None:
        """Put `path` after the @. A file ends the mention (a space follows); a folder lists what is in it."""
        self._replace_typed(mention, path)
        if path.endswith("/"):
            self._refresh_completion()
            return
        self._hide()
        row, column = self.cursor_location
        if not self.document[row][column : column + 1].isspace():
            self.insert(" ")

    def _replace_typed(self, mention: Mention, path: str) -> None:
        row, column = self.cursor_location
        result = self.replace(path, (row, mention.start), (row, column), maintain_selection_offset=False)
        self.move_cursor(result.end_location)

    def _list(self, found: Candidates) -> None:
        dropdown = self._dropdown()
        if dropdown is None:  # no list to show them in: name them
            self.notify("  ".join(found.folder + n for n in found.names[:20]), title="@ files", timeout=6)
            return
        self._shown = found
        mention = self._mention()
        x, y = self.cursor_screen_offset
        x -= len(mention.typed) + 1 if mention else 0
        # Above the line when there is no room below (constrain: inflect); the border lines up with the @.
        dropdown.show(found, Offset(max(0, x - 2), y))
        self.refresh_bindings()

    def _hide(self) -> None:
        if self._shown is None:
            return
        self._shown = None
        dropdown = self._dropdown()
        if dropdown is not None:
            dropdown.hide()
        self.refresh_bindings()

    def _refresh_completion(self) -> None:
        """List what the @word at the cursor can become; close the list once there is nothing to list."""
        mention = self._mention()
        found = candidates(mention.typed, self.working_folder()) if mention is not None else None
        if found is None or not found.names:
            self._hide()
        else:
            self._list(found)

    def _on_text_area_changed(self, event: TextArea.Changed) -> None:
        if self._shown is not None:
            self._refresh_completion()

    def _on_text_area_selection_changed(self, event: TextArea.SelectionChanged) -> None:
        if self._shown is not None and self._mention() is None:
            self._hide()

    def on_blur(self, event: events.Blur) -> None:
        self._hide()

    async def on_paste(self, event: events.Paste) -> None:
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
        self._hide()
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
        if not select and self.move_completion(-1):
            return
        if not select and self.cursor_location[0] == 0 and self.prompt_history and self._browsing != 0:
            if self._browsing is None:
                self._draft = self.text
                self._browsing = len(self.prompt_history)
            self._browsing -= 1
            self._show(self.prompt_history[self._browsing])
            return
        super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        if not select and self.move_completion(+1):
            return
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
