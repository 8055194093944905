"""Providers moa-chat runs itself: started on first use, asked for their base URL, stopped at exit.

The offline demo is one; a local model server is the next. Each is a `ManagedProvider`; `start(name)`
starts the named one once per process (every caller that asks meanwhile waits for that one start) and is
None for a provider that is simply an address. A start that takes a while (the local model: a second or
two, longer from a cold disk) is reported as `ServerStart` events to whoever asked with a `report`: the
session turns them into the line the chat and `moa-chat ask` show.

Each start runs on a thread of its own, so a caller can stop waiting (a cancelled turn) while the server
goes on starting for the next one.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from ..config import DEMO_PROVIDER

Stage = Literal["starting", "ready", "failed"]


@dataclass(frozen=True)
class ServerStart:
    """A provider moa-chat runs itself is starting, is ready, or could not start."""

    provider: str
    stage: Stage
    text: str  # the sentence to show, e.g. "Starting the local model (SmolLM2-135M-Instruct) on 127.0.0.1:41234…"
    what: str = ""  # what starts: "the local model (SmolLM2-135M-Instruct) on 127.0.0.1:41234"
    seconds: float | None = None  # ready or failed: how long the start took


Reporter = Callable[[ServerStart], None]


class StartAbandoned(Exception):
    """The caller stopped waiting for a start (its turn was cancelled); the start itself goes on."""


class ManagedProvider(Protocol):
    def start(self, announce: Callable[[str], None] | None = None) -> None:
        """Start serving; returns once requests can be answered. A start worth showing calls `announce`
        once, with what it starts ("the local model (NAME) on 127.0.0.1:PORT"), before it waits."""

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, valid after start()."""

    def stop(self) -> None:
        """Stop serving and release what start() took (threads, processes, ports); also while starting."""


def _demo() -> ManagedProvider:
    from .demo import DemoProvider

    return DemoProvider()


def _local() -> ManagedProvider:
    from .local import LocalServer

    return LocalServer()


def _local_unavailable() -> str | None:
    from .local import unavailable

    return unavailable()


# Factories, so that a provider nobody uses costs nothing, not even its import.
FACTORIES: dict[str, Callable[[], ManagedProvider]] = {DEMO_PROVIDER: _demo, "local": _local}
# Why a provider cannot start on this machine (None: it can), asked before a preset is offered or a turn begins;
# a provider not named here always can. A test that swaps a factory for a stand-in swaps its entry here too.
PREREQUISITES: dict[str, Callable[[], str | None]] = {"local": _local_unavailable}


def unavailable(name: str) -> str | None:
    """Why the managed provider `name` cannot start here, or None."""
    check = PREREQUISITES.get(name)
    return check() if check is not None else None


class _Start:
    """One start under way: its provider, its outcome once done, and who wants to hear about it."""

    def __init__(self, name: str, provider: ManagedProvider) -> None:
        self.name, self.provider = name, provider
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.starting: ServerStart | None = None  # told again to whoever starts listening later
        self._listeners: list[Reporter] = []
        self._lock = threading.Lock()

    def listen(self, report: Reporter) -> None:
        with self._lock:
            self._listeners.append(report)
            starting = self.starting
        if starting is not None:
            _safely(report, starting)

    def unlisten(self, report: Reporter) -> None:
        with self._lock:
            if report in self._listeners:
                self._listeners.remove(report)

    def _tell(self, event: ServerStart) -> None:
        with self._lock:
            if event.stage == "starting":
                self.starting = event
            listeners = list(self._listeners)
        for report in listeners:
            _safely(report, event)

    def run(self) -> None:
        began = time.monotonic()
        what = ""

        def announce(description: str) -> None:
            nonlocal what
            what = description
            self._tell(ServerStart(self.name, "starting", f"Starting {description}…", description))

        try:
            self.provider.start(announce)
        except BaseException as exc:
            self.error = exc
        with _lock:
            _pending.pop(self.name, None)
            if self.error is None:
                _running[self.name] = self.provider
        try:
            if what:
                seconds = round(time.monotonic() - began, 1)
                stage: Stage
                if self.error is None:
                    text, stage = f"{_capital(what)} is ready (started in {seconds:.1f}s)", "ready"
                else:
                    text, stage = f"{_capital(what)} did not start: {self.error}", "failed"
                self._tell(ServerStart(self.name, stage, text, what, seconds))
        finally:
            self.done.set()


def _safely(report: Reporter, event: ServerStart) -> None:
    """A front end that cannot show the news (its screen closed) must not stop the server starting."""
    with contextlib.suppress(Exception):
        report(event)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


_running: dict[str, ManagedProvider] = {}
_pending: dict[str, _Start] = {}
_lock = threading.Lock()
_at_exit = False


def start(name: str, report: Reporter | None = None, *, abandon: Callable[[], bool] | None = None) -> str | None:
    """The base URL of `name`, started first if it is a provider moa-chat runs and is not running yet;
    None for any other provider. `report` hears how the start goes (also one already under way); when
    `abandon()` turns true the wait ends with StartAbandoned. A failed start raises its error here (and
    the next call tries again)."""
    global _at_exit
    factory = FACTORIES.get(name)
    if factory is None:
        return None
    owner = False
    with _lock:
        provider = _running.get(name)
        if provider is not None:
            return provider.base_url
        pending = _pending.get(name)
        if pending is None:
            pending = _pending[name] = _Start(name, factory())
            owner = True
            if not _at_exit:
                atexit.register(stop_all)
                _at_exit = True
    if report is not None:
        pending.listen(report)
    if owner:
        threading.Thread(target=pending.run, name=f"moa-start-{name}", daemon=True).start()
    try:
        while not pending.done.wait(0.1 if abandon is not None else None):
            if abandon is not None and abandon():
                raise StartAbandoned(name)
    finally:
        if report is not None:
            pending.unlisten(report)
    if pending.error is not None:
        raise pending.error
    return pending.provider.base_url


def running_url(name: str) -> str | None:
    """The base URL of `name` if moa-chat runs it and it is running now; never starts it."""
    with _lock:
        provider = _running.get(name)
    return provider.base_url if provider is not None else None


def stop_all() -> None:
    with _lock:
        running = list(_running.values())
        _running.clear()
        starting = [pending.provider for pending in _pending.values()]
    for provider in (*running, *starting):  # a start under way is stopped too: its process goes with us
        provider.stop()
