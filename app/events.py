"""What a turn reports while it runs. Plain dataclasses: the TUI renders them, `ask` prints them.

Observers are called from worker threads (the reference pool and the turn's thread), so an observer
must be thread-safe: the TUI's posts a Textual message, `ask` writes under a lock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

ReferenceStatus = Literal["queued", "running", "ok", "failed", "timeout", "cancelled"]
TurnStatus = Literal["ok", "failed", "cancelled"]


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage | None) -> Usage:
        if other is None:
            return self
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )

    @classmethod
    def from_sdk(cls, usage: Any) -> Usage | None:
        """From an SDK usage object or dict; None when the provider reported none."""
        if usage is None:
            return None
        get = usage.get if isinstance(usage, dict) else lambda k, d=None: getattr(usage, k, d)
        prompt = get("prompt_tokens", 0) or 0
        completion = get("completion_tokens", 0) or 0
        total = get("total_tokens", 0) or prompt + completion
        if not isinstance(prompt, int) or not isinstance(completion, int):
            return None
        return cls(prompt, completion, total)

    def as_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


def sum_usage(usages: list[Usage | None]) -> Usage:
    total = Usage()
    for usage in usages:
        total = total + usage
    return total


# --------------------------------------------------------------------------- the fan-out


@dataclass(frozen=True)
class ReferenceQueued:
    index: int
    label: str


@dataclass(frozen=True)
class ReferenceStarted:
    index: int
    label: str


@dataclass(frozen=True)
class ReferenceProgress:
    """A running reference produced text (sent at most a few times a second per reference)."""

    index: int
    label: str
    chunks: int
    seconds: float
    first_token_seconds: float | None


@dataclass(frozen=True)
class ReferenceFinished:
    index: int
    label: str
    status: ReferenceStatus
    text: str = ""
    error: str | None = None
    usage: Usage | None = None
    seconds: float = 0.0
    first_token_seconds: float | None = None


@dataclass(frozen=True)
class AggregatorStarted:
    label: str
    iteration: int
    references_ok: int
    references_total: int
    guidance_reused: bool = False


# --------------------------------------------------------------------------- the aggregator's reply


@dataclass(frozen=True)
class ReplyDelta:
    text: str


@dataclass(frozen=True)
class AggregatorFinished:
    label: str
    iteration: int
    usage: Usage | None
    seconds: float
    first_token_seconds: float | None
    finish_reason: str | None


@dataclass(frozen=True)
class ToolCallEvent:
    """A tool call's life in the log: requested → (awaiting_approval) → running → done/failed/denied."""

    call_id: str
    name: str
    arguments: str
    status: Literal["requested", "awaiting_approval", "running", "done", "failed", "denied", "cancelled"]
    result: str | None = None
    seconds: float | None = None
    iteration: int = 1


@dataclass(frozen=True)
class Notice:
    """Something the user should see in the log that is not model text (iteration cap, MCP failure...)."""

    text: str
    level: Literal["info", "warning", "error"] = "info"


@dataclass(frozen=True)
class TurnFinished:
    status: TurnStatus
    text: str
    error: str | None
    usage: Usage
    seconds: float
    preset: str
    aggregator: str
    references: tuple[ReferenceFinished, ...] = field(default_factory=tuple)


Event = (
    ReferenceQueued
    | ReferenceStarted
    | ReferenceProgress
    | ReferenceFinished
    | AggregatorStarted
    | ReplyDelta
    | AggregatorFinished
    | ToolCallEvent
    | Notice
    | TurnFinished
)
Observer = Callable[[Event], None]


def emit(observer: Observer | None, event: Event) -> None:
    if observer is not None:
        observer(event)
