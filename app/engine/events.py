"""What a turn reports while it runs, and the record it keeps of every model call.

Plain frozen dataclasses: the TUI renders them, `ask` prints them, the API streams them, the session's usage
ledger keeps the `CallRecord` each finished call carries. The engine reports its calls (`EngineEvent`); the
turn's tool loop adds its tool calls and notes, and the session the start of a server moa-chat runs itself
(`TurnEvent` is all of them). Observers are called from worker threads (the reference pool and the turn's
thread), so an observer must be thread-safe: the TUI's posts a Textual message, `ask` writes under a lock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal, TypeVar

from ..llm.usage import Usage
from ..providers.lifecycle import ServerStart as ServerStart  # part of what a turn reports

# "agreement": under `layers: auto`, the short judgement of whether a layer's references agree; "compaction": the
# summary of a long conversation's earlier exchanges (session/compaction.py).
Role = Literal["reference", "aggregator", "agreement", "compaction"]
# "late": still answering when a quorum or a deadline let the aggregator start without it.
CallStatus = Literal["ok", "failed", "timeout", "cancelled", "cut_off", "late"]


@dataclass(frozen=True)
class CallRecord:
    """One model call, as the usage ledger keeps it (and later cost and traces will)."""

    role: Role
    label: str  # provider:model of the slot
    index: int  # the reference's position in the preset; 0 for the aggregator
    iteration: int  # the aggregator round it belongs to (a fan-out belongs to the round it advises)
    status: CallStatus
    usage: Usage | None = None
    seconds: float = 0.0
    first_token_seconds: float | None = None
    finish_reason: str | None = None
    error: str | None = None
    layer: int = 1  # references of a multi-layer preset sit in layers 1..n
    cost: float | None = None  # dollars: the provider's own figure, else tokens × the configured price
    sent_tokens: int | None = None  # the prompt tokens of the request, as moa-chat counted them before sending
    window: int | None = None  # the model's context window then (None: unknown)

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["usage"] = self.usage.as_dict() if self.usage else None
        return data


# --------------------------------------------------------------------------- the fan-out


@dataclass(frozen=True)
class ReferenceQueued:
    index: int
    label: str
    layer: int = 1


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
    # All of it so far (a view of the running answer takes it whole, where stitching pieces together would
    # drop what came between two events); a one-line preview shows its last TAIL_CHARACTERS.
    text: str = ""
    # Seconds from the request to the first reasoning delta: a reasoning model that is still only thinking
    # (no text yet) has its speed counted from then. None for a model that sends no reasoning.
    thinking_seconds: float | None = None


TAIL_CHARACTERS = 200


@dataclass(frozen=True)
class ReferencesSent:
    """All of a layer's requests have left (the last just now): a front end that kept its own thread off the
    GIL meanwhile (the chat does, see TurnRunner.dispatch) can take it back."""

    layer: int
    count: int


class _Recorded:
    """Read a finished call's facts straight from its record."""

    record: CallRecord

    @property
    def index(self) -> int:
        return self.record.index

    @property
    def label(self) -> str:
        return self.record.label

    @property
    def iteration(self) -> int:
        return self.record.iteration

    @property
    def status(self) -> CallStatus:
        return self.record.status

    @property
    def error(self) -> str | None:
        return self.record.error

    @property
    def usage(self) -> Usage | None:
        return self.record.usage

    @property
    def seconds(self) -> float:
        return self.record.seconds

    @property
    def first_token_seconds(self) -> float | None:
        return self.record.first_token_seconds

    @property
    def finish_reason(self) -> str | None:
        return self.record.finish_reason


@dataclass(frozen=True)
class ReferenceFinished(_Recorded):
    """A reference ended (ok, failed, timeout or cancelled): its answer and the record of its call."""

    record: CallRecord
    text: str = ""
    reasoning: str = ""  # what a reasoning model thought before it answered (reasoning_content / reasoning)


# --------------------------------------------------------------------------- fitting the window


@dataclass(frozen=True)
class AnswerCut:
    """A reference answer cut to fit a request's room: about `kept` of its `total` tokens were sent."""

    index: int
    label: str
    kept: int
    total: int


@dataclass(frozen=True)
class RequestFitted:
    """A request was fitted to its model's window before it was sent: `dropped` earlier messages of the
    conversation left out, and (the aggregator's, or a later layer's reference) answers cut to fit."""

    role: Role
    index: int
    label: str
    iteration: int
    sent_tokens: int
    window: int
    dropped: int = 0
    cuts: tuple[AnswerCut, ...] = ()


