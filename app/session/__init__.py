"""The conversation: `ChatSession`, one user turn with its tool loop, and the usage ledger."""

from ..engine.events import Notice, Observer, ServerStart, ToolCallEvent, TurnEvent
from ..engine.ledger import UsageLedger
from .chat_session import ChatSession
from .history import Exchange
from .tool_loop import ToolLoop, TurnResult

__all__ = [
    "ChatSession",
    "Exchange",
    "Notice",
    "Observer",
    "ServerStart",
    "ToolCallEvent",
    "ToolLoop",
    "TurnEvent",
    "TurnResult",
    "UsageLedger",
]
