"""What a turn reports beyond the engine's events: tool calls and notes for the user."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ..engine.events import EngineEvent
from ..providers.lifecycle import ServerStart as ServerStart  # part of what a turn reports

ToolStatus = Literal["requested", "awaiting_approval", "running", "done", "failed", "denied", "cancelled"]


@dataclass(frozen=True)
class ToolCallEvent:
    """A tool call's life in the log: requested → (awaiting_approval) → running → done/failed/denied."""

    call_id: str
    name: str
    arguments: str
    status: ToolStatus
    result: str | None = None
    seconds: float | None = None
    iteration: int = 1


@dataclass(frozen=True)
class Notice:
    """Something the user should see in the log that is not model text (iteration cap, MCP failure...)."""

    text: str
    level: Literal["info", "warning", "error"] = "info"


# ServerStart: a server moa-chat runs itself (the local model) starting before the turn's first call.
Event = EngineEvent | ToolCallEvent | Notice | ServerStart
Observer = Callable[[Event], None]
