"""What an eval run may still spend (`--max-cost`), and what each turn reserves of it before it starts.

A turn's cost is known only once it ends, so it reserves an estimate first, and the run stops before a turn
whose reservation would take what was spent and what is reserved past the budget. The estimate is grounded in
the run: a system's first turn reserves its worst case (the chat's `estimate_turn`, every reply as long as
`max_tokens` allows: often a hundred times what a turn costs), and once one of its turns has ended, the most
any of them cost. A turn that does not fit while others are in flight waits for them to end, since their
costs are then known, instead of stopping the run; the run stops when a turn does not fit and nothing is in
flight. So a budget stops a run near it: over by at most what the turns in flight cost beyond the most a
turn had cost before them.
"""

from __future__ import annotations

import threading


class Budget:
    def __init__(self, limit: float | None, stop: threading.Event) -> None:
        """`limit` None: no budget, nothing waits. `stop` is set when the budget stops the run (and ends waits)."""
        self.limit, self.stop = limit, stop
        self.spent = 0.0
        self.stopped = False  # the budget stopped the run
        self._reserved = 0.0
        self._in_flight = 0
        self._most: dict[str, float] = {}  # system → the most one of its turns has cost
        self._changed = threading.Condition()

    def observe(self, system: str, cost: float) -> None:
        """A turn of `system` that ended having cost `cost` dollars (a resumed run's turns, for one)."""
        with self._changed:
            self._most[system] = max(self._most.get(system, 0.0), cost)

    def reserve(self, system: str, worst: float) -> float | None:
        """Reserve a turn of `system` (`worst`: its worst case); the dollars reserved, or None when the run
        stops (the turn does not fit with nothing in flight, or the run was stopped while it waited)."""
        with self._changed:
            while not self.stop.is_set():
                estimate = self._most.get(system, worst)
                if self.limit is None or self.spent + self._reserved + estimate <= self.limit:
                    self._reserved += estimate
                    self._in_flight += 1
                    return estimate
                if not self._in_flight:
                    self.stopped = True
                    self.stop.set()
                    self._changed.notify_all()
                    return None
                self._changed.wait()  # a turn in flight ends, and says what turns cost
            return None

    def release(self, system: str, reserved: float, cost: float | None, *, spent: float = 0.0) -> None:
        """A reserved turn ended, having spent `spent`; `cost`: what it cost if it was a whole turn (what the
        next ones reserve), None if it failed or never ran."""
        with self._changed:
            self._reserved -= reserved
            self._in_flight -= 1
            self.spent += spent
            if cost is not None:
                self._most[system] = max(self._most.get(system, 0.0), cost)
            self._changed.notify_all()

    def wake(self) -> None:
        """End every wait (the run is stopping)."""
        with self._changed:
            self._changed.notify_all()
