"""One user turn, end to end: fan-out, the aggregator's streamed reply, and the tool loop.

Both front ends drive this: `moa-chat ask` prints its events, the TUI renders them. It runs on one
thread (the caller's); the engine's reference pool lives inside `MoAChatCompletions.create`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from . import clock
from .cancel import Cancelled, CancelToken
from .config import Config, Preset
from .events import (
    AggregatorFinished,
    AggregatorStarted,
    Notice,
    Observer,
    ReferenceFinished,
    ReplyDelta,
    ToolCallEvent,
    TurnFinished,
    TurnStatus,
    Usage,
    emit,
    sum_usage,
)
from .llm import LLMCallError, close_stream, describe_error
from .moa import MoAChatCompletions
from .stream import StreamAssembler, ToolCall, is_complete_response

Decision = Literal["allow_once", "allow_always", "deny"]


@dataclass(frozen=True)
class ApprovalRequest:
    call_id: str
    tool: str
    arguments: dict[str, Any]
    preview: str | None = None  # e.g. the diff a write_file call would make


Approver = Callable[[ApprovalRequest], Decision]


class ToolLike(Protocol):
    name: str
    run: Callable[[dict[str, Any], CancelToken], str]

    def approval_reason(self, arguments: dict[str, Any]) -> str | None: ...

    def preview(self, arguments: dict[str, Any]) -> str | None: ...


class ToolBox(Protocol):
    """What the turn needs from the tool registry (moa_chat.tools)."""

    def schemas(self) -> list[dict[str, Any]]: ...

    def names(self) -> list[str]: ...

    def get(self, name: str) -> ToolLike | None: ...

    def execute(self, name: str, arguments: dict[str, Any], cancel: CancelToken) -> str: ...


@dataclass
class TurnResult:
    status: TurnStatus
    text: str
    error: str | None
    usage: Usage
    seconds: float
    references: tuple[ReferenceFinished, ...]
    new_messages: list[dict[str, Any]] = field(default_factory=list)
    iterations: int = 0


DENIED = "denied by the user"
CANCELLED = "cancelled by the user"
NOT_RUN = "error: not run, the turn failed before this call could run"


class Turn:
    def __init__(
        self,
        config: Config,
        preset: Preset,
        *,
        observer: Observer | None = None,
        cancel: CancelToken | None = None,
        tools: ToolBox | None = None,
        approver: Approver | None = None,
        max_iterations: int | None = None,
    ) -> None:
        self.config, self.preset = config, preset
        self.observer = observer
        self._aggregator_asked_at: float | None = None
        self.cancel = cancel or CancelToken()
        self.tools = tools
        self.approver = approver
        self.max_iterations = max_iterations or preset.max_iterations or config.max_iterations
        self._assembler: StreamAssembler | None = None

    def run(self, messages: list[dict[str, Any]]) -> TurnResult:
        started = clock.monotonic()
        facade = MoAChatCompletions(self.preset.name, config=self.config)
        aggregator = self.preset.aggregator
        conversation = list(messages)
        added: list[dict[str, Any]] = []
        texts: list[str] = []
        usages: list[Usage | None] = []
        status: TurnStatus = "ok"
        error: str | None = None
        schemas = (self.tools.schemas() or None) if self.tools else None
        iteration = 0
        try:
            while True:
                if iteration >= self.max_iterations:
                    emit(
                        self.observer,
                        Notice(
                            f"Stopped after {self.max_iterations} tool iterations without a final answer "
                            "(max_iterations). Ask again to continue.",
                            "warning",
                        ),
                    )
                    break
                iteration += 1
                self.cancel.raise_if_cancelled()
                stream = facade.create(
                    messages=conversation, tools=schemas, stream=True, cancel=self.cancel, observer=self._watch
                )
                assembler = self._consume(stream, iteration)
                self._assembler = None  # consumed whole: its text goes in below, not as a partial
                usages.append(assembler.usage)
                calls = assembler.tool_calls()
                if assembler.text:
                    texts.append(assembler.text)
                if assembler.text or calls:
                    message: dict[str, Any] = {"role": "assistant", "content": assembler.text or ""}
                    if calls:
                        message["tool_calls"] = [call.as_message_part() for call in calls]
                    conversation.append(message)
                    added.append(message)
                if not calls:
                    break
                for reply in self._run_tools(calls, iteration):
                    conversation.append(reply)
                    added.append(reply)
                self.cancel.raise_if_cancelled()
        except Cancelled:
            status, error = "cancelled", CANCELLED
            self._keep_partial(texts, added, CANCELLED)
        except LLMCallError as exc:
            status, error = "failed", str(exc)
            self._keep_partial(texts, added, NOT_RUN)
        except Exception as exc:  # a provider fault must never take the conversation with it
            status, error = "failed", f"{aggregator.label} failed: {describe_error(exc)}"
            self._keep_partial(texts, added, NOT_RUN)
        references = facade.last_references
        usages.extend(r.usage for fanout in facade.fanouts for r in fanout)
        result = TurnResult(
            status=status,
            text="\n\n".join(texts),
            error=error,
            usage=sum_usage(usages),
            seconds=round(clock.monotonic() - started, 3),
            references=references,
            new_messages=added,
            iterations=iteration,
        )
        emit(
            self.observer,
            TurnFinished(
                status=status,
                text=result.text,
                error=error,
                usage=result.usage,
                seconds=result.seconds,
                preset=self.preset.name,
                aggregator=aggregator.label,
                references=references,
            ),
        )
        return result

    def _watch(self, event: Any) -> None:
        """Pass engine events on, noting when the aggregator was asked (its time to first token starts
        there, not when the response headers arrive)."""
        if isinstance(event, AggregatorStarted):
            self._aggregator_asked_at = clock.monotonic()
        emit(self.observer, event)

    # ------------------------------------------------------------------ the aggregator's stream

    def _consume(self, stream: Any, iteration: int) -> StreamAssembler:
        aggregator = self.preset.aggregator
        assembler = self._assembler = StreamAssembler()
        started = self._aggregator_asked_at or clock.monotonic()
        first_token: float | None = None
        if is_complete_response(stream):
            text = assembler.feed_response(stream)
            if text:
                emit(self.observer, ReplyDelta(text))
        else:
            try:
                with self.cancel.closing(lambda: close_stream(stream)):
                    for chunk in stream:
                        self.cancel.raise_if_cancelled()
                        text = assembler.feed(chunk)
                        if text:
                            if first_token is None:
                                first_token = clock.monotonic() - started
                            emit(self.observer, ReplyDelta(text))
            except Cancelled:
                raise
            except Exception as exc:
                if self.cancel.cancelled:  # the read failed because we closed the stream
                    raise Cancelled() from exc
                raise LLMCallError(
                    describe_error(exc), provider=aggregator.provider, model=aggregator.model, task="moa_aggregator"
                ) from exc
            self.cancel.raise_if_cancelled()
        emit(
            self.observer,
            AggregatorFinished(
                label=aggregator.label,
                iteration=iteration,
                usage=assembler.usage,
                seconds=round(clock.monotonic() - started, 3),
                first_token_seconds=first_token,
                finish_reason=assembler.finish_reason,
            ),
        )
        return assembler

    def _keep_partial(self, texts: list[str], added: list[dict[str, Any]], why: str) -> None:
        """Whatever streamed before a failure or cancel stays in the conversation, and the conversation
        stays valid: a tool call left without its tool message would make every later request fail."""
        answered = {m.get("tool_call_id") for m in added if m.get("role") == "tool"}
        for message in list(added):
            for part in message.get("tool_calls") or []:
                if part["id"] not in answered:
                    added.append({"role": "tool", "tool_call_id": part["id"], "content": why})
                    answered.add(part["id"])
        if self._assembler is not None and self._assembler.text:
            texts.append(self._assembler.text)
            added.append({"role": "assistant", "content": self._assembler.text})
        self._assembler = None

    # ------------------------------------------------------------------ tools

    def _run_tools(self, calls: list[ToolCall], iteration: int) -> list[dict[str, Any]]:
        """One tool message per call, in order; calls left when the turn is cancelled say so."""
        replies = []
        for call in calls:
            if self.cancel.cancelled:
                replies.append(_tool_message(call, CANCELLED))
                self._report(call, iteration, "cancelled", CANCELLED)
                continue
            try:
                result = self._run_tool(call, iteration)
            except Cancelled:
                raise
            except Exception as exc:  # a fault around a tool is the model's news, not the end of the turn
                result = f"error: {type(exc).__name__}: {exc}"
                self._report(call, iteration, "failed", result)
            replies.append(_tool_message(call, result))
        return replies

    def _report(
        self, call: ToolCall, iteration: int, status: Any, result: str | None = None, seconds: float | None = None
    ) -> None:
        emit(self.observer, ToolCallEvent(call.id, call.name, call.arguments, status, result, seconds, iteration))

    def _run_tool(self, call: ToolCall, iteration: int) -> str:
        def report(status: Any, result: str | None = None, seconds: float | None = None) -> None:
            self._report(call, iteration, status, result, seconds)

        report("requested")
        tool = self.tools.get(call.name) if self.tools else None
        if tool is None:
            available = ", ".join(self.tools.names()) if self.tools else "none"
            result = f"error: there is no tool named {call.name!r}; available tools: {available}"
            report("failed", result, 0.0)
            return result
        arguments, problem = call.parsed_arguments()
        if arguments is None:
            result = f"error: {problem}. Call {call.name} again with a valid JSON object as arguments."
            report("failed", result, 0.0)
            return result
        reason = tool.approval_reason(arguments)
        if reason is not None:
            report("awaiting_approval")
            decision: Decision = "deny"
            if self.approver is not None:
                preview = tool.preview(arguments) or reason or None
                decision = self.approver(ApprovalRequest(call.id, call.name, arguments, preview))
            if self.cancel.cancelled:
                report("cancelled", CANCELLED)
                return CANCELLED
            if decision not in ("allow_once", "allow_always"):  # anything unexpected denies
                report("denied", DENIED, 0.0)
                return DENIED
        report("running")
        started = clock.monotonic()
        try:
            result = tool.run(arguments, self.cancel)
            status = "done"
        except Cancelled:
            report("cancelled", CANCELLED, round(clock.monotonic() - started, 3))
            return CANCELLED
        except Exception as exc:
            result, status = f"error: {exc}", "failed"
        report(status, result, round(clock.monotonic() - started, 3))
        return result


def _tool_message(call: ToolCall, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.id, "content": content}
