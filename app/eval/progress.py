"""An eval run's progress on stderr: done, failed, rate, time left and cost so far.

At a terminal, a bar drawn in place at most a few times a second. Elsewhere (a log file, a pipe, `--json` into
a script), a plain line every LINE_EVERY seconds, from a ticker thread, so a long run with slow turns still
says it is alive; a log gets a line a while, not a bar a redraw. `-q` silences both.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TextIO

from ..config.pricing import format_cost
from ..engine import clock
from .runner import Snapshot

BAR_WIDTH = 24
REDRAW_EVERY = 0.2  # seconds between two drawings of the bar (the last one is always drawn)
LINE_EVERY = 10.0  # seconds between two progress lines off a terminal


def bar_line(snapshot: Snapshot, now: float) -> str:
    """One line: `answers [#####-----] 12/40 · 1 failed · 0.8/s · ETA 35s · $0.0123`."""
    total = max(snapshot.total, 1)
    filled = round(BAR_WIDTH * snapshot.done / total)
    return _line(snapshot, now, f"{snapshot.phase} [{'#' * filled}{'-' * (BAR_WIDTH - filled)}]")


def plain_line(snapshot: Snapshot, now: float) -> str:
    """The line off a terminal: `moa-chat: answers 12/40 · 0.8/s · ETA 35s · $0.0123 · 1m05s`."""
    elapsed = max(now - snapshot.started, 0.0)
    minutes, seconds = divmod(int(elapsed), 60)
    return f"moa-chat: {_line(snapshot, now, snapshot.phase)} · {minutes}m{seconds:02d}s"


def _line(snapshot: Snapshot, now: float, head: str) -> str:
    elapsed = max(now - snapshot.started, 1e-9)
    rate = snapshot.done / elapsed
    left = (snapshot.total - snapshot.done) / rate if rate > 0 else None
    parts = [f"{head} {snapshot.done}/{snapshot.total}"]
    if snapshot.failed:
        parts.append(f"{snapshot.failed} failed")
    if snapshot.rate_limited:
        parts.append(f"{snapshot.rate_limited} × 429")
    parts.append(f"{rate:.1f}/s" if rate >= 0.1 else f"{60 * rate:.1f}/min")
    parts.append("ETA " + (f"{left:.0f}s" if left is not None else "?"))
    parts.append(
        format_cost(snapshot.cost) + (f" + judge {format_cost(snapshot.judge_cost)}" if snapshot.judge_cost else "")
    )
    return " · ".join(parts)


class ProgressBar:
    def __init__(
        self,
        err: TextIO,
        *,
        enabled: bool,
        terminal: bool = True,
        every: float = LINE_EVERY,
        now: Callable[[], float] = clock.monotonic,
    ) -> None:
        self._err, self.enabled, self.terminal = err, enabled, terminal
        self._every, self._now = every, now
        self._lock = threading.Lock()
        self._drawn_at = 0.0
        self._width = 0
        self._latest: Snapshot | None = None
        self._stopped = threading.Event()
        self._ticker: threading.Thread | None = None

    def __call__(self, snapshot: Snapshot) -> None:
        """The runner's report of how far it got: drawn at a terminal, kept for the next line elsewhere."""
        if not self.enabled:
            return
        with self._lock:
            self._latest = snapshot
            if not self.terminal:
                return
            now = self._now()
            if snapshot.done < snapshot.total and now - self._drawn_at < REDRAW_EVERY:
                return
            self._drawn_at = now
            line = bar_line(snapshot, now)
            pad = " " * max(0, self._width - len(line))
            self._width = len(line)
            self._err.write(f"\r{line}{pad}")
            self._err.flush()

    def start(self) -> None:
        """Off a terminal, begin the line every `every` seconds."""
        if self.enabled and not self.terminal and self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="moa-eval-progress", daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._stopped.wait(self._every):
            self.line()

    def line(self) -> None:
        """One plain progress line, of the latest report (none before the first)."""
        with self._lock:
            if self._latest is None:
                return
            self._err.write(plain_line(self._latest, self._now()) + "\n")
            self._err.flush()

    def end(self) -> None:
        """Leave the line the bar was on; stop the ticker."""
        self._stopped.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
        if self.enabled and self.terminal and self._width:
            with self._lock:
                self._err.write("\n")
                self._err.flush()
                self._width = 0
