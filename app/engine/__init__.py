"""The MoA engine: the reference fan-out, the guidance, the aggregator phase, events and cancellation."""

from .cancel import Cancelled, CancelToken
from .engine import MoAEngine
from .env import AnswerExtractor, TurnEnv, TurnPlan
from .events import (
    AggregatorFinished,
    AggregatorStarted,
    AgreementChecked,
    CallRecord,
    CallRetrying,
    EngineEvent,
    ImagesWithheld,
    LayersDecided,
    Observer,
    ReasoningDelta,
    ReferenceFinished,
    ReferenceProgress,
    ReferenceQueued,
    ReferencesSent,
    ReferenceStarted,
    ReplyDelta,
    ReplyRestarted,
    ToolCallEvent,
    TurnEvent,
)
from .retry import RetryPolicy

__all__ = [
    "AggregatorFinished",
    "AggregatorStarted",
    "AgreementChecked",
    "AnswerExtractor",
    "CallRecord",
    "CallRetrying",
    "CancelToken",
    "Cancelled",
    "EngineEvent",
    "ImagesWithheld",
    "LayersDecided",
    "MoAEngine",
    "Observer",
    "ReasoningDelta",
    "ReferenceFinished",
    "ReferenceProgress",
    "ReferenceQueued",
    "ReferenceStarted",
    "ReferencesSent",
    "ReplyDelta",
    "ReplyRestarted",
    "RetryPolicy",
    "ToolCallEvent",
    "TurnEnv",
    "TurnEvent",
    "TurnPlan",
]
