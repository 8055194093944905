"""The MoA engine: the reference fan-out, the guidance, the aggregator phase, events and cancellation."""

from .cancel import Cancelled, CancelToken
from .engine import MoAEngine
from .events import (
    AggregatorFinished,
    AggregatorStarted,
    CallRecord,
    CallRetrying,
    EngineEvent,
    EngineObserver,
    ReasoningDelta,
    ReferenceFinished,
    ReferenceProgress,
    ReferenceQueued,
    ReferencesSent,
    ReferenceStarted,
    ReplyDelta,
    ReplyRestarted,
)
from .retry import RetryPolicy

__all__ = [
    "AggregatorFinished",
    "AggregatorStarted",
    "CallRecord",
    "CallRetrying",
    "CancelToken",
    "Cancelled",
    "EngineEvent",
    "EngineObserver",
    "MoAEngine",
    "ReasoningDelta",
    "ReferenceFinished",
    "ReferenceProgress",
    "ReferenceQueued",
    "ReferenceStarted",
    "ReferencesSent",
    "ReplyDelta",
    "ReplyRestarted",
    "RetryPolicy",
]
