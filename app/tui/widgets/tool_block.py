"""A tool call in the reply, where it happened: one line collapsed; arguments and result expanded."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import Static

from ...session import ToolCallEvent
from ...tools.registry import pretty_arguments, summarize_arguments

RESULT_SHOWN = 4_000  # characters of a result shown when expanded
GLYPHS = {
    "requested": "◌",
    "awaiting_approval": "?",
    "running": "●",
    "done": "✓",
    "failed": "✗",
    "denied": "⊘",
    "cancelled": "–",
}
WORDS = {
    "requested": "requested",
    "awaiting_approval": "waiting for approval",
    "running": "running",
    "done": "done",
    "failed": "failed",
    "denied": "denied",
    "cancelled": "cancelled",
}
STYLES = {
    "awaiting_approval": "$warning",
    "running": "$accent",
    "done": "$success",
    "failed": "$error",
    "denied": "$warning",
    "cancelled": "$text-muted",
    "requested": "$text-muted",
}


class ToolHeader(Static, can_focus=True):
    # Two bindings for one key, so that the footer says what Enter will do: only one is active at a time.
    BINDINGS = [
        Binding("enter,space", "toggle_block(True)", "Expand tool"),
        Binding("enter,space", "toggle_block(False)", "Collapse tool"),
    ]

    class Toggled(Message):
        """The user asked to expand or collapse the block this header belongs to."""

    @property
    def _expanded(self) -> bool:
        return isinstance(self.parent, ToolBlock) and self.parent.expanded

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_block":
            return parameters == (not self._expanded,)
        return True

    def action_toggle_block(self, expand: bool) -> None:
        self.post_message(self.Toggled())

    def on_click(self) -> None:
        self.post_message(self.Toggled())


class ToolBlock(Vertical):
    def __init__(self, event: ToolCallEvent) -> None:
        super().__init__(classes=f"tool-block -{event.status}")
        self.event = event

    @property
    def expanded(self) -> bool:
        return self.has_class("-expanded")

    def compose(self) -> ComposeResult:
        yield ToolHeader(self._header(), classes="tool-header")
        with Vertical(classes="tool-body"):
            # The arguments never change; the result arrives with later events.
            yield Static(Content(pretty_arguments(self.event.arguments)), classes="tool-arguments")
            yield Static(self._result(), classes="tool-result")

    def _header(self) -> Content:
        event = self.event
        style = STYLES.get(event.status, "")
        # Status first: the line ends in an ellipsis when the arguments are long, and what happened (above
        # all "denied") must never be what is cut.
        status = f"{GLYPHS.get(event.status, '?')} {WORDS.get(event.status, event.status)}"
        seconds = f" {event.seconds:.1f}s" if event.seconds is not None and event.status in ("done", "failed") else ""
        return Content.assemble(
            ("▸ " if not self.expanded else "▾ ", "$text-muted"),
            (status, f"bold {style}".strip()),
            (seconds, "$text-muted"),
            "  ",
            (event.name, "bold"),
            "  ",
            (summarize_arguments(event.arguments), "$text-muted"),
        )

    def _result(self) -> Content:
        result = self.event.result
        if result is None:
            return Content.assemble(("no result yet", "italic $text-muted"))
        if len(result) > RESULT_SHOWN:
            return Content.assemble(
                result[:RESULT_SHOWN],
                (f"\n… cut: {RESULT_SHOWN:,} of {len(result):,} characters shown", "italic $text-muted"),
            )
        return Content(result)

    def update_from(self, event: ToolCallEvent) -> None:
        self.remove_class(*(f"-{status}" for status in GLYPHS)).add_class(f"-{event.status}")
        self.event = event
        self.query_one(ToolHeader).update(self._header())
        self.query_one(".tool-result", Static).update(self._result())

    def on_tool_header_toggled(self, event: ToolHeader.Toggled) -> None:
        event.stop()
        self.toggle()

    def toggle(self) -> None:
        self.toggle_class("-expanded")
        header = self.query_one(ToolHeader)
        header.update(self._header())
        header.refresh_bindings()  # the footer's "Expand tool" becomes "Collapse tool", and back
