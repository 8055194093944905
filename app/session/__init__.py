"""The conversation: `ChatSession`, one user turn with its tool loop, and the usage ledger."""

from .chat_session import ChatSession
from .events import Event, Notice, Observer, ToolCallEvent
from .history import Exchange
from .ledger import UsageLedger
from .turn import Turn, TurnResult

__all__ = [
    "ChatSession",
    "Event",
    "Exchange",
    "Notice",
    "Observer",
    "ToolCallEvent",
    "Turn",
    "TurnResult",
    "UsageLedger",
]
