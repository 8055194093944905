"""The references' answers of recent user turns, so a client's tool rounds do not ask the panel again.

An API client keeps the conversation and sends it whole each time: after a tool call it sends the same
conversation plus the assistant's call and the tool's result. Under `fanout: user_turn` those rounds belong
to one user turn, and the chat answers them with the guidance it already has; here the turn is found by a
hash of the conversation up to its last user message, the preset's name included (engine.guidance.turn_hash).
The cache is bounded in entries and in age, so a server that runs for weeks holds at most `capacity` turns'
answers.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from ..engine import ReferenceFinished
from ..engine.clock import monotonic

CAPACITY = 256  # user turns kept
MAX_AGE = 30 * 60.0  # seconds a turn's answers stay reusable: a coding agent's tool rounds fit well inside


class GuidanceCache:
    """A `GuidanceMemory` (engine.guidance) of many user turns, bounded in entries and age, for every request."""

    def __init__(
        self, capacity: int = CAPACITY, max_age: float = MAX_AGE, clock: Callable[[], float] = monotonic
    ) -> None:
        self.capacity, self.max_age, self._clock = capacity, max_age, clock
        self._entries: OrderedDict[str, tuple[float, tuple[ReferenceFinished, ...]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[ReferenceFinished, ...] | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if self._clock() - entry[0] > self.max_age:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: str, answers: tuple[ReferenceFinished, ...]) -> None:
        with self._lock:
            self._entries[key] = (self._clock(), answers)
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
