"""`TurnEnv`: what every model call of one turn shares, and `TurnPlan`: what the turn asks of the panel. Both
are built once per turn and passed down.

A turn's calls (each reference, sample and layer, the `layers: auto` judge, every aggregator round) send
through one `CallLLM`, stop on one cancel token, report to one observer, trace to one tracer and leave the
machine through one message filter; their durations come from one clock, their records go to one ledger, and
their requests are fitted to their windows by one budget.
The session (or the API, the seed's facade, eval) builds the environment when the turn begins; the engine, the
fan-out, the agreement check and each `ModelCall` read it and never change it (only its ledger grows, as
calls finish). A facade call that brings its own cancel token and observer gets an environment of its own,
so they reach every call of that turn.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..config import Config, Preset
from ..llm import CallLLM, call_llm_request
from ..llm.messages import Message
from . import clock
from .budget import ContextBudget
from .cancel import CancelToken
from .events import Observer, ReferenceFinished, TurnEvent
from .ledger import UsageLedger

# What reads a reference's final answer (an eval task's checker), so that `layers: auto` needs no judge: the
# answer it finds, compared exactly after stripping whitespace, or None when it finds none.
AnswerExtractor = Callable[[str], str | None]
# Tracing a call: its record, request and answer as one JSON-ready entry (store.traces.TraceWriter).
Tracer = Callable[[dict[str, object]], None]
# What leaves the machine under `privacy_filter: full`: the messages, redacted.
MessageFilter = Callable[[Sequence[Message]], list[Message]]


def _now() -> float:
    """engine.clock's reading at the time of asking (tests freeze it by replacing `clock.monotonic`)."""
    return clock.monotonic()


@dataclass(frozen=True)
class TurnEnv:
    config: Config
    call: CallLLM = call_llm_request  # sends one request: the wire, or what a caller injected
    cancel: CancelToken = field(default_factory=CancelToken)
    observer: Observer | None = None  # told of everything the turn does; called from worker threads
    tracer: Tracer | None = None  # every finished call's request and answer (save_traces)
    message_filter: MessageFilter | None = None  # applied to every request's messages (privacy_filter: full)
    clock: Callable[[], float] = _now
    ledger: UsageLedger = field(default_factory=UsageLedger)  # every finished call's record, as it is reported
    # Each slot's window and token counts, for fitting requests to them (None: nothing is fitted or counted).
    budget: ContextBudget | None = None

    def emit(self, event: TurnEvent) -> None:
        """Report `event`: the ledger keeps the record a finished call carries, then the observer is told."""
        self.ledger.observe(event)
        if self.observer is not None:
            self.observer(event)


@dataclass(frozen=True)
class TurnPlan:
    preset: Preset
    solo: bool = False  # the aggregator alone: no references, no guidance (a quick question)
    # Answers given (a regeneration's stored ones) serve every round: no reference is asked.
    given: tuple[ReferenceFinished, ...] | None = None
    # The front end can show a fresh reply after a cut-off one (ReplyRestarted): the aggregator is then asked
    # once more when its reply is cut off after text arrived, the cut-off text an earlier version.
    restart_cut_reply: bool = False
    answer_extractor: AnswerExtractor | None = None  # `layers: auto`: see engine/agreement.py
    rng: random.Random | None = None  # the order a `shuffle:` panel is shown in (a test fixes it)
