"""What a reply's header says while it has no text yet: the panel it waits for, the aggregator starting to
write, a retry of the aggregator's call. AssistantReply turns the turn's panel events into these words; the
sidebar's cards show the same events card by card."""

from __future__ import annotations

from ..engine import AggregatorStarted, CallRetrying, ReferenceFinished, ReferenceQueued, ReferenceStarted
from ..text.wording import plural


def consulting(references: int) -> str:
    """The panel asked and nothing back yet."""
    return f"consulting {plural(references, 'reference')}…"


class WaitingStatus:
    """Follows one turn's panel events for its reply's header: of the panel's `seats` (one per card in the
    sidebar: a model asked `samples:` times has one per sample), how many have answered, failed or stopped."""

    def __init__(self, seats: int) -> None:
        self.seats = seats
        self._finished: set[int] = set()

    def after(self, event: object) -> str | None:
        """What the reply waits for after `event` (None: the event changes nothing it says)."""
        if isinstance(event, ReferenceQueued | ReferenceStarted):
            self._finished.discard(event.index)
        elif isinstance(event, ReferenceFinished):
            if 0 <= event.index < self.seats:
                self._finished.add(event.index)
            return f"{consulting(self.seats)} {len(self._finished)}/{self.seats} finished"
        elif isinstance(event, AggregatorStarted):
            answered = f"{event.references_ok}/{event.references_total}"
            references = "reference" if event.references_total == 1 else "references"
            return f"{event.label} is writing… ({answered} {references} answered)"
        elif isinstance(event, CallRetrying) and event.role == "aggregator":
            attempt = f"attempt {event.attempt} of {event.attempts}"
            return f"{event.label}: {event.reason} — retrying in {event.delay:.1f}s ({attempt})"
        return None
