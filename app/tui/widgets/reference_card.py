"""A card in the sidebar: one reference (or the aggregator) and how its part of the turn is going."""

from __future__ import annotations

from textual.content import Content
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from ...engine import (
    AggregatorFinished,
    AggregatorStarted,
    CallRetrying,
    ReferenceFinished,
    ReferenceProgress,
    ReferenceQueued,
    ReferenceStarted,
    clock,
)

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
GLYPHS = {
    "idle": "○",
    "queued": "◌",
    "waiting": "◌",
    "running": "●",
    "ok": "✓",
    "failed": "✗",
    "timeout": "⏱",
    "cancelled": "–",
    "cut_off": "✂",
    "late": "»",
}
WORDS = {
    "idle": "ready",
    "queued": "queued",
    "waiting": "waiting for references",
    "running": "running",
    "ok": "done",
    "failed": "failed",
    "timeout": "timed out",
    "cancelled": "cancelled",
    "cut_off": "cut off",
    "late": "not waited for",
}
STYLES = {
    "queued": "$text-muted",
    "waiting": "$text-muted",
    "running": "$accent",
    "ok": "$success",
    "failed": "$error",
    "timeout": "$warning",
    "cancelled": "$text-muted",
    "cut_off": "$warning",
    "late": "$text-muted",
    "idle": "$text-muted",
}


