"""Cooperative cancellation for a turn: a flag the engine checks, plus closers for open HTTP streams.

Checking a flag alone is not prompt: a thread blocked reading a silent stream would only notice at the
next chunk. Closing the stream's connection ends that read at once. Before there is a stream — a request
waiting for the provider's first byte, which a reasoning model can make a minute — there is nothing to
close yet, so `call` runs the request on a daemon thread and walks away from it when cancelled.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import TypeVar

from . import threads

T = TypeVar("T")


class Cancelled(Exception):
    """Raised inside a turn when the user cancelled it."""


class CancelToken:
    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._closers: dict[int, Callable[[], object]] = {}
        self._next = 0
        self._parent: tuple[CancelToken, int] | None = None

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

    def child(self) -> CancelToken:
        """A token cancelled with this one, that can also be cancelled alone (one reference that timed out)."""
        child = CancelToken()
        with self._lock:
            if self._event.is_set():
                child._event.set()
                return child
            handle = self._next
            self._next += 1
            self._closers[handle] = child.cancel
        child._parent = (self, handle)
        return child

    def release(self) -> None:
        """Detach a finished child from its parent, so a long turn's token does not collect dead ones."""
        if self._parent is not None:
            parent, handle = self._parent
            self._parent = None
            with parent._lock:
                parent._closers.pop(handle, None)

    def sleep(self, seconds: float) -> None:
        """Wait `seconds`, or less with Cancelled if the token is cancelled meanwhile."""
        if self._event.wait(max(seconds, 0.0)):
            raise Cancelled()

    def wait_for(self, future: Future[T]) -> T:
        """`future`'s result, or Cancelled as soon as the token is cancelled; the future is then cancelled too,
        which tells whoever was to answer it (a dialog) that nobody waits any more."""
        woken = threading.Event()
        future.add_done_callback(lambda _done: woken.set())
        with contextlib.suppress(Cancelled), self.closing(woken.set):
            woken.wait()
        if self.cancelled:
            future.cancel()
            raise Cancelled()
        return future.result()

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

    def call(
        self, request: Callable[[], T], *, discard: Callable[[T], object] | None = None, name: str = "moa-request"
    ) -> T:
        """Run a blocking request so that cancelling returns at once, with Cancelled.

        The request runs on a kept daemon thread (engine.threads), so an abandoned one never holds up the
        process's exit. When it answers after all, its result goes to `discard` (to close the stream nobody
        will read).
        """
        self.raise_if_cancelled()
        finished = threading.Event()
        lock = threading.Lock()
        outcome: list[tuple[bool, object]] = []
        abandoned = False

        def run() -> None:
            try:
                result: tuple[bool, object] = (True, request())
            except BaseException as exc:
                result = (False, exc)
            with lock:
                outcome.append(result)
                late = abandoned
            finished.set()
            if late and result[0] and discard is not None:
                with contextlib.suppress(Exception):
                    discard(result[1])  # type: ignore[arg-type]

        threads.KEPT.start(run, name)
        with contextlib.suppress(Cancelled), self.closing(finished.set):
            finished.wait()
        with lock:
            if not outcome:
                abandoned = True
                raise Cancelled()
            ok, value = outcome[0]
        if ok:
            return value  # type: ignore[return-value]
        raise value  # type: ignore[misc]
