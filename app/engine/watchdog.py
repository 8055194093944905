"""Time limits on a model call: the wait for its answer to begin, and any silence once it has.

The HTTP client's read timeout cannot tell the two apart (a reasoning model may think for a minute before
its first token, yet a stream silent that long mid-answer is dead), it is reset by a provider's keep-alive
comments or an empty first chunk, and its error names neither limit. So a watched call notes when its
answer begins (the first text, reasoning or tool call) and every byte it receives after that, and one
daemon thread, shared by all calls, expires the ones that waited too long. Expiring is the call's business
(it closes its stream, see ModelCall); the watchdog only decides.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from . import clock

TICK = 0.1  # seconds between looks; a limit is kept to within this


class ByteWatch:
    """One call's timing against its limits (None: no limit)."""

    def __init__(self, *, first_token: float | None, stall: float | None, expire: Callable[[str], None]) -> None:
        self.first_token, self.stall, self._expire = first_token, stall, expire
        self.started = clock.monotonic()
        self.answering = False
        self.last_byte = self.started

    def byte(self) -> None:
        """Some bytes arrived (a keep-alive comment counts: the connection is alive)."""
        self.last_byte = clock.monotonic()

    def answer(self) -> None:
        """The answer itself has begun."""
        self.answering = True
        self.last_byte = clock.monotonic()

    def overdue(self, now: float) -> str | None:
        """Why this call has waited too long, or None."""
        if not self.answering:
            if self.first_token is not None and now - self.started > self.first_token:
                return f"no answer began within {self.first_token:g} s (network: first_token_timeout)"
        elif self.stall is not None and now - self.last_byte > self.stall:
            return f"the answer stalled: nothing arrived for {self.stall:g} s (network: stall_timeout)"
        return None

    def expire(self, reason: str) -> None:
        self._expire(reason)


class Watchdog:
    """Checks every watched call each TICK; its thread runs only while there is something to watch."""

    def __init__(self) -> None:
        self._watches: set[ByteWatch] = set()
        self._lock = threading.Lock()
        self._running = False

    def watch(self, watch: ByteWatch) -> None:
        if watch.first_token is None and watch.stall is None:
            return
        with self._lock:
            self._watches.add(watch)
            if not self._running:
                self._running = True
                threading.Thread(target=self._run, name="moa-watchdog", daemon=True).start()

    def unwatch(self, watch: ByteWatch) -> None:
        with self._lock:
            self._watches.discard(watch)

    def check(self) -> None:
        """Expire every call past its limit now (the thread does this each TICK)."""
        now = clock.monotonic()
        with self._lock:
            due = [(w, reason) for w in self._watches if (reason := w.overdue(now)) is not None]
            for watch, _ in due:
                self._watches.discard(watch)
        for watch, reason in due:
            watch.expire(reason)

    def _run(self) -> None:
        while True:
            time.sleep(TICK)
            self.check()
            with self._lock:
                if not self._watches:
                    self._running = False
                    return


WATCHDOG = Watchdog()
