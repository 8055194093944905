"""Cooperative cancellation for a turn: a flag the engine checks, plus closers for open HTTP streams.

Checking a flag alone is not prompt: a thread blocked reading a silent stream would only notice at the
next chunk. Closing the stream's connection ends that read at once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator


class Cancelled(Exception):
    """Raised inside a turn when the user cancelled it."""


class CancelToken:
    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._closers: dict[int, Callable[[], object]] = {}
        self._next = 0

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            closers = list(self._closers.values())
            self._closers.clear()
        for close in closers:
            with contextlib.suppress(Exception):
                close()

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise Cancelled()

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True if cancelled meanwhile."""
        return self._event.wait(seconds)

    @contextlib.contextmanager
    def closing(self, close: Callable[[], object]) -> Iterator[None]:
        """Run `close` if the turn is cancelled while the block runs (or was already cancelled)."""
        with self._lock:
            already = self._event.is_set()
            if not already:
                handle = self._next
                self._next += 1
                self._closers[handle] = close
        if already:
            with contextlib.suppress(Exception):
                close()
            raise Cancelled()
        try:
            yield
        finally:
            with self._lock:
                self._closers.pop(handle, None)
