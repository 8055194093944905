"""The conversation: `ChatSession`, one user turn with its tool loop, and the usage ledger."""

from .chat_session import ChatSession
from .events import Event, Notice, Observer, ServerStart, ToolCallEvent
from .history import Exchange
from .ledger import UsageLedger
from .turn import Turn, TurnResult

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
