"""Saving a turn as it happens, so that nothing the user saw is lost.

The user's message is committed before any request goes out. The reply is saved while it streams, at
most `FLUSH_SECONDS` apart (a crash or `kill -9` loses at most that much text), and marked partial until
the turn ends; then the turn's messages replace it and every model call is recorded with the turn. All
of this runs on the turn's thread, never the UI's.

A reply cut off after text arrived and asked for again (ReplyRestarted) is kept as it stood: the turn so far
ends there, cut off, with its one reply, and the fresh reply goes on in a turn of its own, a regeneration on
the same answers. The two replies are siblings under the prompt, two versions of the exchange, the cut-off one
first.
"""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
from typing import Any, cast

from ..config import Preset
from ..engine import AggregatorFinished, AgreementChecked, ReferenceFinished, ReplyDelta, ReplyRestarted, clock
from ..engine.env import Tracer
from ..engine.events import CompactionEnded, Notice, Observer, TurnEvent, emit
from ..llm.messages import Message, assistant, user
from ..store import SessionStore, StoredCall, StoreError
from ..store.traces import TraceWriter
from .tool_loop import TurnResult

FLUSH_SECONDS = 1.0
logger = logging.getLogger(__name__)


class TurnSaver:
    """An observer in front of the front end's: it keeps what the turn reports, then passes it on."""

    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        user_id: int,
        turn_id: int,
        observer: Observer | None,
        preset: Preset,
        traces: TraceWriter | None = None,
    ):
        """`traces`: where the turn's calls are traced (save_traces), each under the stored turn it belongs to."""
        self.store, self.session_id, self.user_id, self.turn_id = store, session_id, user_id, turn_id
        self.observer = observer
        self.preset = preset  # the turn's: a reply asked again after a cut-off goes on in a turn of its own
        self._traces = traces
        self._began = clock.monotonic()
        self.calls: list[StoredCall] = []
        self._rounds: list[list[str]] = []  # reply text per aggregator round, in pieces
        self._dirty = False
        self._partial_id: int | None = None
        self._flushed_at = clock.monotonic()
        self._failed = False

    @classmethod
    def begin(
        cls,
        store: SessionStore,
        session_id: str,
        preset: Preset,
        *,
        kind: str,
        observer: Observer | None,
        prompt: str | None,
        parent_id: int | None,
        user_id: int | None,
        traces: TraceWriter | None = None,
    ) -> TurnSaver:
        """A new prompt under `parent_id`, or (user_id) a stored one answered again."""
        if user_id is None:
            user_id = store.add_message(session_id, _stored(user(prompt or "")), parent_id=parent_id)
        turn_id = store.begin_turn(session_id, user_id, preset, kind=kind)
        return cls(store, session_id, user_id, turn_id, observer, preset, traces)

    @property
    def tracer(self) -> Tracer | None:
        """The turn's tracer (None: traces are not kept): a reply asked again after a cut-off is traced under
        the turn of its own that it goes on in."""
        return self._trace if self._traces is not None else None

    def _trace(self, entry: dict[str, object]) -> None:
        if self._traces is not None:
            self._traces.write(entry, turn=self.turn_id)

    def __call__(self, event: TurnEvent) -> None:
        if isinstance(event, ReplyDelta):
            if not self._rounds:
                self._rounds.append([])
            self._rounds[-1].append(event.text)
            self._dirty = True
            if clock.monotonic() - self._flushed_at >= FLUSH_SECONDS:
                self.flush()
        elif isinstance(event, ReferenceFinished | AgreementChecked | CompactionEnded) and event.record is not None:
            reasoning = event.reasoning if isinstance(event, ReferenceFinished) else ""
            self.calls.append(StoredCall(event.record, event.text, reasoning))  # a judge's or a compaction's too
        elif isinstance(event, AggregatorFinished):
            self.calls.append(StoredCall(event.record, reasoning=event.reasoning))
            if self._rounds and self._rounds[-1]:
                self._rounds.append([])  # the next round's text starts a new paragraph, as Turn joins them
            self.flush()
        elif isinstance(event, ReplyRestarted):
            self._keep_cut_off(event)
        emit(self.observer, event)

    def _keep_cut_off(self, event: ReplyRestarted) -> None:
        """End the turn so far as cut off, its reply the text that had arrived (an earlier version of the
        exchange), and go on in a regeneration on the same answers: the fresh reply is its own version. The
        reference answers are recorded with both turns, with no usage or cost the second time (as a
        regeneration records them), so that each version has its panel and nothing is counted twice."""
        if self._failed:
            return
        text = "\n\n".join("".join(pieces) for pieces in self._rounds if pieces)
        if self._rounds:
            self._rounds[-1] = []  # the fresh reply replaces the round that was cut; earlier rounds stand
        self._dirty = False
        answers = [
            dataclasses.replace(call, record=dataclasses.replace(call.record, usage=None, cost=None))
            for call in self.calls
            if call.record.role == "reference"
        ]
        try:
            self.store.finish_turn(
                self.turn_id,
                session_id=self.session_id,
                parent_id=self.user_id,
                status="cut_off",
                error=f"the reply from {event.label} was {event.reason}",
                seconds=round(clock.monotonic() - self._began, 3),
                messages=[_stored(assistant(text))],
                calls=self.calls,
                partial_id=self._partial_id,
            )
            self.turn_id = self.store.begin_turn(self.session_id, self.user_id, self.preset, kind="regenerate")
        except (StoreError, sqlite3.Error, ValueError) as exc:  # ValueError: text SQLite cannot encode
            self._report(exc)
            return
        self.calls, self._partial_id, self._began = answers, None, clock.monotonic()

    def flush(self) -> None:
        if not self._dirty or self._failed:
            return
        text = "\n\n".join("".join(pieces) for pieces in self._rounds if pieces)
        self._flushed_at = clock.monotonic()
        self._dirty = False
        try:
            self._partial_id = self.store.save_partial(
                self.session_id, text, parent_id=self.user_id, turn_id=self.turn_id, message_id=self._partial_id
            )
        except (StoreError, sqlite3.Error, ValueError) as exc:  # ValueError: text SQLite cannot encode
            self._report(exc)

    def finish(self, result: TurnResult) -> int | None:
        """Record the finished turn; returns the session's new head (None if it could not be saved)."""
        try:
            return self.store.finish_turn(
                self.turn_id,
                session_id=self.session_id,
                parent_id=self.user_id,
                status=result.status,
                error=result.error,
                seconds=result.seconds,
                messages=[_stored(message) for message in result.new_messages],
                calls=self.calls,
                partial_id=self._partial_id,
                solo=result.solo,
                reference_order=result.reference_order,
                layers_run=result.layers_run,
                layers_reason=result.layers_reason,
            )
        except (StoreError, sqlite3.Error, ValueError) as exc:  # ValueError: text SQLite cannot encode
            self._report(exc)
            return None

    def _report(self, exc: BaseException) -> None:
        if not self._failed:
            self._failed = True
            logger.warning("could not save the turn: %s", exc)
            # What the store holds of it, as it stands: the prompt, and the reply as far as it was saved.
            reply = "the reply as far as it had streamed" if self._partial_id is not None else "none of the reply"
            kept = f"Stored: the prompt, and {reply}; the turn shows as unfinished."
            emit(self.observer, Notice(f"This turn could not be saved to {self.store.file}: {exc}. {kept}", "warning"))


def saved_messages(store: SessionStore, session_id: str) -> tuple[list[Message], int | None]:
    """The conversation of a stored session, ready to continue, and the id of its last message."""
    path = store.path(session_id)
    # StoredMessage.as_chat writes a chat message (role, content, tool_calls, tool_call_id) as a plain dict.
    return [cast(Message, m.as_chat()) for m in path], (path[-1].id if path else None)


def _stored(message: Message) -> dict[str, Any]:
    """A message as the store takes it (a plain dict: the store does not know the message types)."""
    return dict(message)
