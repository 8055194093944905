"""One user turn, end to end: the engine's rounds, the aggregator's streamed reply, and the tool loop.

It runs on one thread (the caller's); the engine's reference pool lives inside each round.
`ChatSession.send` is the way in for both front ends.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, cast

from ..config import Config, Preset
from ..engine import AnswerExtractor, Cancelled, CancelToken, MoAEngine, ReferenceFinished, clock
from ..engine.calls import Tracer
from ..engine.events import Observer, ToolCallEvent, ToolStatus, TurnEvent, emit
from ..engine.privacy import model_filter
from ..llm import (
    CallLLM,
    CutOff,
    LLMCallError,
    StreamAssembler,
    TimedOut,
    ToolCall,
    Usage,
    call_llm_request,
    describe_error,
)
from ..llm.messages import Message, ToolMessage, ToolSpec, assistant, system, tool_result
from ..tools import ApprovalPolicy, ApprovalRequest, ToolRegistry, Verdict
from .ledger import UsageLedger

TurnStatus = Literal["ok", "failed", "cancelled", "cut_off"]

# A whole reply that the provider ended early on purpose: shown, with the reason, but not an error.
STOPPED = {
    "length": "stopped: max_tokens reached",
    "content_filter": "stopped by the provider's content filter",
}


@dataclass
class TurnResult:
    status: TurnStatus
    text: str
    error: str | None
    seconds: float
    references: tuple[ReferenceFinished, ...]  # the last fan-out's answers
    ledger: UsageLedger = field(default_factory=UsageLedger)
    new_messages: list[Message] = field(default_factory=list)
    iterations: int = 0
    warning: str | None = None  # a reply the provider stopped early (max_tokens, content filter)
    solo: bool = False  # the aggregator alone, no references
    reference_order: list[int] | None = None  # the order a shuffled panel was shown to the aggregator in
    layers_run: int = 0  # layers of references the last fan-out ran (0: none, a solo turn)
    layers_reason: str | None = None  # `layers: auto`: why that many ("references agreed")

    @property
    def usage(self) -> Usage:
        return self.ledger.usage()


class NoFinalAnswer(Exception):
    """The tool loop used up max_iterations and the aggregator never answered without tools."""


DENIED = "denied by the user"
# No one was asked (`ask`, a script): the model is told the run allows no such call, and the flag that would.
NOT_ALLOWED = "not allowed in this non-interactive run: run with {flag} to allow"
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
        tools: ToolRegistry | None = None,
        approval: ApprovalPolicy | None = None,
        max_iterations: int | None = None,
        call: CallLLM = call_llm_request,
        references: tuple[ReferenceFinished, ...] | None = None,
        system_prompt: str | None = None,
        solo: bool = False,
        rng: random.Random | None = None,
        tracer: Tracer | None = None,
        restart_cut_reply: bool = False,
        answer_extractor: AnswerExtractor | None = None,
    ) -> None:
        self.config, self.preset = config, preset
        self.answer_extractor = answer_extractor  # `layers: auto`: see MoAEngine
        self.restart_cut_reply = restart_cut_reply  # see MoAEngine
        self.solo, self._rng, self._tracer = solo, rng, tracer
        # Given (ask --system), else the preset's, else the global one; sent first, never stored.
        self.system_prompt = system_prompt if system_prompt is not None else config.system_prompt_for(preset)
        self.references = references  # stored answers to use instead of asking the references
        self.observer = observer
        self.cancel = cancel or CancelToken()
        self.tools = tools
        self.approval = approval
        self.max_iterations = max_iterations or preset.max_iterations or config.max_iterations
        self.ledger = UsageLedger()
        self._call = call
        self._reply: StreamAssembler | None = None  # the round being read, for what it said before a failure

    def _observe(self, event: TurnEvent) -> None:
        self.ledger.observe(event)
        emit(self.observer, event)

    def run(self, messages: Sequence[Message]) -> TurnResult:
        started = clock.monotonic()
        engine = MoAEngine(
            self.config,
            self.preset,
            call=self._call,
            cancel=self.cancel,
            observer=self._observe,
            references=self.references,
            solo=self.solo,
            rng=self._rng,
            tracer=self._tracer,
            message_filter=model_filter(self.config),
            restart_cut_reply=self.restart_cut_reply,
            answer_extractor=self.answer_extractor,
        )
        conversation = list(messages)
        if self.system_prompt and not (conversation and conversation[0]["role"] == "system"):
            conversation.insert(0, system(self.system_prompt))
        added: list[Message] = []
        texts: list[str] = []
        status: TurnStatus = "ok"
        error: str | None = None
        warning: str | None = None
        aggregator = self.preset.aggregator
        schemas = _tool_specs(self.tools)
        try:
            while True:
                if engine.iteration >= self.max_iterations:
                    last = " What the last round said is above." if texts else ""
                    raise NoFinalAnswer(
                        f"stopped after {self.max_iterations} tool rounds without a final answer "
                        f"(max_iterations: {self.max_iterations}); ask again to let it go on.{last}"
                    )
                self.cancel.raise_if_cancelled()
                reply = self._reply = StreamAssembler()
                engine.aggregate(conversation, schemas, reply)
                self._reply = None  # read whole: its text goes in below, not as a partial
                calls = reply.tool_calls()
                if not reply.text.strip() and not calls:
                    raise LLMCallError(
                        f"returned an empty answer (finish reason: {reply.finish_reason})",
                        provider=aggregator.provider,
                        model=aggregator.model,
                        task="moa_aggregator",
                    )
                warning = STOPPED.get(reply.finish_reason or "")
                if reply.text:
                    texts.append(reply.text)
                if reply.text or calls:
                    message = assistant(reply.text or "", [call.as_message_part() for call in calls])
                    conversation.append(message)
                    added.append(message)
                if not calls:
                    break
                for tool_reply in self._run_tools(calls, engine.iteration):
                    conversation.append(tool_reply)
                    added.append(tool_reply)
                self.cancel.raise_if_cancelled()
        except Cancelled:
            status, error = "cancelled", CANCELLED
            self._keep_partial(texts, added, CANCELLED)
        except (CutOff, TimedOut) as exc:
            # The text that arrived stays, but it is not a whole answer: say so; with none, it failed.
            partial = bool(self._reply and self._reply.text)
            status, error = ("cut_off" if partial else "failed"), str(exc)
            if partial and isinstance(exc, TimedOut):
                error = f"the reply from {exc.provider}:{exc.model} was cut off: {exc.reason}"
            self._keep_partial(texts, added, NOT_RUN)
        except NoFinalAnswer as exc:
            status, error = "failed", str(exc)
            self._keep_partial(texts, added, NOT_RUN)
        except LLMCallError as exc:
            status, error = "failed", str(exc)
            self._keep_partial(texts, added, NOT_RUN)
        except Exception as exc:  # a provider fault must never take the conversation with it
            status, error = "failed", f"{self.preset.aggregator.label} failed: {describe_error(exc)}"
            self._keep_partial(texts, added, NOT_RUN)
        return TurnResult(
            status=status,
            text="\n\n".join(texts),
            error=error,
            seconds=round(clock.monotonic() - started, 3),
            references=engine.last_references,
            ledger=self.ledger,
            new_messages=added,
            iterations=engine.iteration,
            warning=warning if status == "ok" else None,
            solo=self.solo,
            reference_order=engine.reference_order,
            layers_run=engine.layers_run,
            layers_reason=engine.layers_reason,
        )

    def _keep_partial(self, texts: list[str], added: list[Message], why: str) -> None:
        """Whatever streamed before a failure or cancel stays in the conversation, and the conversation
        stays valid: a tool call left without its tool message would make every later request fail."""
        answered = {m["tool_call_id"] for m in added if m["role"] == "tool"}
        for message in list(added):
            if message["role"] != "assistant":
                continue
            for part in message.get("tool_calls") or []:
                if part["id"] not in answered:
                    added.append(tool_result(part["id"], why))
                    answered.add(part["id"])
        if self._reply is not None and self._reply.text:
            texts.append(self._reply.text)
            added.append(assistant(self._reply.text))
        self._reply = None

    # ------------------------------------------------------------------ tools

    def _run_tools(self, calls: list[ToolCall], iteration: int) -> list[ToolMessage]:
        """One tool message per call, in order; calls left when the turn is cancelled say so."""
        replies: list[ToolMessage] = []
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
        self,
        call: ToolCall,
        iteration: int,
        status: ToolStatus,
        result: str | None = None,
        seconds: float | None = None,
    ) -> None:
        self._observe(ToolCallEvent(call.id, call.name, call.arguments, status, result, seconds, iteration))

    def _run_tool(self, call: ToolCall, iteration: int) -> str:
        def report(status: ToolStatus, result: str | None = None, seconds: float | None = None) -> None:
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
            kind: Literal["change", "reach"] = "reach" if tool.read_only else "change"
            verdict = Verdict("deny", denied_by="no_one_to_ask")
            if self.approval is not None:
                preview = tool.preview(arguments) or reason or None
                request = ApprovalRequest(call.id, call.name, arguments, preview, kind=kind)
                with contextlib.suppress(Cancelled):  # withdrawn: the cancel is reported just below
                    verdict = self.approval.decide(request, self.cancel)
            if self.cancel.cancelled:
                report("cancelled", CANCELLED)
                return CANCELLED
            if not verdict.allowed:
                denial = (
                    DENIED
                    if verdict.denied_by == "user"
                    else NOT_ALLOWED.format(flag="--allow-local" if kind == "reach" else "--yes")
                )
                report("denied", denial, 0.0)
                return denial
        report("running")
        started = clock.monotonic()
        status: ToolStatus
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


def _tool_message(call: ToolCall, content: str) -> ToolMessage:
    return tool_result(call.id, content)


def _tool_specs(tools: ToolRegistry | None) -> list[ToolSpec] | None:
    """The registry's tools as the aggregator's request offers them; None when there are none."""
    if tools is None:
        return None
    # The registry writes each schema in the function-tool form (tools.registry.Tool.schema).
    return cast(list[ToolSpec], tools.schemas()) or None
