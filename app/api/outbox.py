"""What a turn's thread hands the HTTP handler that answers for it, bounded by what the client has read.

The turn runs on an engine thread and reports to the handler on the event loop. Unbounded, a client that
stops reading its stream leaves the turn reading the provider's reply to its end into the handler's queue:
tens of megabytes per client, kept after it leaves. So text handed over counts until the handler has written
it to the client (its write returned: the socket took it); past `room` characters the turn's thread waits,
and with it the reading of the upstream stream, until the client reads or the turn is cancelled (the
handler's send timeout, the client gone, the server stopping).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

from ..engine import CancelToken
from .turn import SinkKind

ROOM = 64 * 1024  # characters handed over and not yet written, at most, before the turn waits for the client


class Outbox:
    def __init__(self, loop: asyncio.AbstractEventLoop, cancel: CancelToken, *, room: int | None = ROOM) -> None:
        """`room` None: never wait (the whole reply is answered at once anyway, as a non-streamed one is)."""
        self.queue: asyncio.Queue[tuple[SinkKind, object]] = asyncio.Queue()
        self._loop, self._cancel, self._room = loop, cancel, room
        self._held = 0
        self._changed = threading.Condition()

    def put(self, kind: SinkKind, value: object) -> None:
        """Hand `value` over (the turn's thread); waits while the handler holds `room` characters unwritten.
        Raises Cancelled if the turn is cancelled while it waits."""
        size = len(value) if isinstance(value, str) else 0
        if size and self._room is not None:
            with self._changed, self._cancel.closing(self._wake):
                while self._held and self._held + size > self._room:
                    self._cancel.raise_if_cancelled()
                    self._changed.wait()
                self._held += size
        with contextlib.suppress(RuntimeError):  # the loop is closed: the server stopped, nobody waits
            self._loop.call_soon_threadsafe(self.queue.put_nowait, (kind, value))

    def written(self, items: list[tuple[SinkKind, object]]) -> None:
        """`items` reached the client (the handler's side): their room is free again."""
        size = sum(len(value) for _, value in items if isinstance(value, str))
        if size and self._room is not None:
            with self._changed:
                self._held -= size
                self._changed.notify_all()

    def _wake(self) -> None:
        with self._changed:
            self._changed.notify_all()
