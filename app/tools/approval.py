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


Approver = Callable[[ApprovalRequest], Decision]


class ApprovalPolicy:
    """Calls that only read never get here. The rest ask `ask` (if any) unless allowed for the session."""

    def __init__(self, ask: Approver | None = None, *, allow_all: bool = False) -> None:
        self.ask = ask
        self.allow_all = allow_all
        self.always: set[str] = set()

    def __call__(self, request: ApprovalRequest) -> Decision:
        if self.allow_all or request.tool in self.always:
            return "allow_once"
        if self.ask is None:
            return "deny"
        decision = self.ask(request)
        if decision == "allow_always":
            self.always.add(request.tool)
        return decision
