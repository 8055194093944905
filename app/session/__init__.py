"""The conversation: `ChatSession`, one user turn with its tool loop, and the usage ledger."""

from ..engine.events import Notice, Observer, ServerStart, ToolCallEvent, TurnEvent
from .chat_session import ChatSession
from .history import Exchange
from .ledger import UsageLedger
from .turn import Turn, TurnResult

__all__ = [
    "ChatSession",
    "Exchange",
    "Notice",
    "Observer",
    "ServerStart",
    "ToolCallEvent",
    "Turn",
    "TurnEvent",
    "TurnResult",
    "UsageLedger",
]
