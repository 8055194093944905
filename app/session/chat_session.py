"""`ChatSession`: one conversation and everything it owns — its messages, its preset, its tools and MCP
servers, its approvals, its usage, and (with a store) its place in the session database. `moa-chat ask`
and the TUI are thin drivers of one of these.

`send` runs a whole turn and blocks: the TUI calls it on a worker thread, `ask` on its own. Whatever
goes wrong inside a turn, `send` returns a TurnResult — a failed one, with a reason the user can read —
so a front end can never be left believing a turn still runs.
"""

from __future__ import annotations

import contextlib
import sqlite3
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
from ..store import SessionStore, StoreError
from ..tools import ApprovalPolicy, Approver, McpHub, ToolRegistry, Workspace, tools_for
from .events import Notice, Observer
from .history import Exchange, exchanges
from .ledger import UsageLedger
from .saving import TurnSaver, saved_messages
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
        store: SessionStore | None = None,
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
        self.store = store
        self.id: str | None = None  # the stored session, created with the first turn
        self.head_id: int | None = None  # the stored message the conversation continues from

    # ------------------------------------------------------------------ the stored conversation

    def open(self, session_id: str) -> None:
        """Continue a stored session (an id or a prefix of one): its messages become the context."""
        if self.store is None:
            raise StoreError("no session store")
        summary = self.store.session(session_id)
        self.store.mark_interrupted(summary.id)
        self.messages, self.head_id = saved_messages(self.store, summary.id)
        self.id = summary.id
        self.ledger = UsageLedger(c.record for t in self.store.turns(summary.id) for c in t.calls)
        if summary.preset in self.config.presets:
            self.preset = self.config.preset(summary.preset)

    def history(self) -> list[Exchange]:
        """The stored conversation as prompts and replies (empty for one not stored)."""
        if self.store is None or self.id is None:
            return []
        return exchanges(self.store, self.id)

    def remember_prompt(self, text: str) -> None:
        """Keep a prompt for ↑ history across restarts."""
        if self.store is not None:
            with contextlib.suppress(StoreError, sqlite3.Error):
                self.store.add_prompt(text)

    def prompt_history(self) -> list[str]:
        if self.store is None:
            return []
        try:
            return self.store.prompt_history()
        except (StoreError, sqlite3.Error):
            return []

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
        # The user's message joins the conversation (and the store) before any request goes out.
        self.messages.append({"role": "user", "content": text})
        saver = self._begin_saving(text, preset, observer)
        if saver is not None:
            observer = saver
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
        if saver is not None:
            self.head_id = saver.finish(result)
        return result

    def _begin_saving(self, text: str, preset: Preset, observer: Observer | None) -> TurnSaver | None:
        if self.store is None:
            return None
        try:
            if self.id is None:
                self.id = self.store.create_session(preset.name, title=text)
            saver = TurnSaver.begin(self.store, self.id, self.head_id, text, preset, kind="ask", observer=observer)
        except (StoreError, sqlite3.Error) as exc:
            emit(observer, Notice(f"This conversation is not being saved: {exc}", "warning"))
            return None
        self.head_id = saver.user_id
        return saver

    def new_conversation(self) -> None:
        """Start a new conversation; the old one stays in the store. The preset, tools and approvals given
        for this session stay."""
        self.messages = []
        self.ledger = UsageLedger()
        self.id = self.head_id = None

    def close(self) -> None:
        self.mcp.close()
