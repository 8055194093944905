"""The chat's `ToolRule`: every call runs here, on the session's tools, asked about as its approval policy says.

Each call's life is reported as `ToolCallEvent`s (requested → awaiting approval → running → done, failed,
denied or cancelled), which the chat shows as a tool block and `ask` as lines on stderr.
"""

from __future__ import annotations

import contextlib
from typing import Literal, cast

from ..engine import Cancelled, TurnEnv
from ..engine.events import ToolCallEvent, ToolStatus
from ..llm import ToolCall
from ..llm.messages import ToolSpec
from ..tools import ApprovalPolicy, ApprovalRequest, ApprovalVerdict, ToolRegistry
from .tool_loop import CANCELLED

DENIED = "denied by the user"
# No one was asked (`ask`, a script): the model is told the run allows no such call, and the flag that would.
NOT_ALLOWED = "not allowed in this non-interactive run: run with {flag} to allow"


class ChatTools:
    def __init__(self, registry: ToolRegistry | None, approval: ApprovalPolicy | None) -> None:
        self.registry, self.approval = registry, approval

    def offered(self) -> list[ToolSpec] | None:
        """The registry's tools as the aggregator's request offers them; None when there are none."""
        if self.registry is None:
            return None
        # The registry writes each schema in the function-tool form (tools.registry.Tool.schema).
        return cast(list[ToolSpec], self.registry.schemas()) or None

    def runs_here(self, call: ToolCall) -> bool:
        return True  # a call to a tool that does not exist is answered here too, with an error

    def run(self, call: ToolCall, iteration: int, env: TurnEnv) -> str:
        """The call's result; a call left when the turn is cancelled says so."""
        if env.cancel.cancelled:
            self._report(env, call, iteration, "cancelled", CANCELLED)
            return CANCELLED
        try:
            return self._run(call, iteration, env)
        except Cancelled:
            raise
        except Exception as exc:  # a fault around a tool is the model's news, not the end of the turn
            result = f"error: {type(exc).__name__}: {exc}"
            self._report(env, call, iteration, "failed", result)
            return result

    @staticmethod
    def _report(
        env: TurnEnv,
        call: ToolCall,
        iteration: int,
        status: ToolStatus,
        result: str | None = None,
        seconds: float | None = None,
    ) -> None:
        env.emit(ToolCallEvent(call.id, call.name, call.arguments, status, result, seconds, iteration))

    def _run(self, call: ToolCall, iteration: int, env: TurnEnv) -> str:
        def report(status: ToolStatus, result: str | None = None, seconds: float | None = None) -> None:
            self._report(env, call, iteration, status, result, seconds)

        report("requested")
        tool = self.registry.get(call.name) if self.registry else None
        if tool is None:
            available = ", ".join(self.registry.names()) if self.registry else "none"
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
            verdict = ApprovalVerdict("deny", denied_by="no_one_to_ask")
            if self.approval is not None:
                preview = tool.preview(arguments) or reason or None
                request = ApprovalRequest(call.id, call.name, arguments, preview, kind=kind)
                with contextlib.suppress(Cancelled):  # withdrawn: the cancel is reported just below
                    verdict = self.approval.decide(request, env.cancel)
            if env.cancel.cancelled:
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
        started = env.clock()
        status: ToolStatus
        try:
            result = tool.run(arguments, env.cancel)
            status = "done"
        except Cancelled:
            report("cancelled", CANCELLED, round(env.clock() - started, 3))
            return CANCELLED
        except Exception as exc:
            result, status = f"error: {exc}", "failed"
        report(status, result, round(env.clock() - started, 3))
        return result
