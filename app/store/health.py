"""Whether the session database may be written: checked when it opens, and never written once damage is seen.

SQLite reports a damaged page only when it reads that page: a database damaged in the middle of its file
opens, lists sessions and takes a new prompt until a write lands on the bad page, and by then the turn's first
writes are in, half a turn stored ("incomplete (running)") after an error that said nothing was written. So
each store checks its file as it opens (`PRAGMA quick_check`: every page of every table and index, on a
connection of its own and a thread of its own; 76 ms for 100,000 messages), and its first write waits for
the answer. Once damage is seen, by that check or by any read or write since, the store is read-only for the
rest of the process: every write is refused before it begins (StoreDamaged), and whoever asked to hear of it
(the chat) hears once.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from .database import StoreError, is_damage

CHECK_TIMEOUT = 10.0  # seconds the check waits for a lock another process holds


class StoreDamaged(StoreError):
    """The session database is damaged: this process writes nothing more to it."""


class StoreHealth:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.damage: str | None = None  # what was found, once something was
        self._checked = threading.Event()
        self._lock = threading.Lock()
        self._listeners: list[Callable[[str], None]] = []
        self._checking: sqlite3.Connection | None = None  # the check's connection, while it runs
        self._stopped = threading.Event()

    @classmethod
    def watching(cls, path: Path) -> StoreHealth:
        """The health of the database at `path`, its check started on a thread of its own."""
        health = cls(path)
        threading.Thread(target=health.check, name="moa-store-check", daemon=True).start()
        return health

    def check(self) -> None:
        """Read every page (`PRAGMA quick_check`); what it finds is `found`."""
        try:
            with contextlib.closing(sqlite3.connect(self.path, timeout=CHECK_TIMEOUT)) as db:
                with self._lock:
                    self._checking = db
                try:
                    if self._stopped.is_set():
                        return
                    problems = [str(row[0]) for row in db.execute("PRAGMA quick_check(3)")]
                finally:
                    with self._lock:  # before the connection closes: stop() never interrupts a closed one
                        self._checking = None
            if problems != ["ok"]:
                self.found("; ".join(problems))
        except sqlite3.DatabaseError as exc:
            if is_damage(exc) and not self._stopped.is_set():
                self.found(str(exc))
            # Anything else (a lock held past the timeout, a passing I/O error) says nothing of the pages:
            # each write meets it, or not, for itself.
        finally:
            self._checked.set()

    def stop(self) -> None:
        """As the store closes: the check, if it still runs, is interrupted, and its connection closed before
        this returns (an open one would keep the write-ahead log beside the file after the process ends)."""
        self._stopped.set()
        with self._lock:
            if self._checking is not None:
                self._checking.interrupt()
        self._checked.wait()

    def found(self, what: str) -> None:
        """Damage was seen (`what` SQLite said): from now on nothing is written, and the listeners hear it."""
        with self._lock:
            if self.damage is not None:
                return
            self.damage = what
            listeners = list(self._listeners)
        for listener in listeners:
            listener(self.message)

    @property
    def message(self) -> str:
        return (
            f"the session database {self.path} is damaged ({self.damage}); moa-chat writes nothing more to it, so "
            "what was stored stays as it is. `moa-chat doctor` checks it and says how to recover what it holds"
        )

    def writable(self) -> None:
        """Before a write: wait for the check made at opening, then StoreDamaged if damage has been seen."""
        self._checked.wait()
        if self.damage is not None:
            raise StoreDamaged(self.message)

    def on_damage(self, listener: Callable[[str], None]) -> None:
        """Call `listener` with the message once damage is seen (at once if it already was), on the thread
        that saw it."""
        with self._lock:
            if self.damage is None:
                self._listeners.append(listener)
                return
        listener(self.message)
