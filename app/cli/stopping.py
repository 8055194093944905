"""SIGTERM and SIGHUP (the terminal closed) as exceptions, so a command stops as it does on Ctrl+C: its work
cancelled and cleaned up, and an exit status that says which signal stopped it (`exit_status`)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

from .exit_codes import EXIT_INTERRUPTED

STOPPING = (signal.SIGTERM, signal.SIGHUP)


class Signalled(Exception):
    """SIGTERM or SIGHUP arrived (raised in the main thread, wherever it was)."""

    def __init__(self, number: int) -> None:
        super().__init__(signal.Signals(number).name)
        self.number = number


def _raise(number: int, _frame: object) -> None:
    raise Signalled(number)


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise Signalled in the main thread; their handlers are restored
    after it."""
    previous = {number: signal.signal(number, _raise) for number in STOPPING}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def exit_status(number: int) -> int:
    """How a command stopped by signal `number` exits: 130 after Ctrl+C, 128 + N otherwise (as shells report)."""
    return EXIT_INTERRUPTED if number == signal.SIGINT else 128 + number
