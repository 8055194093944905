"""Waiting in tests for a state, never for a time: poll a condition until it holds, with a generous deadline.

A deadline here only bounds how long a broken run hangs; a passing run waits exactly as long as the state takes
to arrive, however loaded the machine. (A Pilot test waits with tui_helpers.wait_until, which lets the app run
between looks.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

DEADLINE = 30.0  # seconds: far above what any state takes on a loaded 2-core machine


def seconds_until(predicate: Callable[[], object], timeout: float = DEADLINE, interval: float = 0.02) -> float | None:
    """Seconds until `predicate()` held, or None if it never did within `timeout`."""
    started = time.monotonic()
    while True:
        if predicate():
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            return None
        time.sleep(interval)


def wait_until(
    predicate: Callable[[], T],
    what: str,
    *,
    timeout: float = DEADLINE,
    interval: float = 0.02,
    show: Callable[[], str] | None = None,
) -> T:
    """`predicate()`'s first true value; fails the test, naming `what` (and `show()`), if none came in `timeout`."""
    found: list[T] = []

    def holds() -> bool:
        value = predicate()
        if value:
            found.append(value)
        return bool(value)

    if seconds_until(holds, timeout, interval) is None:
        detail = f"\n{show()}" if show is not None else ""
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}{detail}")
    return found[0]


def proc_stat(pid: int) -> list[str] | None:
    """/proc/PID/stat fields after the command name (state, ppid, pgrp, ...), or None if there is none."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()


def alive(pid: int) -> bool:
    """Whether process `pid` runs. A zombie counts as gone: it has stopped, and only waits for whoever reaps it."""
    fields = proc_stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")
