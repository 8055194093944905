"""`moa-chat api --save`: each API conversation kept as a stored session, as `ask` keeps its turns.

A client sends its whole conversation each time, so a request continues a stored session when the session's
messages, as last saved, are the start of the request's: the new messages (the next user prompt, or tool
results) go under its head, then the reply. The heads are found by a hash of the conversation (roles, text,
tool calls), kept for a bounded number of conversations; one not found (after a restart, or evicted) starts
a new session with the whole conversation. Sessions show in `moa-chat sessions`, `export` and the chat.
With `save_traces` on (the config's or the preset's), a turn's call traces are written once it is stored, under
its session and turn, redacted as the chat's are.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..config import Config, Preset
from ..engine.privacy import privacy_scrub
from ..llm.messages import Message, ToolCallPart, assistant
from ..prompts import message_text
from ..store import SessionStore, StoredCall, StoreError, make_title
from ..store.traces import TraceWriter
from .turn import Failure, OnEnd, Outcome

CAPACITY = 1024  # conversations whose heads are remembered
logger = logging.getLogger(__name__)


def conversation_hash(messages: Sequence[Mapping[str, Any]]) -> str:
    """The conversation as its content, whatever shape a client gives it (None or "" content, extra keys)."""
    shape = [
        (
            m.get("role"),
            message_text(m.get("content")),
            [
                (c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
                for c in m.get("tool_calls") or ()
            ],
            m.get("tool_call_id"),
        )
        for m in messages
    ]
    return hashlib.sha256(json.dumps(shape, ensure_ascii=False).encode()).hexdigest()


class ConversationSaver:
    def __init__(self, store: SessionStore, capacity: int = CAPACITY) -> None:
        self.store, self.capacity = store, capacity
        self._heads: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self._lock = threading.Lock()

    def save(
        self,
        preset: Preset,
        messages: Sequence[Message],
        reply: Message | None,
        *,
        status: str,
        error: str | None,
        seconds: float,
        calls: list[StoredCall],
        traces: Sequence[Mapping[str, object]] = (),
        scrub: Callable[[str], str] | None = None,
    ) -> str | None:
        """Store one request's turn, then its `traces` (redacted by `scrub`) under that session and turn;
        returns the session's id (None when the store refused: logged)."""
        try:
            with self._lock:  # one conversation's rounds are stored in order
                session_id, turn = self._save(preset, messages, reply, status, error, seconds, calls)
        except (StoreError, ValueError) as exc:
            logger.warning("could not save an API conversation: %s", exc)
            return None
        if traces:
            writer = TraceWriter(session_id, folder=self.store.file.parent, scrub=scrub)
            try:
                for entry in traces:
                    writer.write(entry, turn=turn)
            except OSError as exc:  # the turn is stored and answered: a trace that cannot be written is logged
                logger.warning("could not write the traces of an API turn: %s", exc)
        return session_id

    def _save(
        self,
        preset: Preset,
        messages: Sequence[Message],
        reply: Message | None,
        status: str,
        error: str | None,
        seconds: float,
        calls: list[StoredCall],
    ) -> tuple[str, int]:
        """The session and turn the request is stored as."""
        session_id, head, start = self._continued(messages)
        if session_id is None:
            first = next((message_text(m.get("content")) for m in messages if m["role"] == "user"), "")
            session_id = self.store.create_session(preset.name, make_title(first))
        for message in messages[start:]:
            head = self.store.add_message(session_id, dict(message), parent_id=head)
        assert head is not None  # a request has at least one message
        turn = self.store.begin_turn(session_id, head, preset, kind="api")
        new_head = self.store.finish_turn(
            turn,
            session_id=session_id,
            parent_id=head,
            status=status,
            error=error,
            seconds=seconds,
            messages=[dict(reply)] if reply is not None else [],
            calls=calls,
            partial_id=None,
        )
        if reply is not None:
            self._remember(conversation_hash([*messages, reply]), session_id, new_head)
        return session_id, turn

    def _continued(self, messages: Sequence[Message]) -> tuple[str | None, int | None, int]:
        """(session, head, how many of `messages` it holds) for the longest stored start of `messages`."""
        for end in range(len(messages) - 1, 0, -1):
            if messages[end - 1]["role"] != "assistant":
                continue
            with_head = self._heads.get(conversation_hash(messages[:end]))
            if with_head is not None:
                return with_head[0], with_head[1], end
        return None, None, 0

    def _remember(self, key: str, session_id: str, head: int) -> None:
        self._heads[key] = (session_id, head)
        self._heads.move_to_end(key)
        while len(self._heads) > self.capacity:
            self._heads.popitem(last=False)


def saving(saver: ConversationSaver, config: Config, preset: Preset, messages: Sequence[Message]) -> OnEnd:
    """What a request's turn does once the client has its answer: store it, the reply or how it failed, and
    the traces it collected (`run_turn(traces=...)`), redacted as the chat's are."""
    scrub = privacy_scrub(config, for_models=False)

    def on_end(end: Outcome | Failure) -> None:
        reply: Message | None = None
        status, error = "ok", None
        if isinstance(end, Outcome):
            calls: list[ToolCallPart] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in end.tool_calls
            ]
            reply = assistant(end.text, calls)
        else:
            status = "cancelled" if end.error.code == "cancelled" else "failed"
            error = end.error.message
        saver.save(
            preset, messages, reply, status=status, error=error, seconds=end.seconds, calls=list(end.calls),
            traces=end.traces, scrub=scrub,
        )  # fmt: skip

    return on_end
