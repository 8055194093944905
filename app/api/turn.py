"""One API request's turn: the references, then the aggregator, on the engine the chat runs.

The engine is blocking, so a turn runs on one of the engine's kept threads and reports to a `Sink` (the
HTTP handler's queue, fed thread-safely): text as it streams, progress when asked for, and one end, an
`Outcome` or an `ApiError`. The client's tools are offered to the aggregator and its tool calls come back
as they are; with `--read-tools`, moa-chat's own tools that only read are offered beside them and run here
(`own_tools`). A cancel (the client left, the server stops) closes the upstream
streams through the turn's `CancelToken`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..config import Config, ConfigError, Preset
from ..engine import (
    AggregatorFinished,
    AggregatorStarted,
    AgreementChecked,
    Cancelled,
    CancelToken,
    MoAEngine,
    ReasoningDelta,
    ReferenceFinished,
    ReferenceStarted,
    ReplyDelta,
    TurnEvent,
    threads,
)
from ..engine.clock import monotonic
from ..engine.guidance import continues_after_user
from ..engine.privacy import model_filter
from ..llm import CallLLM, ChatRequest, LLMCallError, StreamAssembler, TimedOut, call_llm_request, describe_error
from ..llm.errors import redact
from ..llm.messages import Message, assistant, tool_result
from ..llm.stream import ToolCall
from ..session.ledger import UsageLedger
from ..store import StoredCall
from .guidance_cache import GuidanceCache, turn_hash
from .own_tools import OwnTools
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

    def usage(self) -> dict[str, object]:
        return dict(self.ledger.usage().as_dict())

    def extension(self, preset: str) -> dict[str, object]:
        """The `moa_chat` field: the preset, whether the guidance was reused, the usage of each call, the cost."""
        return {"preset": preset, "guidance_reused": self.guidance_reused, **self.ledger.as_json()}


@dataclass(frozen=True)
class Failure:
    """A turn that ended without a whole reply: the error to answer with, and the calls it made."""

    error: ApiError
    ledger: UsageLedger
    calls: tuple[StoredCall, ...] = ()
    seconds: float = 0.0
    traces: tuple[dict[str, object], ...] = ()


class _CachingEngine(MoAEngine):
    """The engine, with the guidance of a user turn kept across requests (`fanout: user_turn`)."""

    cache: GuidanceCache
    reused = False

    def consult(self, messages: Sequence[Message], *, iteration: int) -> tuple[tuple[ReferenceFinished, ...], bool]:
        if self.solo or self.preset.fanout != "user_turn":
            return super().consult(messages, iteration=iteration)
        key = turn_hash(self.preset.name, messages)
        if key is not None and continues_after_user(messages):
            cached = self.cache.get(key)
            if cached is not None:
                self.last_references, self.reused = cached, True
                return cached, True
        results, reused = super().consult(messages, iteration=iteration)
        if key is not None and not reused:
            self.cache.put(key, results)
        return results, reused


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
) -> None:
    """Start the turn on a kept thread; returns at once. `sink` hears everything, ending with done or failed.
    With `traces`, the engine's trace entries are collected on the end (`--save` writes them once stored)."""

    def work() -> None:
        end = _run(config, preset, request, sink, cancel, cache, progress, call, read_tools, traces)
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
) -> Outcome | Failure:
    began = monotonic()
    ledger = UsageLedger()
    calls: list[StoredCall] = []
    # The chat's trace hook, collecting: the session and turn a trace belongs to exist only once it is stored.
    traced: list[dict[str, object]] = []

    def observe(event: TurnEvent) -> None:
        ledger.observe(event)
        if isinstance(event, ReferenceFinished | AgreementChecked) and event.record is not None:
            reasoning = event.reasoning if isinstance(event, ReferenceFinished) else ""
            calls.append(StoredCall(event.record, event.text, reasoning))  # a `layers: auto` judge's call too
        elif isinstance(event, AggregatorFinished):
            calls.append(StoredCall(event.record, reasoning=event.reasoning))
        if isinstance(event, ReplyDelta):
            sink("delta", event.text)
        elif isinstance(event, ReasoningDelta) and event.role == "aggregator":
            sink("reasoning", event.text)  # a reasoning aggregator's thinking, as such servers stream it
        elif progress and (line := progress_line(event)) is not None:
            sink("progress", line)

    engine = _CachingEngine(
        config, preset, call=aggregator_call(request, call), cancel=cancel, observer=observe,
        message_filter=model_filter(config), tracer=traced.append if traces else None,
    )  # fmt: skip
    engine.cache = cache
    own = OwnTools(config, preset) if read_tools else None
    offered = own.offered(request.tools) if own is not None else request.tools
    conversation, texts = list(request.messages), []
    limit = preset.max_iterations or config.max_iterations
    try:
        while True:
            reply = StreamAssembler()
            engine.aggregate(conversation, offered, reply)
            texts.append(reply.text)
            asked = reply.tool_calls()
            mine = [c for c in asked if own is not None and own.ours(c, request.tools)]
            # The client's calls go back to it (a round with both: the client's alone); the server's own are
            # answered here and the aggregator asked again, up to the preset's tool rounds.
            if not mine or len(mine) < len(asked):
                break
            if engine.iteration >= limit:  # half an answer is not one: the turn fails, as the chat's does
                message = f"stopped after {limit} tool rounds without a final answer (max_iterations: {limit})"
                raise ApiError(502, message, kind="upstream_error", code="max_iterations")
            assert own is not None
            conversation.append(assistant(reply.text or None, [call.as_message_part() for call in mine]))
            conversation += [tool_result(call.id, own.run(call, cancel)) for call in mine]
            cancel.raise_if_cancelled()
    except ApiError as exc:
        return Failure(exc, ledger, tuple(calls), monotonic() - began, tuple(traced))
    except Cancelled:
        cancelled = ApiError(499, "the turn was cancelled", kind="server_error", code="cancelled")
        return Failure(cancelled, ledger, tuple(calls), monotonic() - began, tuple(traced))
    except Exception as exc:
        failed = upstream_error(exc, provider_secrets(config))
        return Failure(failed, ledger, tuple(calls), monotonic() - began, tuple(traced))
    client_calls = [c for c in reply.tool_calls() if own is None or not own.ours(c, request.tools)]
    finish = reply.finish_reason or "stop"
    if finish == "tool_calls" and not client_calls:
        finish = "stop"
    text = "".join(texts)
    seconds = monotonic() - began
    return Outcome(text, client_calls, finish, ledger, engine.reused, tuple(calls), seconds, tuple(traced))


def upstream_error(exc: BaseException, secrets: tuple[str, ...]) -> ApiError:
    """A failed turn as OpenAI's error shape: 504 for a time limit, 502 for any other provider failure,
    naming the slot (aggregator or reference, provider:model) and the provider; keys never in the text."""
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
