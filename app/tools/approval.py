"""Who says yes to a tool call that needs approval: the user (TUI modal), a flag (`ask --yes`), or no one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Decision = Literal["allow_once", "allow_always", "deny"]


@dataclass(frozen=True)
class ApprovalRequest:
    call_id: str
    tool: str
    arguments: dict[str, Any]
    preview: str | None = None  # e.g. the diff a write_file call would make
    # "change": the tool changes something; "reach": a reading tool that would reach this machine or its
    # network (fetch_url to localhost, the LAN, cloud metadata).
    kind: Literal["change", "reach"] = "change"


Approver = Callable[[ApprovalRequest], Decision]


class ApprovalPolicy:
    """Calls that only read never get here. The rest ask `ask` (if any) unless allowed for the session."""

    def __init__(self, ask: Approver | None = None, *, allow_all: bool = False, allow_local: bool = False) -> None:
        self.ask = ask
        self.allow_all = allow_all  # `ask --yes`: tools that change something
        self.allow_local = allow_local  # `ask --allow-local`: reading this machine and its network; --yes is not it
        self.always: set[str] = set()

    def __call__(self, request: ApprovalRequest) -> Decision:
        allowed = self.allow_local if request.kind == "reach" else self.allow_all
        if allowed or request.tool in self.always:
            return "allow_once"
        if self.ask is None:
            return "deny"
        decision = self.ask(request)
        if decision == "allow_always":
            self.always.add(request.tool)
        return decision
