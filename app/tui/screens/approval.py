"""Asking before a tool changes something: the tool, its arguments, the diff; once, for the session, or no."""

from __future__ import annotations

import json

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ...turn import ApprovalRequest, Decision


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
    BINDINGS = [
        Binding("y", "decide('allow_once')", "Allow once", id="approve_once"),
        Binding("a", "decide('allow_always')", "Allow for session", id="approve_session"),
        Binding("n,escape", "decide('deny')", "Deny", id="deny"),
    ]

    def __init__(self, request: ApprovalRequest) -> None:
        super().__init__()
        self.request = request

    def compose(self) -> ComposeResult:
        request = self.request
        with Vertical(id="approval", classes="modal-panel"):
            yield Static(Content.assemble(("Allow ", "bold"), (request.tool, "bold $warning"), ("?", "bold")),
                         classes="modal-title")
            yield Static("The aggregator wants to run a tool that changes something. Nothing happens unless "
                         "you allow it.", classes="approval-why")
            with VerticalScroll(id="approval-detail"):
                if request.preview:
                    yield Static(colour_diff(request.preview), classes="approval-preview")
                yield Static(Content(json.dumps(request.arguments, indent=2, ensure_ascii=False)),
                             classes="approval-arguments")
            with Horizontal(id="approval-buttons"):
                # Content, not markup: "[y]" would read as a style tag.
                yield Button(Content("Allow once  [y]"), id="allow_once", variant="success")
                yield Button(Content(f"Allow {request.tool} this session  [a]"), id="allow_always",
                             variant="warning")
                yield Button(Content("Deny  [n]"), id="deny", variant="error")

    def on_mount(self) -> None:
        self.query_one("#deny", Button).focus()

    def action_decide(self, decision: Decision) -> None:
        self.dismiss(decision)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id)  # type: ignore[arg-type]
