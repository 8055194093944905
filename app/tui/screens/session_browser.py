"""Ctrl+O: every stored session, newest first. Typing filters by title and message text (full-text
search); Enter opens one, F2 renames it, F8 deletes it after asking."""

from __future__ import annotations

import time
from collections.abc import Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, OptionList, Static
from textual.widgets.option_list import Option

from ...store import SessionStore, SessionSummary, StoreError
from ...text.inert import inert
from ...text.wording import plural
from ..widgets.footer import dialog_footer


def describe(session: SessionSummary, *, now: float | None = None) -> Content:
    turns = f"{session.turns} turn{'s' if session.turns != 1 else ''}"
    return Content.assemble(
        (session.title or "Untitled", "bold"),
        "\n    ",
        (f"{when(session.updated, now)} · {session.preset} · {turns} · {session.id}", "$text-muted"),
    )


def when(seconds: float, now: float | None = None) -> str:
    """Today's sessions by the hour, this year's by the day, older ones with the year."""
    local, today = time.localtime(seconds), time.localtime(now if now is not None else time.time())
    if local[:3] == today[:3]:
        return time.strftime("today %H:%M", local)
    if local.tm_year == today.tm_year:
        return time.strftime("%d %b %H:%M", local)
    return time.strftime("%d %b %Y", local)


class SessionsScreen(ModalScreen[str | None]):
    BINDINGS = [
        Binding("escape", "dismiss(None)", "Close", id="close_sessions"),
        Binding("down", "move(1)", "Next", show=False, priority=True),
        Binding("up", "move(-1)", "Previous", show=False, priority=True),
        Binding("f2", "rename", "Rename", id="rename_session"),
        Binding("f8", "delete", "Delete", id="delete_session"),
    ]

    def __init__(self, store: SessionStore, *, current: str | None = None, now: float | None = None) -> None:
        super().__init__()
        self.store, self.current, self.now = store, current, now
        self.found: list[SessionSummary] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="sessions", classes="modal-panel"):
            yield Static("Sessions", classes="modal-title")
            yield Input(placeholder="Type to search titles and messages…", id="session-filter")
            yield OptionList(id="session-options")
            yield Static(
                Content.assemble(
                    ("Enter", "bold"),
                    " open · ",
                    ("F2", "bold"),
                    " rename · ",
                    ("F8", "bold"),
                    " delete · ",
                    ("Esc", "bold"),
                    " close",
                ),
                classes="modal-hint",
            )
        yield dialog_footer()

    def on_mount(self) -> None:
        self.refill("")
        self.query_one(Input).focus()

    def refill(self, query: str, *, keep: str | None = None) -> None:
        """List the sessions matching `query`, the one with id `keep` highlighted (else the first). A store that
        cannot be read (damaged) lists nothing and says why, in the list."""
        options = self.query_one(OptionList)
        options.clear_options()
        try:
            self.found = self.store.sessions(query or None)
        except StoreError as exc:
            self.found = []
            options.add_option(
                Option(Content.styled(f"The sessions cannot be listed: {exc}", "$text-error"), disabled=True)
            )
            return
        if not self.found:
            empty = "No stored sessions yet." if not query else f"No session matches {query!r}."
            options.add_option(Option(Content.styled(empty, "italic $text-muted"), disabled=True))
            return
        options.add_options(Option(describe(s, now=self.now), id=s.id) for s in self.found)
        ids = [s.id for s in self.found]
        options.highlighted = ids.index(keep) if keep in ids else 0

    @on(Input.Changed, "#session-filter")
    def filter_changed(self, event: Input.Changed) -> None:
        self.refill(event.value)

    @on(Input.Submitted, "#session-filter")
    def open_highlighted(self) -> None:
        chosen = self._highlighted()
        if chosen is not None:
            self.dismiss(chosen.id)

    @on(OptionList.OptionSelected, "#session-options")
    def option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id:
            self.dismiss(event.option.id)

    def action_move(self, step: int) -> None:
        options = self.query_one(OptionList)
        if self.found:
            current = options.highlighted if options.highlighted is not None else 0
            options.highlighted = max(0, min(len(self.found) - 1, current + step))

    def _highlighted(self) -> SessionSummary | None:
        position = self.query_one(OptionList).highlighted
        return self.found[position] if position is not None and 0 <= position < len(self.found) else None

    def action_rename(self) -> None:
        chosen = self._highlighted()
        if chosen is None:
            return

        def renamed(title: str | None) -> None:
            if title and self._stored(lambda: self.store.rename(chosen.id, title)):
                self.refill(self.query_one(Input).value, keep=chosen.id)

        self.app.push_screen(RenameSession(chosen.title), renamed)

    def action_delete(self) -> None:
        chosen = self._highlighted()
        if chosen is None:
            return
        if chosen.id == self.current:
            self.notify("This is the open conversation: start a new one (Ctrl+N) to delete it.", severity="warning")
            return

        def confirmed(yes: bool | None) -> None:
            if yes and self._stored(lambda: self.store.delete(chosen.id)):
                self.notify(f"Deleted {chosen.title or chosen.id!r}.")
                self.refill(self.query_one(Input).value)

        self.app.push_screen(ConfirmDelete(chosen), confirmed)

    def _stored(self, change: Callable[[], object]) -> bool:
        """Make `change` to the store; False, with a notice saying why, when the store refuses it."""
        try:
            change()
        except StoreError as exc:
            self.notify(str(exc), title="Not changed", severity="error")
            return False
        return True


class RenameSession(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="cancel_rename")]

    def __init__(self, title: str) -> None:
        super().__init__()
        self.title_now = title

    def compose(self) -> ComposeResult:
        with Vertical(id="rename-session", classes="modal-panel"):
            yield Static("Rename session", classes="modal-title")
            yield Input(self.title_now, id="rename-input")
            yield Static(
                Content.assemble(("Enter", "bold"), " save · ", ("Esc", "bold"), " cancel"), classes="modal-hint"
            )
        yield dialog_footer()

    @on(Input.Submitted)
    def save(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)


class ConfirmDelete(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "dismiss(True)", "Delete", id="confirm_delete"),
        Binding("n,escape", "dismiss(False)", "Keep", id="keep_session"),
    ]

    def __init__(self, session: SessionSummary) -> None:
        super().__init__()
        self.session = session

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-delete", classes="modal-panel"):
            session = self.session
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(session.updated))
            yield Static("Delete this session?", classes="modal-title")
            yield Static(
                Content.assemble((session.id, "bold"), f" · {when} · ", inert(session.title or "untitled")),
                id="delete-which",
            )
            yield Static(
                f"Its {plural(session.turns, 'turn')} and every reference answer go with it. This cannot be undone.",
                classes="approval-why",
            )
            with Horizontal(id="confirm-buttons"):
                yield Button(Content("Delete  [y]"), id="delete", variant="error")
                yield Button(Content("Keep  [n]"), id="keep")
        yield dialog_footer()

    def on_mount(self) -> None:
        self.query_one("#keep", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "delete")
