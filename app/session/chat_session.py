"""`ChatSession`: one conversation and everything it owns — its messages, its preset, its tools and MCP
servers, its approvals, and its usage. `moa-chat ask` and the TUI are thin drivers of one of these.

`send` runs a whole turn and blocks: the TUI calls it on a worker thread, `ask` on its own. Whatever
goes wrong inside a turn, `send` returns a TurnResult — a failed one, with a reason the user can read —
so a front end can never be left believing a turn still runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import Config, Preset
from ..engine import CancelToken, clock
from ..engine.calls import CallLLM
from ..engine.events import emit
from ..llm import call_llm, describe_error
from ..providers import preflight
from ..tools import ApprovalPolicy, Approver, McpHub, ToolRegistry, Workspace, tools_for
from .events import Notice, Observer
from .ledger import UsageLedger
from .turn import Turn, TurnResult


class ChatSession:
    def __init__(
        self,
        config: Config,
        preset: Preset,
        *,
        workspace: Workspace | None = None,
        ask: Approver | None = None,
        allow_all: bool = False,
        call: CallLLM = call_llm,
    ) -> None:
        self.config = config
        self.preset = preset
        self.messages: list[dict[str, Any]] = []
        self.ledger = UsageLedger()  # every call of every turn of this conversation
        self.workspace = workspace or Workspace(Path.cwd())
        self.approval = ApprovalPolicy(ask, allow_all=allow_all)
        self.mcp = McpHub(config.mcp_servers)
        self._mcp_started = threading.Event()
        if not config.mcp_servers:
            self._mcp_started.set()
        self._warned: set[str] = set()
        self._call = call

    # ------------------------------------------------------------------ presets

    def switch_preset(self, name: str) -> Preset:
        """The preset for the next turn (a running turn keeps the one it started with)."""
        self.preset = self.config.preset(name)
        return self.preset

    def preflight(self, preset: Preset | None = None) -> tuple[str | None, str | None]:
        """(error, warning) before a turn: a keyless aggregator is an error, keyless references a warning."""
        return preflight(self.config, preset or self.preset)

    # ------------------------------------------------------------------ tools

    def start_mcp(self, report: Callable[[str], None] | None = None) -> None:
        """Start the configured MCP servers (blocking; off the UI thread). Until then turns use the built-ins."""
        try:
            self.mcp.start(report=report)
        finally:
            self._mcp_started.set()

    def tools(self, preset: Preset) -> tuple[ToolRegistry, list[str]]:
        """The registry for a turn on `preset`, and warnings not shown before in this session."""
        registry, warnings = tools_for(
            self.config, preset, self.workspace, self.mcp if self._mcp_started.is_set() else None
        )
        fresh = [line for line in warnings if line not in self._warned]
        self._warned.update(fresh)
        return registry, fresh

    # ------------------------------------------------------------------ turns

    def send(self, text: str, *, observer: Observer | None = None, cancel: CancelToken | None = None) -> TurnResult:
        """Run one turn for the user's `text` on the current preset. Blocks; never raises."""
        started = clock.monotonic()
        preset = self.preset
        cancel = cancel or CancelToken()
        # The user's message joins the conversation before any request goes out.
        self.messages.append({"role": "user", "content": text})
        turn: Turn | None = None
        try:
            tools, warnings = self.tools(preset)
            for line in warnings:
                emit(observer, Notice(line, "warning"))
            turn = Turn(
                self.config,
                preset,
                observer=observer,
                cancel=cancel,
                tools=tools,
                approver=self.approval,
                call=self._call,
            )
            result = turn.run(list(self.messages))
        except Exception as exc:  # a bug must end the turn visibly, never leave it running
            result = TurnResult(
                status="failed",
                text="",
                error=f"moa-chat failed during the turn ({describe_error(exc)}); the conversation is kept, "
                "so you can send the prompt again",
                seconds=round(clock.monotonic() - started, 3),
                references=(),
                ledger=turn.ledger if turn is not None else UsageLedger(),
            )
        self.messages.extend(result.new_messages)
        self.ledger.extend(result.ledger.records)
        return result

    def new_conversation(self) -> None:
        """Forget the messages; the preset, tools and approvals given for this session stay."""
        self.messages.clear()

    def close(self) -> None:
        self.mcp.close()
