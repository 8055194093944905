"""SIGTERM and SIGHUP (the terminal closed) as exceptions, so a command stops as it does on Ctrl+C: its work
cancelled and cleaned up, and an exit status that says which signal stopped it (`exit_status`)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from types import FrameType

from .exit_codes import EXIT_INTERRUPTED

STOPPING = (signal.SIGTERM, signal.SIGHUP)


class Signalled(Exception):
    """SIGTERM or SIGHUP arrived (raised in the main thread, wherever it was)."""

    def __init__(self, number: int) -> None:
        super().__init__(signal.Signals(number).name)
        self.number = number


def _raise(number: int, _frame: FrameType | None) -> None:
    raise Signalled(number)


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise Signalled in the main thread, and SIGINT
    KeyboardInterrupt; their handlers are restored after it.

    SIGINT is heard even when the process started with it ignored, as a shell without job control starts every
    background command (`moa-chat ask … &` in a script, a CI step): a SIGINT sent to it would otherwise go
    unheard, and the work run on. A SIGTERM or SIGHUP ignored at the start stays ignored: that is what `nohup`
    (or `trap '' TERM`) asks for."""
    handlers: dict[int, Callable[[int, FrameType | None], object]] = {signal.SIGINT: signal.default_int_handler}
    for stopping in STOPPING:
        if signal.getsignal(stopping) is not signal.SIG_IGN:
            handlers[stopping] = _raise
    previous = {number: signal.signal(number, handler) for number, handler in handlers.items()}
    try:
        yield
    finally:
        for number, before in previous.items():
            signal.signal(number, before)


def exit_status(number: int) -> int:
    """How a command stopped by signal `number` exits: 130 after Ctrl+C, 128 + N otherwise (as shells report)."""
    return EXIT_INTERRUPTED if number == signal.SIGINT else 128 + number
