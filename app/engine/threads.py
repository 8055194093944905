"""Threads kept for the next call, so that handing one work is a queue put, not a thread's start.

`threading.Thread.start` blocks its caller until the new thread runs. A fan-out that started threads for each
reference (its worker, then its request's) would wait at every start for the GIL while the requests before it
are built (CPU for the body's JSON and the SDK's and httpx's request, more as the conversation grows), and the
requests would leave one start after another. A kept thread is already running; the caller goes on at once.

Kept threads are daemons: one left waiting on a provider that a
cancel walked away from never holds up the process's exit. A thread with no work for `IDLE` seconds leaves,
so an idle app keeps none, and one that finds `MAX_IDLE` others already waiting leaves at once: a burst of
work (`moa-chat api` with hundreds of turns at once) starts threads for itself that end with it. Kept, every
thread the busiest moment ever needed stays under steady load, and each holds memory of its own (its stack,
its share of the allocator's arenas, the caches of the libraries it ran): 800 threads for 300 turns at once
made the endpoint's memory rise run after run.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable

IDLE = 60.0  # seconds a kept thread waits for work before it leaves
MAX_IDLE = 64  # threads kept waiting at most; a chat's turn uses about a dozen at once
IDLE_NAME = "moa-kept"


class KeptThreads:
    """Daemon threads, each running one piece of work at a time and then waiting for the next."""

    def __init__(self, idle: float = IDLE, most_idle: int = MAX_IDLE) -> None:
        self._idle_seconds, self._most_idle = idle, most_idle
        self._lock = threading.Lock()
        self._alive = 0
        self._waiting: list[queue.SimpleQueue[tuple[Callable[[], object], str]]] = []

    def start(self, work: Callable[[], object], name: str) -> None:
        """Run `work` on a kept thread named `name` (a new one when none is free); returns at once.

        `work` should handle its own errors: one that escapes goes to `threading.excepthook`, as a thread's
        would, and the thread carries on."""
        with self._lock:
            inbox = self._waiting.pop() if self._waiting else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            with self._lock:
                self._alive += 1
            threading.Thread(target=self._serve, args=(inbox,), name=name, daemon=True).start()
        inbox.put((work, name))

    @property
    def waiting(self) -> int:
        """How many kept threads wait for work just now."""
        with self._lock:
            return len(self._waiting)

    @property
    def alive(self) -> int:
        """How many kept threads there are, working or waiting."""
        with self._lock:
            return self._alive

    def _serve(self, inbox: queue.SimpleQueue[tuple[Callable[[], object], str]]) -> None:
        thread = threading.current_thread()
        timeout: float | None = None  # the first piece of work is on its way
        while True:
            try:
                work, name = inbox.get(timeout=timeout)
            except queue.Empty:
                with self._lock:
                    if inbox in self._waiting:
                        self._waiting.remove(inbox)
                        self._alive -= 1
                        return
                # Taken from the list just as the wait ended: its work is on the way.
                timeout = None
                continue
            thread.name = name
            try:
                work()
            except BaseException:
                threading.excepthook(threading.ExceptHookArgs((*sys.exc_info(), thread)))
            del work  # what the work holds (a stream, a conversation) is not kept with the thread
            thread.name = IDLE_NAME
            timeout = self._idle_seconds
            with self._lock:
                if len(self._waiting) >= self._most_idle:
                    self._alive -= 1
                    return
                self._waiting.append(inbox)


KEPT = KeptThreads()  # the process's: looked up as threads.KEPT at each use, so a test can give it a fresh one
