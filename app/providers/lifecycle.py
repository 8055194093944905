"""Providers moa-chat runs itself: started on first use, asked for their base URL, stopped at exit.

The offline demo is one; a local model server is the next. Each is a `ManagedProvider`; `base_url(name)`
starts the named one once per process and is None for a provider that is simply an address.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from typing import Protocol

from ..config import DEMO_PROVIDER


class ManagedProvider(Protocol):
    def start(self) -> None:
        """Start serving; returns once requests can be answered."""

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, valid after start()."""

    def stop(self) -> None:
        """Stop serving and release what start() took (threads, processes, ports)."""


def _demo() -> ManagedProvider:
    from .demo import DemoProvider

    return DemoProvider()


def _local() -> ManagedProvider:
    from .local import LocalServer

    return LocalServer()


# Factories, so that a provider nobody uses costs nothing, not even its import.
FACTORIES: dict[str, Callable[[], ManagedProvider]] = {DEMO_PROVIDER: _demo, "local": _local}

_running: dict[str, ManagedProvider] = {}
_lock = threading.Lock()


def base_url(name: str) -> str | None:
    factory = FACTORIES.get(name)
    if factory is None:
        return None
    with _lock:
        provider = _running.get(name)
        if provider is None:
            provider = factory()
            provider.start()
            if not _running:
                atexit.register(stop_all)
            _running[name] = provider
        return provider.base_url


def stop_all() -> None:
    with _lock:
        running = list(_running.values())
        _running.clear()
    for provider in running:
        provider.stop()
