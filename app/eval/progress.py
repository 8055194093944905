"""The live progress bar of an eval run on stderr: done, failed, rate, time left and cost so far.

Drawn in place at a terminal, at most a few times a second; not at all when stderr is not a terminal (a
log file would fill with bars), where the command says only what it did at the end.
"""

from __future__ import annotations

import threading
from typing import TextIO

from ..config.pricing import format_cost
from ..engine import clock
from .runner import Snapshot

BAR_WIDTH = 24
REDRAW_EVERY = 0.2  # seconds between two drawings of the bar (the last one is always drawn)


def bar_line(snapshot: Snapshot, now: float) -> str:
    """One line: `answers [#####-----] 12/40 · 1 failed · 0.8/s · ETA 35s · $0.0123`."""
    total = max(snapshot.total, 1)
    filled = round(BAR_WIDTH * snapshot.done / total)
    elapsed = max(now - snapshot.started, 1e-9)
    rate = snapshot.done / elapsed
    left = (snapshot.total - snapshot.done) / rate if rate > 0 else None
    parts = [f"{snapshot.phase} [{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {snapshot.done}/{snapshot.total}"]
    if snapshot.failed:
        parts.append(f"{snapshot.failed} failed")
    if snapshot.rate_limited:
        parts.append(f"{snapshot.rate_limited} × 429")
    parts.append(f"{rate:.1f}/s")
    parts.append("ETA " + (f"{left:.0f}s" if left is not None else "?"))
    parts.append(
        format_cost(snapshot.cost) + (f" + judge {format_cost(snapshot.judge_cost)}" if snapshot.judge_cost else "")
    )
    return " · ".join(parts)


class ProgressBar:
    def __init__(self, err: TextIO, *, enabled: bool) -> None:
        self._err, self.enabled = err, enabled
        self._lock = threading.Lock()
        self._drawn_at = 0.0
        self._width = 0

    def __call__(self, snapshot: Snapshot) -> None:
        if not self.enabled:
            return
        now = clock.monotonic()
        with self._lock:
            if snapshot.done < snapshot.total and now - self._drawn_at < REDRAW_EVERY:
                return
            self._drawn_at = now
            line = bar_line(snapshot, now)
            pad = " " * max(0, self._width - len(line))
            self._width = len(line)
            self._err.write(f"\r{line}{pad}")
            self._err.flush()

    def end(self) -> None:
        """Leave the line the bar was on."""
        if self.enabled and self._width:
            with self._lock:
                self._err.write("\n")
                self._err.flush()
                self._width = 0
