"""Who says yes to a tool call that needs approval: the user (the chat's dialog), a flag (`ask --yes`), or no one.

An `Approver` is handed to the session when it is built. Asking returns a future at once; the turn's thread
waits on it together with the turn's cancel token, so a cancel withdraws the question (the future is cancelled,
and a dialog showing it closes) without anything polling.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..engine.cancel import CancelToken

Decision = Literal["allow_once", "allow_always", "deny"]
# Who said no: the user (the chat's dialog), or no one, because the run has no one to ask (`ask`, scripts).
DeniedBy = Literal["user", "no_one_to_ask"]


@dataclass(frozen=True)
class ApprovalRequest:
    call_id: str
    tool: str
    arguments: dict[str, Any]
    preview: str | None = None  # e.g. the diff a write_file call would make
    # "change": the tool changes something; "reach": a reading tool that would reach this machine or its
    # network (fetch_url to localhost, the LAN, cloud metadata).
    kind: Literal["change", "reach"] = "change"


@dataclass(frozen=True)
class ApprovalVerdict:
    """What ApprovalPolicy settles for one call: the decision and, for a denial, who gave it, so the model
    is told the truth ("denied by the user" is false when no one was asked)."""

    decision: Decision
    denied_by: DeniedBy | None = None

    @property
    def allowed(self) -> bool:
        return self.decision in ("allow_once", "allow_always")


class Approver(Protocol):
    """Asks someone whether a tool call may run. Called on the turn's thread; must not block on the answer."""

    def ask(self, request: ApprovalRequest) -> Future[Decision]:
        """Start asking; the future resolves with the decision. Cancelling it withdraws the question."""
        ...


class Answering:
    """An approver whose answer is a function of the request, given at once (scripts, tests)."""

    def __init__(self, decide: Callable[[ApprovalRequest], Decision]) -> None:
        self.decide = decide

    def ask(self, request: ApprovalRequest) -> Future[Decision]:
        answer: Future[Decision] = Future()
        try:
            answer.set_result(self.decide(request))
        except Exception as exc:
            answer.set_exception(exc)
        return answer


class ApprovalPolicy:
    """Calls that only read never get here. The rest ask the approver (if any) unless allowed for the session."""

    def __init__(self, approver: Approver | None = None, *, allow_all: bool = False, allow_local: bool = False) -> None:
        self.approver = approver
        self.allow_all = allow_all  # `ask --yes`: tools that change something
        self.allow_local = allow_local  # `ask --allow-local`: reading this machine and its network; --yes is not it
        self.always: set[str] = set()

    def decide(self, request: ApprovalRequest, cancel: CancelToken) -> ApprovalVerdict:
        """The verdict on `request`; Cancelled as soon as `cancel` is, with the question withdrawn."""
        allowed = self.allow_local if request.kind == "reach" else self.allow_all
        if allowed or request.tool in self.always:
            return ApprovalVerdict("allow_once")
        if self.approver is None:
            return ApprovalVerdict("deny", denied_by="no_one_to_ask")
        decision = cancel.wait_for(self.approver.ask(request))
        if decision == "allow_always":
            self.always.add(request.tool)
        verdict = ApprovalVerdict(decision)
        # Anything but an allow from the approver is the user's no.
        return verdict if verdict.allowed else ApprovalVerdict("deny", denied_by="user")
