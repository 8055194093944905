"""The usage ledger: one record per model call, the single source of every token total.

The header, `ask --json`, the sidebar and the API's `usage` read their totals from here. A turn keeps its own
ledger (its TurnEnv's: every finished call's record is kept as the turn reports it); the session adds each
turn's to its own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from ..llm.usage import Usage, sum_usage
from .events import AggregatorFinished, AgreementChecked, CallRecord, CompactionEnded, ReferenceFinished, Role


class UsageLedger:
    def __init__(self, records: Iterable[CallRecord] = ()) -> None:
        self._records = list(records)
        self._lock = threading.Lock()

    @property
    def records(self) -> tuple[CallRecord, ...]:
        with self._lock:
            return tuple(self._records)

    def add(self, record: CallRecord) -> None:
        with self._lock:
            self._records.append(record)

    def extend(self, records: Iterable[CallRecord]) -> None:
        with self._lock:
            self._records.extend(records)

    def observe(self, event: object) -> None:
        """Take the record a finished call carries (an engine observer)."""
        if isinstance(event, ReferenceFinished | AggregatorFinished):
            self.add(event.record)
        elif isinstance(event, AgreementChecked | CompactionEnded) and event.record is not None:
            self.add(event.record)  # `layers: auto`'s judge, a compaction: paid for like any other call

    def _of(self, role: Role | None) -> list[CallRecord]:
        """All calls, or one role's: every total below can be asked for the whole turn or one part of it."""
        return [r for r in self.records if role is None or r.role == role]

    def usage(self, role: Role | None = None) -> Usage:
        """Tokens reported by providers: all calls, or one role's."""
        return sum_usage([r.usage for r in self._of(role)])

    def cost(self, role: Role | None = None) -> float | None:
        """Dollars spent: the sum of what is known, None when no call's cost is (no price configured)."""
        costs = [r.cost for r in self._of(role) if r.cost is not None]
        return sum(costs) if costs else None

    def cost_complete(self, role: Role | None = None) -> bool:
        """Whether every call that used tokens has a cost (else the total leaves some out): all calls, or
        one role's."""
        return all(r.cost is not None for r in self._of(role) if r.usage is not None)

    def as_json(self) -> dict[str, object]:
        cost = self.cost()
        return {
            **self.usage().as_dict(),
            # whether every call reported its tokens: the totals above leave out those that did not
            "usage_complete": all(record.usage is not None for record in self.records),
            "cost": round(cost, 6) if cost is not None else None,
            "cost_complete": self.cost_complete(),
            "references_cost": self.cost("reference"),
            "aggregator_cost": self.cost("aggregator"),
            "agreement_cost": self.cost("agreement"),
            "references_total_tokens": self.usage("reference").total_tokens,
            "aggregator_total_tokens": self.usage("aggregator").total_tokens,
            "calls": [record.as_dict() for record in self.records],
        }
