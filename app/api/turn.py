"""One API request's turn: the session layer's tool loop (`session.ToolLoop`), the one the chat runs.

The loop is blocking, so a turn runs on one of the engine's kept threads and reports to a `Sink` (the HTTP
handler's queue, fed thread-safely): text as it streams, progress when asked for, and one end, an `Outcome`
or an `ApiError`. The loop's `ToolRule` is the client's (`own_tools.ClientTools`): the client's tools are
offered to the aggregator and its calls to them go back to the client as they are; with `--read-tools`,
moa-chat's own tools that only read are offered beside them and run here. A cancel (the client left, the server
stops) closes the upstream streams through the turn's `CancelToken`.

The API drives the tool loop, not `ChatSession`: a session owns a conversation (its messages, its stored
head and versions, its MCP servers, a person's approvals), while an API client owns its conversation and
sends it whole with every request, and no one is there to approve a tool. `--save` stores each request's
turn after the fact (api/saving.py).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ..config import Config, ConfigError, Preset
from ..engine import (
    AggregatorFinished,
    AggregatorStarted,
    AgreementChecked,
    CancelToken,
    ReasoningDelta,
    ReferenceFinished,
    ReferenceStarted,
    ReplyDelta,
    TurnEnv,
    TurnEvent,
    TurnPlan,
    threads,
)
from ..engine.budget import ContextBudget
from ..engine.events import RequestFitted
from ..engine.ledger import UsageLedger
from ..engine.privacy import model_filter
from ..llm import CallLLM, ChatRequest, ContextOverflow, LLMCallError, TimedOut, call_llm_request, describe_error
from ..llm.errors import redact
from ..llm.stream import ToolCall
from ..session import ToolLoop, TurnResult
from ..session.tool_loop import NoFinalAnswer
from ..store import StoredCall
from .guidance_cache import GuidanceCache
from .own_tools import ClientTools, OwnTools
from .wire import ApiError, CompletionRequest

SinkKind = Literal["delta", "reasoning", "progress", "done", "failed"]
Sink = Callable[[SinkKind, object], None]
# Told of every turn's end on the turn's thread before the client hears of it: `--save` stores it, so a turn
# answered is a turn stored.
OnEnd = Callable[["Outcome | Failure"], None]
_ROLE_WORDS = {"moa_aggregator": "the aggregator", "moa_reference": "a reference"}


@dataclass(frozen=True)
class Outcome:
    """A turn that ended with a reply: its text, tool calls, finish reason, and every call it made."""

    text: str
    tool_calls: list[ToolCall]
    finish_reason: str
    ledger: UsageLedger
    guidance_reused: bool
    calls: tuple[StoredCall, ...] = ()  # every call with its answer, for the store
    seconds: float = 0.0
    traces: tuple[dict[str, object], ...] = ()  # every finished call's trace entry, when traces are kept
    fitted: tuple[RequestFitted, ...] = ()  # requests fitted to their windows: what was left out or cut

    def usage(self) -> dict[str, object] | None:
        """The `usage` of the response: the sum over every call of the turn (references, the agreement check,
        each round of the aggregator). None when no call reported any (llama.cpp's server streams none): a
        count of 0 would be invented. A sum that leaves some calls out says so: `partial`, and how many."""
        return usage_of(self.ledger)

    def extension(self, preset: str) -> dict[str, object]:
        """The `moa_chat` field: the preset, whether the guidance was reused, the usage of each call, the cost,
        and which requests were fitted to their model's window (`fitted`: what each left out or cut)."""
        fitted = [_fitted_json(event) for event in self.fitted]
        return {"preset": preset, "guidance_reused": self.guidance_reused, **self.ledger.as_json(), "fitted": fitted}


def _fitted_json(event: RequestFitted) -> dict[str, object]:
    return {
        "role": event.role,
        "label": event.label,
        "sent_tokens": event.sent_tokens,
        "context_window": event.window,
        "dropped_messages": event.dropped,
        "cut_answers": [{"label": cut.label, "kept_tokens": cut.kept, "tokens": cut.total} for cut in event.cuts],
    }


@dataclass(frozen=True)
class Failure:
    """A turn that ended without a whole reply: the error to answer with, and the calls it made."""

    error: ApiError
    ledger: UsageLedger
    calls: tuple[StoredCall, ...] = ()
    seconds: float = 0.0
    traces: tuple[dict[str, object], ...] = ()


def finish_reason(outcome: Outcome) -> str:
    """The turn's finish reason as the client reads it: `tool_calls` whenever calls go back to it."""
    if outcome.tool_calls and outcome.finish_reason == "stop":
        return "tool_calls"
    return outcome.finish_reason


def usage_of(ledger: UsageLedger) -> dict[str, object] | None:
    records = ledger.records
    unreported = sum(record.usage is None for record in records)
    if unreported == len(records):
        return None
    usage: dict[str, object] = dict(ledger.usage().as_dict())
    if unreported:
        usage.update(partial=True, calls_without_usage=unreported)
    return usage


def provider_secrets(config: Config) -> tuple[str, ...]:
    """Every provider key in the environment: taken out of any text this server sends or logs."""
    names = {spec.api_key_env for spec in config.providers.values() if spec.api_key_env}
    return tuple(value for name in sorted(names) if (value := os.environ.get(name, "").strip()))


def aggregator_call(request: CompletionRequest, call: CallLLM = call_llm_request) -> CallLLM:
    """`call`, with the client's sampling and extra fields on the aggregator's request alone."""
    if not request.sampling and not request.passed:
        return call

    def send(chat: ChatRequest) -> object:
        if chat.task == "moa_aggregator":
            chat = dataclasses.replace(
                chat,
                sampling=dataclasses.replace(chat.sampling, **request.sampling),
                extra_body={**(chat.extra_body or {}), **request.passed},
            )
        return call(chat)

    return send


def run_turn(
    config: Config,
    preset: Preset,
    request: CompletionRequest,
    *,
    sink: Sink,
    cancel: CancelToken,
    cache: GuidanceCache,
    progress: bool,
    call: CallLLM = call_llm_request,
    on_end: OnEnd | None = None,
    read_tools: bool = False,
    traces: bool = False,
    budget: ContextBudget | None = None,
) -> None:
    """Start the turn on a kept thread; returns at once. `sink` hears everything, ending with done or failed.
    With `traces`, the engine's trace entries are collected on the end (`--save` writes them once stored).
    `budget`: the preset's models' windows, each request fitted to them (the client's conversation is never
    compacted: it is the client's)."""

    def work() -> None:
        end = _run(config, preset, request, sink, cancel, cache, progress, call, read_tools, traces, budget)
        if on_end is not None:
            on_end(end)
        sink("done" if isinstance(end, Outcome) else "failed", end)

    threads.KEPT.start(work, f"moa-api-{preset.name}")


def _run(
    config: Config,
    preset: Preset,
    request: CompletionRequest,
    sink: Sink,
    cancel: CancelToken,
    cache: GuidanceCache,
    progress: bool,
    call: CallLLM,
    read_tools: bool = False,
    traces: bool = False,
    budget: ContextBudget | None = None,
) -> Outcome | Failure:
    calls: list[StoredCall] = []
    # The chat's trace hook, collecting: the session and turn a trace belongs to exist only once it is stored.
    traced: list[dict[str, object]] = []
    # A later round's text starts a new paragraph, as the chat joins its rounds: `said`, some reply text went
    # to the client; `paragraph`, a round began since.
    said = paragraph = False

    fitted: list[RequestFitted] = []

    def observe(event: TurnEvent) -> None:
        nonlocal said, paragraph
        if isinstance(event, RequestFitted):
            fitted.append(event)
        if isinstance(event, ReferenceFinished | AgreementChecked) and event.record is not None:
            reasoning = event.reasoning if isinstance(event, ReferenceFinished) else ""
            calls.append(StoredCall(event.record, event.text, reasoning))  # a `layers: auto` judge's call too
        elif isinstance(event, AggregatorFinished):
            calls.append(StoredCall(event.record, reasoning=event.reasoning))
        if isinstance(event, AggregatorStarted):
            paragraph = said
        if isinstance(event, ReplyDelta):
            sink("delta", f"\n\n{event.text}" if paragraph else event.text)
            said, paragraph = True, False
        elif isinstance(event, ReasoningDelta) and event.role == "aggregator":
            sink("reasoning", event.text)  # a reasoning aggregator's thinking, as such servers stream it
        elif progress and (line := progress_line(event)) is not None:
            sink("progress", line)

    env = TurnEnv(
        config,
        call=aggregator_call(request, call),
        cancel=cancel,
        observer=observe,
        tracer=traced.append if traces else None,
        message_filter=model_filter(config),
        budget=budget,
    )
    # A streamed reply cannot start again once text has gone out; a whole one is sent only once it is whole.
    plan = TurnPlan(preset, restart_cut_reply=not request.stream)
    own = OwnTools(config, preset) if read_tools else None
    result = ToolLoop(env, plan, ClientTools(request.tools, own), cache).run(request.messages)
    ledger, seconds = env.ledger, result.seconds
    if result.status != "ok":
        error = _turn_error(result, provider_secrets(config))
        return Failure(error, ledger, tuple(calls), seconds, tuple(traced))
    finish = result.finish_reason or "stop"
    if finish == "tool_calls" and not result.handed_back:
        finish = "stop"
    handed_back = list(result.handed_back)
    reused = result.guidance_reused
    return Outcome(
        result.text, handed_back, finish, ledger, reused, tuple(calls), seconds, tuple(traced), tuple(fitted)
    )


def _turn_error(result: TurnResult, secrets: tuple[str, ...]) -> ApiError:
    """The error a failed, cut-off or cancelled turn is answered with."""
    if result.status == "cancelled":
        return ApiError(499, "the turn was cancelled", kind="server_error", code="cancelled")
    cause = result.cause
    if isinstance(cause, NoFinalAnswer):  # half an answer is not one: the turn fails, as the chat's does
        return ApiError(502, str(cause), kind="upstream_error", code="max_iterations")
    if cause is None:
        return ApiError(
            500, redact(result.error or "the turn failed", secrets), kind="server_error", code="internal_error"
        )
    return upstream_error(cause, secrets)


def upstream_error(exc: BaseException, secrets: tuple[str, ...]) -> ApiError:
    """A failed turn as OpenAI's error shape: 504 for a time limit, 502 for any other provider failure,
    naming the slot (aggregator or reference, provider:model) and the provider; keys never in the text."""
    if isinstance(exc, ContextOverflow):  # the request is too long for the model: the client's to shorten
        message = redact(f"{exc.provider}:{exc.model}: {exc.reason}", secrets)
        return ApiError(400, message, code="context_length_exceeded", param="messages")
    if isinstance(exc, LLMCallError):
        who = _ROLE_WORDS.get(exc.task or "", "a model")
        message = f"{who} {exc.provider}:{exc.model} (provider {exc.provider}) failed: {exc.reason}"
        if isinstance(exc, TimedOut):
            return ApiError(504, redact(message, secrets), kind="upstream_timeout", code="upstream_timeout")
        headers = {"Retry-After": f"{max(1, round(exc.retry_after))}"} if exc.retry_after else {}
        return ApiError(502, redact(message, secrets), kind="upstream_error", code="upstream_error", headers=headers)
    if isinstance(exc, ConfigError):
        return ApiError(502, redact(str(exc), secrets), kind="upstream_error", code="provider_unavailable")
    return ApiError(500, redact(describe_error(exc), secrets), kind="server_error", code="internal_error")


def progress_line(event: TurnEvent) -> str | None:
    """One line of the panel's progress, for a client that shows it (reasoning_content or an SSE comment)."""
    if isinstance(event, ReferenceStarted):
        return f"· {event.label} is answering\n"
    if isinstance(event, ReferenceFinished):
        if event.status == "ok":
            return f"✓ {event.label} answered in {event.seconds:.1f}s\n"
        return f"✗ {event.label} {event.status}: {event.error or ''}\n"
    if isinstance(event, AggregatorStarted):
        reused = ", reused from this turn" if event.guidance_reused else ""
        return (
            f"→ {event.label} writes the reply ({event.references_ok} of {event.references_total} "
            f"references answered{reused})\n"
        )
    return None
