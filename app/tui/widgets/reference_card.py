"""A card in the sidebar: one reference (or the aggregator) and how its part of the turn is going.

While a reference runs its card shows the end of what it has written so far, on one line, and how fast it
writes (a reasoning model that has only thought so far: "thinking…", and how fast it thinks); once a call is
priced (config `pricing:`, or the provider's own figure), what it cost.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.content import Content
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from ...config.pricing import cost_label
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
from ...engine.events import TAIL_CHARACTERS, AnswerCut
from ...text.inert import inert

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
    "unasked": "○",
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
    "unasked": "not asked this turn",
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
    "unasked": "$text-muted",
}
# Below this much writing time the rate swings with every chunk: no tokens per second until then.
RATE_AFTER = 0.5
MIN_LABEL = 8  # cells of a card's name, at least, beside its cost (else the cost goes with the other facts)


class ReferenceCard(Widget, can_focus=True):
    """Status, elapsed seconds, time to first token, tokens, cost and (when it failed) why; while running,
    its speed and a line of its text."""

    class Selected(Message):
        def __init__(self, card: ReferenceCard) -> None:
            super().__init__()
            self.card = card

    BINDINGS = [("enter", "select", "Read answer")]

    status: reactive[str] = reactive("idle")
    # The answer: what it has written so far while it runs, then the answer it gave (empty if none). A
    # reactive so that a view of it (the reference's detail screen) can watch it grow; the card redraws
    # itself when it changes.
    text: reactive[str] = reactive("", repaint=False)

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
        self.rate: float | None = None  # tokens per second while it writes
        self.thinking = False  # a running reasoning model that has thought and written nothing yet
        self.cost: float | None = None  # dollars, when priced
        self.cost_partial = False  # the aggregator's rounds: some used tokens at no known price
        self.cut: AnswerCut | None = None  # what of its answer the aggregator read, when it was cut to fit
        self._frame = 0
        self._height = 0  # lines at the last layout: a progress event that changes it must lay out again

    # ------------------------------------------------------------------ state

    def watch_status(self, status: str) -> None:
        # One restyle, not two (each of remove_class and add_class restyles on its own, and the aggregator's
        # last event comes just before the turn's end).
        self.remove_class(*(f"-{old}" for old in GLYPHS), update=False).add_class(f"-{status}")
        # Only a running card moves (spinner, elapsed seconds): it alone refreshes itself on a timer.
        running = status == "running"
        if running != (self.auto_refresh is not None):
            self.auto_refresh = 0.1 if running else None

    def _set_status(self, status: str) -> None:
        self.status = status
        self._changed()  # the facts changed with it, and may take another line

    def _changed(self) -> None:
        """Repaint; and lay out again when the card now takes more or fewer lines, and only then: a layout
        measures every widget on the screen, and a turn brings several events a second per reference."""
        width = self._width()
        self.refresh(layout=bool(width) and self._lines(width) != self._height)

    def reset(self, status: str = "queued") -> None:
        self.started_at = self.seconds = self.first_token_seconds = self.tokens = self.cut = None
        self.error, self.retry, self.text, self.tokens_estimated = None, None, "", False
        self.rate, self.cost, self.cost_partial, self.thinking = None, None, False, False
        self._set_status(status)

    def cut_to_fit(self, cut: AnswerCut) -> None:
        """Its answer reached the aggregator cut to fit the aggregator's window: the card says so."""
        self.cut = cut
        self._changed()

    def add_cost(self, cost: float | None, *, used_tokens: bool) -> None:
        """Count one call's cost (the aggregator's card adds up its rounds); a call that used tokens at no
        known price makes the sum a lower bound."""
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost
        elif used_tokens:
            self.cost_partial = True

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
            if event.role == "reference":  # what the failed attempt wrote is no part of the answer to come
                self.text, self.rate, self.tokens = "", None, None
            self._changed()
        elif isinstance(event, ReferenceProgress):
            self.retry = None
            self.first_token_seconds = event.first_token_seconds
            self.tokens, self.tokens_estimated = event.chunks, True
            self.rate = _rate(event)
            self.text = event.text
            self.thinking = not event.text and event.thinking_seconds is not None
            self._changed()  # a first line of text, or the facts taking another line, make it taller
        elif isinstance(event, ReferenceFinished):
            self.retry, self.rate = None, None
            self.seconds, self.first_token_seconds = event.seconds, _within(event.first_token_seconds, event.seconds)
            self.error, self.text = event.error, event.text
            if event.usage is not None:
                self.tokens, self.tokens_estimated = event.usage.completion_tokens, False
            self.cost, self.cost_partial = None, False
            self.add_cost(event.record.cost, used_tokens=event.usage is not None)
            self._set_status(event.status)
        elif isinstance(event, AggregatorFinished):
            self.retry = None
            self.seconds = round(clock.monotonic() - (self.started_at or clock.monotonic()), 3)
            if self.first_token_seconds is None:
                self.first_token_seconds = event.first_token_seconds
            self.first_token_seconds = _within(self.first_token_seconds, self.seconds)
            if event.usage is not None:
                self.tokens = (self.tokens or 0) + event.usage.completion_tokens
            self.add_cost(event.record.cost, used_tokens=event.usage is not None)
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

    def _width(self) -> int:
        # The width of the last layout. Not content_size: that asks the screen's compositor, which rebuilds its
        # map of every widget when a layout is pending (most of a long chat's layout time).
        return max(0, self.outer_size.width - self.styles.gutter.width)

    def render(self) -> Content:
        return self._content(self._width())

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # Measured at the width it is being laid out at: what render() last saw may be stale, as when the
        # sidebar opens over the log on a narrow screen (a card a line too tall, or a line short).
        self._height = self._lines(width) if width else 0
        return self._height

    def _lines(self, width: int) -> int:
        return len(self._content(width).wrap(width))

    def _cost_text(self) -> str | None:
        """What its calls cost; nothing for a free one (a local model) or one with no price at all."""
        if not self.cost:
            return None
        return cost_label(self.cost, complete=not self.cost_partial)

    def _facts(self, facts: list[str], ttft: str | None, width: int) -> list[str]:
        """The facts on as few lines as they take, each fact whole on one line. Time to first token is the
        first thing to give up on a narrow sidebar: it shows only when everything fits on one line."""
        if ttft is not None:
            line = "  " + " · ".join([facts[0], ttft, *facts[1:]])
            if len(line) <= width:
                return [line]
        lines = ["  " + facts[0]]
        for fact in facts[1:]:
            if len(lines[-1]) + 3 + len(fact) <= width:
                lines[-1] += " · " + fact
            else:
                lines.append("  " + fact)
        return lines

    @property
    def tail(self) -> str:
        """The end of what a running reference has written so far (none once it has finished)."""
        return self.text[-TAIL_CHARACTERS:] if self.status == "running" else ""

    def _preview(self, width: int) -> str | None:
        """The last of what a running reference has written, as one line that fits."""
        if not self.tail:
            return "  thinking…" if self.thinking and self.status == "running" else None
        line = inert(" ".join(self.tail.split()))
        room = width - 2
        if cell_len(line) > room:
            line = "…" + _last_cells(line, room - 1)
        return "  " + line

    def _content(self, width: int) -> Content:
        width = max(8, width)
        glyph = GLYPHS[self.status]
        if self.status == "running" and self.app.animation_level != "none":
            glyph = SPINNER[self._frame % len(SPINNER)]
        style = STYLES.get(self.status, "")
        facts = [WORDS[self.status]]
        if self.status == "idle" and self.needs:
            facts, style = [f"needs {self.needs}"], "$text-warning"
        facts_style = style if self.status != "ok" else "$text-muted"
        # The cost sits at the end of the name's line, so that a panel's costs line up in a column (and the
        # facts keep their one line): the name gives way to it, down to a few letters.
        cost = self._cost_text()
        beside = cost is not None and width - 3 - len(cost) >= MIN_LABEL
        room = width - 2 - (len(cost) + 1 if beside and cost else 0)
        label = self.label if len(self.label) <= room else self.label[: room - 1] + "…"
        head = Content.assemble((glyph, style), " ", (label, "bold"))
        if beside and cost:
            head = Content.assemble(head, " " * max(1, width - head.cell_length - len(cost)), (cost, facts_style))
        elapsed = self._elapsed()
        if elapsed is not None and self.status not in ("queued", "idle"):
            facts[0] += f" {elapsed:.1f}s"
        writing = self.rate is not None and self.status == "running"
        if writing and elapsed is not None:
            # The spinner and the text under it say it runs: the word would push its speed onto a line of
            # its own in a sidebar's width.
            facts[0] = f"{elapsed:.1f}s"
        if self.tokens:
            facts.append(f"{'~' if self.tokens_estimated else ''}{self.tokens:,} tok")
        if writing:
            facts.append(f"{self.rate:,.0f} tok/s")
        if cost is not None and not beside:
            facts.append(cost)
        if self.cut is not None:
            facts.append(f"cut to fit {self.cut.kept * 100 // max(1, self.cut.total)}%")
        ttft_seconds = self.ttft
        ttft = f"ttft {ttft_seconds:.1f}s" if ttft_seconds is not None else None
        lines = [
            head,
            *(Content.assemble((line, facts_style)) for line in self._facts(facts, ttft, width)),
        ]
        preview = self._preview(width)
        if preview is not None:
            lines.append(Content.assemble((preview, "italic $text-muted")))
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


def _rate(event: ReferenceProgress) -> float | None:
    """Tokens per second since the first one (a chunk is about a token): the model's writing speed, not
    diluted by the wait for it to start; while it only thinks, since its first reasoning delta."""
    # A reasoning model's chunks count its thinking too: its speed runs from whichever came first.
    starts = [s for s in (event.first_token_seconds, event.thinking_seconds) if s is not None]
    if not starts:
        return None
    began = min(starts)
    writing = event.seconds - began
    return event.chunks / writing if writing >= RATE_AFTER else None


def _last_cells(text: str, cells: int) -> str:
    """The end of `text` that fits in `cells` columns (a wide character takes two)."""
    taken, used = [], 0
    for character in reversed(text):
        used += cell_len(character)
        if used > cells:
            break
        taken.append(character)
    return "".join(reversed(taken))
