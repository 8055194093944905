"""A tool call in the reply, where it happened: one line collapsed; arguments and result expanded."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Static

from ...events import ToolCallEvent
from ...tools.registry import pretty_arguments, summarize_arguments

RESULT_SHOWN = 4_000  # characters of a result shown when expanded
GLYPHS = {"requested": "◌", "awaiting_approval": "?", "running": "●", "done": "✓", "failed": "✗", "denied": "⊘",
          "cancelled": "–"}
WORDS = {"requested": "requested", "awaiting_approval": "waiting for approval", "running": "running",
         "done": "done", "failed": "failed", "denied": "denied", "cancelled": "cancelled"}
STYLES = {"awaiting_approval": "$warning", "running": "$accent", "done": "$success", "failed": "$error",
          "denied": "$warning", "cancelled": "$text-muted", "requested": "$text-muted"}


class ToolHeader(Static, can_focus=True):
    BINDINGS = [("enter,space", "toggle", "Expand tool")]

    def action_toggle(self) -> None:
        self.parent.toggle()  # type: ignore[union-attr]

    def on_click(self) -> None:
        self.parent.toggle()  # type: ignore[union-attr]


class ToolBlock(Vertical):
    def __init__(self, event: ToolCallEvent) -> None:
        super().__init__(classes="tool-block")
        self.event = event
        self.expanded = False

    def compose(self) -> ComposeResult:
        yield ToolHeader(self._header(), classes="tool-header")
        with Vertical(classes="tool-body"):
            yield Static(classes="tool-arguments")
            yield Static(classes="tool-result")

    def on_mount(self) -> None:
        self._refresh_body()
        self.set_class(False, "-expanded")

    def _header(self) -> Content:
        event = self.event
        style = STYLES.get(event.status, "")
        parts: list[str | tuple[str, str]] = [
            ("▸ " if not self.expanded else "▾ ", "$text-muted"),
            (GLYPHS.get(event.status, "?") + " ", style),
            (event.name, "bold"),
            "  ",
            (summarize_arguments(event.arguments), "$text-muted"),
            "  ",
            (WORDS.get(event.status, event.status), style),
        ]
        if event.seconds is not None and event.status in ("done", "failed"):
            parts.append((f" {event.seconds:.1f}s", "$text-muted"))
        return Content.assemble(*parts)

    def _refresh_body(self) -> None:
        event = self.event
        self.query_one(".tool-arguments", Static).update(Content(pretty_arguments(event.arguments)))
        result = event.result
        if result is None:
            shown = Content.assemble(("no result yet", "italic $text-muted"))
        elif len(result) > RESULT_SHOWN:
            shown = Content.assemble(result[:RESULT_SHOWN], (
                f"\n… cut: {RESULT_SHOWN:,} of {len(result):,} characters shown", "italic $text-muted"))
        else:
            shown = Content(result)
        self.query_one(".tool-result", Static).update(shown)

    def update_from(self, event: ToolCallEvent) -> None:
        self.event = event
        for status in GLYPHS:
            self.set_class(event.status == status, f"-{status}")
        self.query_one(ToolHeader).update(self._header())
        self._refresh_body()

    def toggle(self) -> None:
        self.expanded = not self.expanded
        self.set_class(self.expanded, "-expanded")
        self.query_one(ToolHeader).update(self._header())