class ReferenceCard(Widget, can_focus=True):
    """Status, elapsed seconds, time to first token, tokens and (when it failed) why."""

    class Selected(Message):
        def __init__(self, card: ReferenceCard) -> None:
            super().__init__()
            self.card = card

    BINDINGS = [("enter", "select", "Read answer")]

    status: reactive[str] = reactive("idle")

    def __init__(self, label: str, *, index: int = -1, aggregator: bool = False, needs: str | None = None) -> None:
        super().__init__(classes="-aggregator" if aggregator else "-reference")
        self.label = label
        self.index = index
        self.aggregator = aggregator
        self.needs = needs  # the unset variable holding its provider's key, if it is unset
        self.started_at: float | None = None
        self.seconds: float | None = None
        self.first_token_seconds: float | None = None
        self.tokens: int | None = None
        self.tokens_estimated = False
        self.error: str | None = None
        self.retry: CallRetrying | None = None  # while running: the retry it is waiting for
        self.retry_at = 0.0
        self.text = ""
        self._frame = 0

    # ------------------------------------------------------------------ state

    def watch_status(self, status: str) -> None:
        self.remove_class(*(f"-{old}" for old in GLYPHS)).add_class(f"-{status}")
        # Only a running card moves (spinner, elapsed seconds): it alone refreshes itself on a timer.
        running = status == "running"
        if running != (self.auto_refresh is not None):
            self.auto_refresh = 0.1 if running else None

    def _set_status(self, status: str) -> None:
        self.status = status
        self.refresh(layout=True)  # the facts changed with it, and may take another line

    def reset(self, status: str = "queued") -> None:
        self.started_at = self.seconds = self.first_token_seconds = self.tokens = None
        self.error, self.retry, self.text, self.tokens_estimated = None, None, "", False
        self._set_status(status)

    def apply(self, event: object) -> None:
        if isinstance(event, ReferenceQueued):
            self.reset("queued")
        elif isinstance(event, ReferenceStarted):
            self.started_at = clock.monotonic()
            self._set_status("running")
        elif isinstance(event, AggregatorStarted):
            # Tool iterations restart the aggregator: its card covers the whole turn.
            if self.started_at is None:
                self.started_at = clock.monotonic()
            self.seconds = None
            self._set_status("running")
        elif isinstance(event, CallRetrying):
            self.retry, self.retry_at = event, clock.monotonic() + event.delay
            self.refresh(layout=True)
        elif isinstance(event, ReferenceProgress):
            self.retry = None
            self.first_token_seconds = event.first_token_seconds
            self.tokens, self.tokens_estimated = event.chunks, True
            self.refresh()
        elif isinstance(event, ReferenceFinished):
            self.retry = None
            self.seconds, self.first_token_seconds = event.seconds, _within(event.first_token_seconds, event.seconds)
            self.error, self.text = event.error, event.text
            if event.usage is not None:
                self.tokens, self.tokens_estimated = event.usage.completion_tokens, False
            self._set_status(event.status)
        elif isinstance(event, AggregatorFinished):
            self.retry = None
            self.seconds = round(clock.monotonic() - (self.started_at or clock.monotonic()), 3)
            if self.first_token_seconds is None:
                self.first_token_seconds = event.first_token_seconds
            self.first_token_seconds = _within(self.first_token_seconds, self.seconds)
            if event.usage is not None:
                self.tokens = (self.tokens or 0) + event.usage.completion_tokens
            if event.record.status != "ok":
                self.error = event.record.error
                self._set_status(event.record.status)
            else:
                # After tool calls the aggregator runs again: it is not done until it answers without them.
                self._set_status("running" if event.finish_reason == "tool_calls" else "ok")

    def finish(self, status: str, error: str | None = None) -> None:
        """End the aggregator card's turn (or a card left running) with a status."""
        if self.started_at is not None and self.seconds is None:
            self.seconds = round(clock.monotonic() - self.started_at, 3)
        self.first_token_seconds = _within(self.first_token_seconds, self.seconds)
        self.error = error
        self._set_status(status)

    def automatic_refresh(self) -> None:
        self._frame += 1
        super().automatic_refresh()

    # ------------------------------------------------------------------ rendering

    def _elapsed(self) -> float | None:
        if self.seconds is not None:
            return self.seconds
        if self.started_at is not None:
            return clock.monotonic() - self.started_at
        return None

    @property
    def ttft(self) -> float | None:
        """Time to first token, never more than the time shown beside it. The engine times the first token
        from its request; the card's clock (the aggregator's, a running reference's) starts when the UI hears
        of the call, later when events queue up, so unclamped it could read larger than the elapsed time."""
        return _within(self.first_token_seconds, self._elapsed())

    def render(self) -> Content:
        return self._content(self.content_size.width)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # Measured at the width it is being laid out at: what render() last saw may be stale, as when the
        # sidebar opens over the log on a narrow screen (a card a line too tall, or a line short).
        return len(self._content(width).wrap(width)) if width else 0

    def _content(self, width: int) -> Content:
        width = max(8, width)
        glyph = GLYPHS[self.status]
        if self.status == "running" and self.app.animation_level != "none":
            glyph = SPINNER[self._frame % len(SPINNER)]
        style = STYLES.get(self.status, "")
        label = self.label if len(self.label) <= width - 2 else self.label[: width - 3] + "…"
        facts = [WORDS[self.status]]
        if self.status == "idle" and self.needs:
            facts, style = [f"needs {self.needs}"], "$text-warning"
        elapsed = self._elapsed()
        if elapsed is not None and self.status not in ("queued", "idle"):
            facts[0] += f" {elapsed:.1f}s"
        if self.tokens:
            facts.append(f"{'~' if self.tokens_estimated else ''}{self.tokens:,} tok")
        ttft_seconds = self.ttft
        if ttft_seconds is not None:
            ttft = f"ttft {ttft_seconds:.1f}s"
            # Time to first token is the first thing to give up on a narrow sidebar (one line per fact set).
            if len("  " + " · ".join([*facts, ttft])) <= width:
                facts.insert(1, ttft)
        lines = [
            Content.assemble((glyph, style), " ", (label, "bold")),
            Content.assemble(("  " + " · ".join(facts), style if self.status != "ok" else "$text-muted")),
        ]
        if self.retry is not None and self.status == "running":
            left = max(0.0, self.retry_at - clock.monotonic())
            retry = self.retry
            reason = retry.reason if len(retry.reason) <= width - 2 else retry.reason[: width - 3] + "…"
            lines.append(
                Content.assemble(
                    (f"  ↻ retry {retry.attempt - 1}/{retry.attempts - 1} in {left:.1f}s", "$text-warning")
                )
            )
            lines.append(Content.assemble(("  " + reason, "$text-warning")))
        if self.error and self.status in ("failed", "timeout", "cut_off", "late"):
            reason = self.error if len(self.error) <= width - 2 else self.error[: width - 3] + "…"
            lines.append(
                Content.assemble(("  " + reason, "$text-warning" if self.status == "cut_off" else "$text-error"))
            )
        return Content("\n").join(lines)

    # ------------------------------------------------------------------ selection

    def action_select(self) -> None:
        self.post_message(self.Selected(self))

    def on_click(self) -> None:
        self.post_message(self.Selected(self))


def _within(ttft: float | None, elapsed: float | None) -> float | None:
    return ttft if ttft is None or elapsed is None else min(ttft, elapsed)
