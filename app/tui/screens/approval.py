"""Asking before a tool acts: the tool, its arguments, the diff or the reason; once, for the session, or no."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ...text.inert import inert
from ...tools import ApprovalRequest, Decision
from ..widgets.footer import dialog_footer


def colour_diff(text: str) -> Content:
    lines = []
    for line in text.splitlines():
        if line.startswith(("+++", "---")):
            lines.append(Content.assemble((line, "bold")))
        elif line.startswith("+"):
            lines.append(Content.assemble((line, "$text-success")))
        elif line.startswith("-"):
            lines.append(Content.assemble((line, "$text-error")))
        elif line.startswith("@@"):
            lines.append(Content.assemble((line, "$text-accent")))
        else:
            lines.append(Content(line))
    return Content("\n").join(lines)


class ApprovalScreen(ModalScreen[Decision]):
    """The modal opens by itself, mid-turn, maybe while the user is typing the next prompt: a stray "a" in
    "and also" must not allow a tool for the whole session. Letter keys decide only once the keyboard
    has been quiet for QUIET_SECONDS (since the modal opened or the last other key); Esc always denies,
    and clicks always count."""

    QUIET_SECONDS = 0.6

    BINDINGS = [
        Binding("y", "decide('allow_once')", "Allow once", id="approve_once"),
        Binding("a", "decide('allow_always')", "Allow for session", id="approve_session"),
        Binding("n", "decide('deny')", "Deny", id="deny"),
        Binding("escape", "deny_now", "Deny", id="deny_now", show=False),
    ]

    def __init__(self, request: ApprovalRequest, *, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.request = request
        # Real time by default (the frozen display clock would never arm it); tests pass their own.
        self._clock = clock
        self._quiet_since = clock()

    def compose(self) -> ComposeResult:
        request = self.request
        with Vertical(id="approval", classes="modal-panel"):
            yield Static(
                Content.assemble(("Allow ", "bold"), (inert(request.tool), "bold $warning"), ("?", "bold")),
                classes="modal-title",
            )
            yield Static(
                "The aggregator wants to run a tool that needs your approval. Nothing happens unless you allow it.",
                classes="approval-why",
            )
            with VerticalScroll(id="approval-detail"):
                if request.preview:
                    yield Static(colour_diff(inert(request.preview)), classes="approval-preview")
                yield Static(
                    Content(inert(json.dumps(request.arguments, indent=2, ensure_ascii=False))),
                    classes="approval-arguments",
                )
            with Horizontal(id="approval-buttons"):
                # Content, not markup: "[y]" would read as a style tag.
                yield Button(Content("Allow once  [y]"), id="allow_once", variant="success")
                yield Button(
                    Content(f"Allow {inert(request.tool)} this session  [a]"), id="allow_always", variant="warning"
                )
                yield Button(Content("Deny  [n]"), id="deny", variant="error")
        yield dialog_footer()

    def on_mount(self) -> None:
        self._quiet_since = self._clock()
        self.query_one("#deny", Button).focus()

    @property
    def armed(self) -> bool:
        return self._clock() - self._quiet_since >= self.QUIET_SECONDS

    def on_key(self, event: events.Key) -> None:
        # Keys nobody here handles mean the user is typing, not deciding.
        if event.key not in ("y", "a", "n", "escape", "tab", "shift+tab", "enter", "left", "right"):
            self._quiet_since = self._clock()

    def action_decide(self, decision: Decision) -> None:
        if not self.armed:
            self._quiet_since = self._clock()  # a run of letters is typing, however it ends
            return
        self.dismiss(decision)

    def action_deny_now(self) -> None:
        self.dismiss("deny")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id)  # type: ignore[arg-type]
