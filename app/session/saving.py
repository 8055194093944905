"""Saving a turn as it happens, so that nothing the user saw is lost.

The user's message is committed before any request goes out. The reply is saved while it streams, at
most `FLUSH_SECONDS` apart (a crash or `kill -9` loses at most that much text), and marked partial until
the turn ends; then the turn's messages replace it and every model call is recorded with the turn. All
of this runs on the turn's thread, never the UI's.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any, cast

from ..config import Preset
from ..engine import AggregatorFinished, AgreementChecked, ReferenceFinished, ReplyDelta, clock
from ..engine.events import emit
from ..llm.messages import Message, user
from ..store import SessionStore, StoredCall, StoreError
from .turn import TurnResult
from .turn_events import Event, Notice, Observer

FLUSH_SECONDS = 1.0
logger = logging.getLogger(__name__)


class TurnSaver:
    """An observer in front of the front end's: it keeps what the turn reports, then passes it on."""

    def __init__(self, store: SessionStore, session_id: str, user_id: int, turn_id: int, observer: Observer | None):
        self.store, self.session_id, self.user_id, self.turn_id = store, session_id, user_id, turn_id
        self.observer = observer
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
    ) -> TurnSaver:
        """A new prompt under `parent_id`, or (user_id) a stored one answered again."""
        if user_id is None:
            user_id = store.add_message(session_id, _stored(user(prompt or "")), parent_id=parent_id)
        turn_id = store.begin_turn(session_id, user_id, preset, kind=kind)
        return cls(store, session_id, user_id, turn_id, observer)

    def __call__(self, event: Event) -> None:
        if isinstance(event, ReplyDelta):
            if not self._rounds:
                self._rounds.append([])
            self._rounds[-1].append(event.text)
            self._dirty = True
            if clock.monotonic() - self._flushed_at >= FLUSH_SECONDS:
                self.flush()
        elif isinstance(event, ReferenceFinished | AgreementChecked) and event.record is not None:
            reasoning = event.reasoning if isinstance(event, ReferenceFinished) else ""
            self.calls.append(StoredCall(event.record, event.text, reasoning))  # an agreement judge's call too
        elif isinstance(event, AggregatorFinished):
            self.calls.append(StoredCall(event.record, reasoning=event.reasoning))
            if self._rounds and self._rounds[-1]:
                self._rounds.append([])  # the next round's text starts a new paragraph, as Turn joins them
            self.flush()
        emit(self.observer, event)

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
            emit(self.observer, Notice(f"This turn could not be saved to {self.store.file}: {exc}", "warning"))


def saved_messages(store: SessionStore, session_id: str) -> tuple[list[Message], int | None]:
    """The conversation of a stored session, ready to continue, and the id of its last message."""
    path = store.path(session_id)
    # StoredMessage.as_chat writes a chat message (role, content, tool_calls, tool_call_id) as a plain dict.
    return [cast(Message, m.as_chat()) for m in path], (path[-1].id if path else None)


def _stored(message: Message) -> dict[str, Any]:
    """A message as the store takes it (a plain dict: the store does not know the message types)."""
    return dict(message)
