"""One user turn, end to end: the engine's rounds, the aggregator's streamed reply, and the tool loop.

The one tool loop of every front end: the chat, `ask` and `eval` (through `ChatSession`) and `moa-chat api`. It
is given a `ToolRule`, which says what the aggregator is offered and which of its calls run here: the chat's
tools (all of them, each asked about as the approval policy says), or an API client's, which go back to the
client while moa-chat's own read-only tools run on the server. It runs on one thread (the caller's); the
engine's reference pool lives inside each round.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from ..engine import Cancelled, MoAEngine, ReferenceFinished, TurnEnv, TurnPlan
from ..engine.echoes import EchoFilter
from ..engine.guidance import GuidanceMemory
from ..engine.ledger import UsageLedger
from ..llm import CutOff, LLMCallError, StreamAssembler, TimedOut, ToolCall, Usage, describe_error
from ..llm.messages import Message, ToolSpec, assistant, tool_result

TurnStatus = Literal["ok", "failed", "cancelled", "cut_off"]

# A whole reply that the provider ended early on purpose: shown, with the reason, but not an error.
STOPPED = {
    "length": "stopped: max_tokens reached",
    "content_filter": "stopped by the provider's content filter",
}
CANCELLED = "cancelled by the user"
NOT_RUN = "error: not run, the turn failed before this call could run"


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
    # The last round's tool calls that do not run here (an API client's own): the turn ends with them.
    handed_back: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None  # the last round's
    guidance_reused: bool = False  # a round used references' answers kept from earlier in the user turn
    cause: BaseException | None = None  # what ended a turn that did not end "ok" (an API answers by its kind)
    echoes_removed: int = 0  # moa-chat's marker lines the aggregator copied into its reply, taken out of it

    @property
    def usage(self) -> Usage:
        return self.ledger.usage()


class NoFinalAnswer(Exception):
    """The tool loop used up max_iterations and the aggregator never answered without tools."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"stopped after {limit} tool rounds without a final answer (max_iterations: {limit})")


class ToolRule(Protocol):
    """The tools of a turn: what the aggregator is offered, and which of its calls run here (the rest end the
    turn, handed back to the caller)."""

    def offered(self) -> list[ToolSpec] | None: ...

    def runs_here(self, call: ToolCall) -> bool: ...

    def run(self, call: ToolCall, iteration: int, env: TurnEnv) -> str:
        """The tool message's content for `call` (its output, its error, a refusal); raises Cancelled only."""
        ...


class NoTools:
    """A turn with no tools: none offered."""

    def offered(self) -> list[ToolSpec] | None:
        return None

    def runs_here(self, call: ToolCall) -> bool:
        return True  # a call to a tool never offered is answered here, with an error

    def run(self, call: ToolCall, iteration: int, env: TurnEnv) -> str:
        return f"error: there is no tool named {call.name!r}; no tools are offered"


class ToolLoop:
    def __init__(
        self, env: TurnEnv, plan: TurnPlan, tools: ToolRule | None = None, guidance: GuidanceMemory | None = None
    ) -> None:
        """`guidance`: where the references' answers of a user turn are kept for its later rounds (the engine's
        own by default; the API keeps them across a client's requests)."""
        self.env, self.plan = env, plan
        self.tools: ToolRule = tools if tools is not None else NoTools()
        self.engine = MoAEngine(env, plan, guidance)
        preset = plan.preset
        self.max_iterations = preset.max_iterations or env.config.max_iterations
        self._reply: StreamAssembler | None = None  # the round being read, for what it said before a failure
        self._echoes_removed = 0

    def run(self, messages: Sequence[Message]) -> TurnResult:
        """The turn on `messages` (the conversation so far, ending with the user's prompt, or with tool results
        of an earlier request). Never raises: a failure is a TurnResult with its reason."""
        started = self.env.clock()
        engine = self.engine
        conversation = list(messages)
        added: list[Message] = []
        texts: list[str] = []
        status: TurnStatus = "ok"
        error: str | None = None
        reply = StreamAssembler()
        handed_back: list[ToolCall] = []
        cause: BaseException | None = None
        try:
            while True:
                if engine.iteration >= self.max_iterations:
                    raise NoFinalAnswer(self.max_iterations)
                self.env.cancel.raise_if_cancelled()
                reply = self._reply = StreamAssembler()
                engine.aggregate(conversation, self.tools.offered(), reply)
                self._reply = None  # read whole: its text goes in below, not as a partial
                calls = reply.tool_calls()
                text = self._without_echoes(reply.text)  # as the reply streamed: moa-chat's markers left out
                if text:
                    texts.append(text)
                handed_back = [call for call in calls if not self.tools.runs_here(call)]
                # A round with calls that go back to the caller ends the turn; the caller runs them (an API
                # client's own tools: a round with both hands back the client's alone).
                here = [] if handed_back else calls
                if text or here:
                    message = assistant(text, [call.as_message_part() for call in here])
                    conversation.append(message)
                    added.append(message)
                if not here:
                    break
                for call in here:
                    result = tool_result(call.id, self.tools.run(call, engine.iteration, self.env))
                    conversation.append(result)
                    added.append(result)
                self.env.cancel.raise_if_cancelled()
        except Cancelled as exc:
            status, error, cause = "cancelled", CANCELLED, exc
            self._keep_partial(texts, added, CANCELLED)
        except (CutOff, TimedOut) as exc:
            # The text that arrived stays, but it is not a whole answer: say so; with none, it failed.
            partial = bool(self._reply and self._reply.text)
            status, error, cause = ("cut_off" if partial else "failed"), str(exc), exc
            if partial and isinstance(exc, TimedOut):
                error = f"the reply from {exc.provider}:{exc.model} was cut off: {exc.reason}"
            self._keep_partial(texts, added, NOT_RUN)
        except NoFinalAnswer as exc:
            last = " What the last round said is above." if texts else ""
            status, error, cause = "failed", f"{exc}; ask again to let it go on.{last}", exc
            self._keep_partial(texts, added, NOT_RUN)
        except LLMCallError as exc:
            status, error, cause = "failed", str(exc), exc
            self._keep_partial(texts, added, NOT_RUN)
        except Exception as exc:  # a provider fault must never take the conversation with it
            status, error, cause = "failed", f"{self.plan.preset.aggregator.label} failed: {describe_error(exc)}", exc
            self._keep_partial(texts, added, NOT_RUN)
        return TurnResult(
            status=status,
            text="\n\n".join(texts),
            error=error,
            seconds=round(self.env.clock() - started, 3),
            references=engine.last_references,
            ledger=self.env.ledger,
            new_messages=added,
            iterations=engine.iteration,
            warning=STOPPED.get(reply.finish_reason or "") if status == "ok" else None,
            solo=self.plan.solo,
            reference_order=engine.reference_order,
            layers_run=engine.layers_run,
            layers_reason=engine.layers_reason,
            handed_back=tuple(handed_back) if status == "ok" else (),
            finish_reason=reply.finish_reason if status == "ok" else None,
            guidance_reused=engine.guidance_reused,
            cause=cause,
            echoes_removed=self._echoes_removed,
        )

    def _without_echoes(self, text: str) -> str:
        echoes = EchoFilter()
        kept = echoes.feed(text) + echoes.finish()
        self._echoes_removed += echoes.removed
        return kept

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
        text = self._without_echoes(self._reply.text) if self._reply is not None else ""
        if text:
            texts.append(text)
            added.append(assistant(text))
        self._reply = None
