"""The store's records as Python reads them: a session's summary, a stored message, a model call, a turn; and
each decoded from its row, or written as one."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass

from ..engine.events import CallRecord
from ..llm.usage import Usage
from .json_shapes import PresetJson, SummaryJson, ToolCallJson

# A turn still "running" when its session is opened was cut short by a crash or a kill.
INCOMPLETE = ("running", "interrupted", "cancelled", "failed", "cut_off")


@dataclass(frozen=True)
class SessionSummary:
    id: str
    title: str
    created: float
    updated: float
    preset: str
    turns: int
    cost: float | None = None  # dollars, over the calls whose cost is known

    def as_json(self) -> SummaryJson:
        return {
            "id": self.id,
            "title": self.title,
            "created": _iso(self.created),
            "updated": _iso(self.updated),
            "preset": self.preset,
            "turns": self.turns,
            "cost": round(self.cost, 6) if self.cost is not None else None,
        }


@dataclass(frozen=True)
class StoredMessage:
    id: int
    parent_id: int | None
    turn_id: int | None
    role: str
    content: str
    tool_calls: list[ToolCallJson] | None = None
    tool_call_id: str | None = None
    partial: bool = False  # text saved while it streamed; the turn never finished it
    parts: list[dict[str, object]] | None = None  # content parts, for a message with images (store/images.py)

    def as_chat(self) -> dict[str, object]:
        """The message as a model receives it."""
        message: dict[str, object] = {"role": self.role, "content": self.parts or self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        if self.tool_call_id:
            message["tool_call_id"] = self.tool_call_id
        return message


@dataclass(frozen=True)
class StoredCall:
    record: CallRecord
    text: str = ""  # a reference's full answer
    reasoning: str = ""  # what a reasoning model thought before it answered


@dataclass(frozen=True)
class StoredTurn:
    id: int
    session_id: str
    user_message_id: int | None
    kind: str
    preset: str
    preset_json: PresetJson  # the preset as the turn ran it
    status: str
    error: str | None
    started: float
    seconds: float | None
    calls: tuple[StoredCall, ...] = ()
    solo: bool = False
    reference_order: tuple[int, ...] | None = None  # the shuffled order the aggregator saw the answers in
    layers_run: int | None = None  # layers of references run (None: stored before it was recorded)
    layers_reason: str | None = None  # `layers: auto`: why that many

    @property
    def complete(self) -> bool:
        return self.status not in INCOMPLETE

    @property
    def references(self) -> tuple[StoredCall, ...]:
        """The answers of the turn's last fan-out, in preset order."""
        refs = [c for c in self.calls if c.record.role == "reference"]
        last = max((c.record.iteration for c in refs), default=0)
        return tuple(sorted((c for c in refs if c.record.iteration == last), key=lambda c: c.record.index))


def summary_from_row(row: sqlite3.Row) -> SessionSummary:
    return SessionSummary(
        row["id"], row["title"], row["created"], row["updated"], row["preset"], row["turns"], row["cost"]
    )


def message_from_row(row: sqlite3.Row) -> StoredMessage:
    return StoredMessage(
        id=row["id"],
        parent_id=row["parent_id"],
        turn_id=row["turn_id"],
        role=row["role"],
        content=row["content"],
        tool_calls=json.loads(row["tool_calls"]) if row["tool_calls"] else None,
        tool_call_id=row["tool_call_id"],
        partial=bool(row["partial"]),
        parts=json.loads(row["parts"]) if row["parts"] else None,
    )


def turn_from_row(row: sqlite3.Row, calls: list[StoredCall]) -> StoredTurn:
    return StoredTurn(
        id=row["id"],
        session_id=row["session_id"],
        user_message_id=row["user_message_id"],
        kind=row["kind"],
        preset=row["preset"],
        preset_json=json.loads(row["preset_json"]),
        status=row["status"],
        error=row["error"],
        started=row["started"],
        seconds=row["seconds"],
        calls=tuple(calls),
        solo=bool(row["solo"]),
        reference_order=tuple(json.loads(row["reference_order"])) if row["reference_order"] else None,
        layers_run=row["layers_run"],
        layers_reason=row["layers_reason"],
    )


def call_from_row(row: sqlite3.Row) -> StoredCall:
    usage = None
    if row["total_tokens"] is not None:
        usage = Usage(row["prompt_tokens"] or 0, row["completion_tokens"] or 0, row["total_tokens"])
    record = CallRecord(
        role=row["role"],
        label=row["label"],
        index=row["idx"],
        iteration=row["iteration"],
        status=row["status"],
        usage=usage,
        seconds=row["seconds"],
        first_token_seconds=row["first_token_seconds"],
        finish_reason=row["finish_reason"],
        error=row["error"],
        layer=row["layer"],
        cost=row["cost"],
        sent_tokens=row["sent_tokens"],
        window=row["context_window"],
    )
    return StoredCall(record, row["text"], row["reasoning"] or "")


def insert_call(db: sqlite3.Connection, turn_id: int, call: StoredCall) -> None:
    record, usage = call.record, call.record.usage
    db.execute(
        "INSERT INTO calls (turn_id, role, label, idx, layer, iteration, status, text, error, prompt_tokens,"
        " completion_tokens, total_tokens, seconds, first_token_seconds, finish_reason, cost, reasoning,"
        " sent_tokens, context_window) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            turn_id,
            record.role,
            record.label,
            record.index,
            record.layer,
            record.iteration,
            record.status,
            call.text,
            record.error,
            usage.prompt_tokens if usage else None,
            usage.completion_tokens if usage else None,
            usage.total_tokens if usage else None,
            record.seconds,
            record.first_token_seconds,
            record.finish_reason,
            record.cost,
            clean(call.reasoning) or None,
            record.sent_tokens,
            record.window,
        ),
    )


def clean(text: str) -> str:
    """Text SQLite can store: a surrogate pair split across chunks is rejoined, a lone one replaced."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