# --------------------------------------------------------------------------- layers: auto


@dataclass(frozen=True)
class AgreementChecked:
    """After a layer of a `layers: auto` preset: whether its references agree. `record` is the judge's
    call (None when an answer extractor compared the answers, or there were too few to compare)."""

    layer: int
    agreed: bool
    reason: str
    record: CallRecord | None = None
    text: str = ""  # the judge's answer, as it came


@dataclass(frozen=True)
class LayersDecided:
    """A `layers: auto` fan-out ended: how many of its layers ran, of at most `max_layers`, and why."""

    layers_run: int
    max_layers: int
    reason: str

    @property
    def line(self) -> str:
        """One line for the sidebar and `ask`: "2 of 3 layers: references agreed"."""
        return f"{self.layers_run} of {self.max_layers} layers: {self.reason}"


# --------------------------------------------------------------------------- the aggregator


@dataclass(frozen=True)
class AggregatorStarted:
    label: str
    iteration: int
    references_ok: int
    references_total: int
    guidance_reused: bool = False


@dataclass(frozen=True)
class ReplyDelta:
    text: str


@dataclass(frozen=True)
class AggregatorFinished(_Recorded):
    """One aggregator round ended: read whole, or cut short by a failure or a cancel."""

    record: CallRecord
    reasoning: str = ""  # what it thought before it answered, whole


@dataclass(frozen=True)
class CallRetrying:
    """A call failed before any answer text arrived and is sent again after `delay` seconds."""

    role: Role
    index: int
    label: str
    attempt: int  # the attempt about to be made: 2 for the first retry
    attempts: int  # at most this many in all
    delay: float
    reason: str


@dataclass(frozen=True)
class ReplyRestarted:
    """The aggregator's reply was cut off after text had arrived and is asked again: the ReplyDeltas that
    follow are a fresh reply, and `text` (what arrived before the cut) is an earlier version, cut off."""

    label: str
    iteration: int
    reason: str
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A reasoning model's thinking (its `reasoning_content` / `reasoning` deltas), as it streams: the
    aggregator's piece by piece, before its ReplyDeltas; a reference's a batch at a time, at most a few times a
    second (with its ReferenceProgress). Never part of the answer: front ends show it apart, if at all."""

    label: str
    role: Role
    text: str
    index: int = 0  # the reference's position in the preset; 0 for the aggregator


EngineEvent = (
    RequestFitted
    | ReferenceQueued
    | ReferenceStarted
    | ReferenceProgress
    | ReferenceFinished
    | ReferencesSent
    | AgreementChecked
    | LayersDecided
    | AggregatorStarted
    | ReplyDelta
    | AggregatorFinished
    | CallRetrying
    | ReplyRestarted
    | ReasoningDelta
)


# --------------------------------------------------------------------------- compaction


@dataclass(frozen=True)
class CompactionStarted:
    """A long conversation's earlier exchanges are being summarised (session/compaction.py): `exchanges` more,
    which with the summary before them take `tokens` in a request, by `label`."""

    exchanges: int
    tokens: int
    label: str


@dataclass(frozen=True)
class CompactionEnded:
    """A compaction ended: the summary now stands for `exchanges` exchanges, `tokens_before` tokens summarised to
    `tokens_after`; or (`error`) it failed, and the conversation is as it was. `record` is its call."""

    exchanges: int
    tokens_before: int
    tokens_after: int
    text: str = ""
    record: CallRecord | None = None
    error: str | None = None

    @property
    def line(self) -> str:
        """ "34 earlier exchanges summarised · 41.2k → 1.9k tokens"."""
        return (
            f"{self.exchanges:,} earlier exchange{'' if self.exchanges == 1 else 's'} summarised · "
            f"{_k(self.tokens_before)} → {_k(self.tokens_after)} tokens"
        )


def _k(tokens: int) -> str:
    return f"{tokens / 1000:.1f}k" if tokens >= 1000 else str(tokens)


# --------------------------------------------------------------------------- the tool loop


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
TurnEvent = EngineEvent | ToolCallEvent | Notice | ServerStart | CompactionStarted | CompactionEnded
Observer = Callable[[TurnEvent], None]
E = TypeVar("E")


def emit(observer: Callable[[E], None] | None, event: E) -> None:
    """Report `event` to `observer`, if there is one (an event the observer's type does not take is a type error)."""
    if observer is not None:
        observer(event)
