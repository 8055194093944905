"""What `moa-chat ask` shows while a turn runs: the reply on stdout (as it streams, or once whole), progress
on stderr, and with --show-reasoning the aggregator's thinking on stderr as it streams (dimmed at a terminal)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from collections.abc import Callable
from typing import ClassVar, TextIO

from ..engine import (
    AggregatorFinished,
    AggregatorStarted,
    AgreementChecked,
    CallRetrying,
    LayersDecided,
    ReasoningDelta,
    ReferenceFinished,
    ReferenceStarted,
    ReplyDelta,
    ReplyRestarted,
)
from ..engine.events import CompactionEnded, CompactionStarted, RequestFitted
from ..session import Notice, ServerStart, ToolCallEvent, TurnEvent
from ..text.inert import inert
from ..text.wording import plural
from ..tools.registry import summarize_arguments


class Progress:
    """Reference progress and notes on stderr; the reply itself goes to stdout as it streams, or, with
    `whole`, once the turn has ended (a pipe: a script never reads half a reply followed by a fresh one)."""

    _GLYPH: ClassVar[dict[str, str]] = {"ok": "✓", "failed": "✗", "timeout": "⏱", "cancelled": "–"}

    def __init__(
        self,
        err: TextIO,
        out: TextIO | None,
        quiet: bool,
        *,
        reader_gone: Callable[[], None] | None = None,
        whole: bool = False,
        reasoning: bool = False,
        dim: bool = False,
    ) -> None:
        """`reasoning`: write the aggregator's thinking to `err` as it streams (`dim`: in faint text, for a
        terminal)."""
        self.err, self.out, self.quiet = err, out, quiet
        self.show_reasoning, self._dim = reasoning, dim
        self._thinking = False  # a thought is being written to `err`, its line not ended yet
        self.thoughts: list[str] = []  # each aggregator round's whole thought (for --json), where it thought
        # With `whole`, the reply is written here and reaches `out` at `end_line`; a restarted reply is
        # taken back to where its round began.
        self._whole: tuple[TextIO, io.StringIO] | None = None
        if whole and out is not None:
            self._whole = (out, io.StringIO())
            self.out = self._whole[1]
        # Called once when stdout's reader has gone (`ask … | head -1`): nobody reads the rest of the reply.
        self._reader_gone = reader_gone
        self.reader_went_away = False
        self._lock = threading.Lock()
        self._wrote_reply = False
        self._any_reply = False
        self._after_tools = False
        self._ends_line = False  # the last reply text written ended with a newline
        self._round_start: tuple[int, bool, bool, bool, bool] = (0, False, False, False, False)

    def _state(self) -> tuple[int, bool, bool, bool, bool]:
        written = self._whole[1].tell() if self._whole is not None else 0
        return written, self._wrote_reply, self._any_reply, self._after_tools, self._ends_line

    def __call__(self, event: TurnEvent) -> None:
        with self._lock:
            if isinstance(event, ReasoningDelta):
                if self.show_reasoning and event.role == "aggregator":
                    self._think(event.text)
                return
            self._end_thought()
            if isinstance(event, AggregatorFinished) and event.reasoning:
                self.thoughts.append(event.reasoning)
            if isinstance(event, ToolCallEvent):
                self._after_tools = True
            if isinstance(event, AggregatorStarted):
                self._round_start = self._state()
            if isinstance(event, ReplyRestarted):
                self._restart()
            if isinstance(event, ReplyDelta):
                if self.out is not None:
                    if self._after_tools and self._any_reply:
                        # A blank line between the text before the tool calls and the text after them; the
                        # first newline may already be out, written to end the line before a progress line.
                        self.out.write("\n\n" if self._wrote_reply else "\n")
                    self._after_tools = False
                    self._any_reply = True
                    try:
                        self.out.write(inert(event.text))
                        self.out.flush()
                    except BrokenPipeError:
                        self._lost_reader()
                        return
                    self._ends_line = event.text.endswith("\n")
                    self._wrote_reply = True
                return
            line = self._describe(event)
            if line and not self.quiet:
                if self._wrote_reply and self.out is not None:
                    try:
                        self.out.write("\n")
                        self.out.flush()
                    except BrokenPipeError:
                        self._lost_reader()
                    self._wrote_reply = False
                self.err.write(inert(line) + "\n")
                self.err.flush()

    def _think(self, text: str) -> None:
        """A piece of the aggregator's thinking, on stderr: the reply on stdout stays the answer alone."""
        if not self._thinking:
            self._thinking = True
            if self._dim:
                self.err.write("\x1b[2m")
        self.err.write(inert(text))
        self.err.flush()

    def _end_thought(self) -> None:
        """The thought ends its line (and its faint text) before anything else is written."""
        if not self._thinking:
            return
        self._thinking = False
        self.err.write("\x1b[22m\n" if self._dim else "\n")
        self.err.flush()

    def _restart(self) -> None:
        """The round's reply starts afresh: held back, what it had written is taken back; shown, the fresh
        one starts on a line of its own, after the line on stderr that says why."""
        if self._whole is None:
            return
        written, self._wrote_reply, self._any_reply, self._after_tools, self._ends_line = self._round_start
        buffer = self._whole[1]
        buffer.seek(written)
        buffer.truncate()

    def end_line(self) -> None:
        """End the reply (whole or cut short) on a line of its own, so the shell prompt does not follow it;
        a reply held back until whole is written now."""
        with self._lock:
            self._end_thought()
            if self._wrote_reply and self.out is not None and not self._ends_line:
                try:
                    self.out.write("\n")
                    self.out.flush()
                except BrokenPipeError:
                    self._lost_reader()
            self._wrote_reply = False
            if self._whole is not None and self.out is not None:
                out, buffer = self._whole
                self._whole, self.out = None, out
                try:
                    out.write(buffer.getvalue())
                    out.flush()
                except BrokenPipeError:
                    self._lost_reader()

    def _lost_reader(self) -> None:
        """Stop writing the reply, and say so once; stdout points at /dev/null so the exit's flush is quiet."""
        self.out = None
        if self.reader_went_away:
            return
        self.reader_went_away = True
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if self._reader_gone is not None:
            self._reader_gone()

    def _describe(self, event: TurnEvent) -> str | None:
        if isinstance(event, ReferenceStarted):
            return f"  … {event.label}"
        if isinstance(event, ReferenceFinished):
            glyph = self._GLYPH.get(event.status, "?")
            detail = f"{event.seconds:.1f}s"
            if event.usage:
                detail += f", {event.usage.completion_tokens} tokens"
            if event.error:
                detail += f" — {event.error}"
            return f"  {glyph} {event.label} ({detail})"
        if isinstance(event, AgreementChecked):
            if event.record is not None and event.record.status == "cancelled":
                return None  # the turn's end says it was cancelled
            verdict = "aggregating now" if event.agreed else f"layer {event.layer + 1} next"
            judged = ""
            if event.record is not None:
                tokens = f", {event.record.usage.total_tokens} tokens" if event.record.usage else ""
                judged = f" ({event.record.label}, {event.record.seconds:.1f}s{tokens})"
            return f"  ≟ layer {event.layer}: {event.reason}, {verdict}{judged}"
        if isinstance(event, LayersDecided):
            return f"  ≡ {event.line}"
        if isinstance(event, CallRetrying):
            return (
                f"  ↻ {event.label}: {event.reason} — retrying in {event.delay:.1f} s "
                f"(attempt {event.attempt} of {event.attempts})"
            )
        if isinstance(event, ReplyRestarted):
            fresh = "" if self._whole is not None or self.out is None else "; the reply below starts afresh"
            return f"  ↻ {event.label}: {event.reason} — asking again{fresh}"
        if isinstance(event, AggregatorStarted):
            if event.guidance_reused:
                return None
            if not event.references_total:  # solo: no panel to count
                return f"  → {event.label} writing (solo)"
            answered = f"{event.references_ok}/{plural(event.references_total, 'reference')} answered"
            return f"  → {event.label} writing ({answered})"
        if isinstance(event, ToolCallEvent) and event.status in ("done", "failed", "denied", "cancelled"):
            took = f" {event.seconds:.1f}s" if event.seconds else ""
            why = ""
            if event.status == "denied":
                why = (
                    " (it reaches this machine or its network: run with --allow-local to allow)"
                    if event.name == "fetch_url"
                    else " (needs approval: run with --yes to allow)"
                )
            elif event.status == "failed" and event.result:
                why = f": {event.result.splitlines()[0][:160]}"
            return f"  ⚙ {event.name}({summarize_arguments(event.arguments)}) {event.status}{took}{why}"
        if isinstance(event, Notice):
            return f"  ! {event.text}"
        if isinstance(event, ServerStart):
            # A start that fails ends the turn, whose error line says why (naming the server's log).
            return None if event.stage == "failed" else f"  ▸ {event.text}"
        return self._describe_context(event)

    @staticmethod
    def _describe_context(event: TurnEvent) -> str | None:
        """Compaction, and requests fitted to their windows."""
        if isinstance(event, CompactionStarted):
            what = f"{plural(event.exchanges, 'earlier exchange')} ({event.tokens:,} tokens)"
            return f"  ▸ summarising {what} with {event.label}…"
        if isinstance(event, CompactionEnded):
            if event.error is not None:
                return f"  ! the conversation was not compacted: {event.error}; it is as it was"
            return f"  ▸ {event.line}"
        if isinstance(event, RequestFitted):
            parts = []
            if event.dropped:
                parts.append(f"{plural(event.dropped, 'earlier message')} left out")
            if event.cuts:
                kept = sum(cut.kept for cut in event.cuts) / max(1, sum(cut.total for cut in event.cuts))
                parts.append(f"{plural(len(event.cuts), 'answer')} cut to fit (about {kept:.0%} kept)")
            window = f"{event.sent_tokens:,} of its {event.window:,}-token window"
            return f"  ✂ {event.label}: {', '.join(parts)} ({window})"
        return None
