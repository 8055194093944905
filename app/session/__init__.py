"""The conversation: `ChatSession`, one user turn with its tool loop, and the usage ledger."""

from .chat_session import ChatSession
from .history import Exchange
from .ledger import UsageLedger
from .turn import Turn, TurnResult
from .turn_events import Event, Notice, Observer, ServerStart, ToolCallEvent

__all__ = [
    "ChatSession",
    "Event",
    "Exchange",
    "Notice",
    "Observer",
    "ServerStart",
    "ToolCallEvent",
    "Turn",
    "TurnResult",
    "UsageLedger",
]
