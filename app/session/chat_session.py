"""`ChatSession`: one conversation and everything it owns — its messages, its preset, its tools and MCP
servers, its approvals, its usage, and (with a store) its place in the session database. `moa-chat ask`
and the TUI are thin drivers of one of these.

`send` runs a whole turn and blocks: the TUI calls it on a worker thread, `ask` on its own. Whatever
goes wrong inside a turn, `send` returns a TurnResult — a failed one, with a reason the user can read —
so a front end can never be left believing a turn still runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from ..config import Config, Preset
from ..config.adhoc import add_reference, replace_aggregator, self_moa, with_preset
from ..config.pricing import format_cost
from ..engine import AnswerExtractor, Cancelled, CancelToken, ReferenceFinished, TurnEnv, TurnPlan, clock
from ..engine.cost import estimate_turn
from ..engine.env import Tracer
from ..engine.events import CompactionEnded, Notice, Observer, TurnEvent, emit
from ..engine.ledger import UsageLedger
from ..engine.privacy import model_filter
from ..llm import CallLLM, call_llm_request, describe_error
from ..llm.messages import Message, system, user
from ..providers import ServerStarter, preflight, start_server
from ..providers.lifecycle import StartAbandoned
from ..store import SessionStore, StoredMessage, StoreError
from ..store.health import StoreDamaged
from ..store.session_lock import WAIT, SessionLock, new_session_id
from ..store.traces import TraceWriter
from ..tools import ApprovalPolicy, Approver, McpHub, ToolRegistry, Workspace, tools_for
from ..tools.environment import tool_environment
from .chat_tools import ChatTools
from .compaction import CompactionFailed
from .context import ContextKeeper
from .display_scrub import DisplayScrub, privacy_scrub, scrubbed_event
from .history import Exchange, exchanges, for_models
from .saving import TurnSaver, saved_messages
from .tool_loop import CANCELLED, ToolLoop, TurnResult, TurnStatus

LOCK_POLL = 0.2  # seconds between looks at a session's lock another process holds


class ChatSession:
    def __init__(
        self,
        config: Config,
        preset: Preset,
        *,
        workspace: Workspace | None = None,
        approver: Approver | None = None,
        allow_all: bool = False,
        allow_local: bool = False,
        call: CallLLM = call_llm_request,
        servers: ServerStarter | None = start_server,
        store: SessionStore | None = None,
        system_prompt: str | None = None,
        restart_cut_reply: bool = False,
        answer_extractor: AnswerExtractor | None = None,
    ) -> None:
        """`call` sends each model request (the wire, unless a caller scripts the answers); `servers` starts
        the servers moa-chat runs itself before a turn's first call (None: start none, for calls that never
        reach a wire). `system_prompt`: for this session only (ask --system), over the preset's and the
        config's. `restart_cut_reply`: the front end can show a fresh reply after a cut-off one
        (ReplyRestarted), so the aggregator is asked once more when its reply is cut off after text arrived.
        `answer_extractor`: reads a reference's final answer (an eval task's checker), so `layers: auto` needs
        no judge."""
        self.config = config
        self.preset = preset
        self.system_prompt = system_prompt
        self.restart_cut_reply = restart_cut_reply
        self.answer_extractor = answer_extractor
        self.messages: list[Message] = []
        self.ledger = UsageLedger()  # every call of every turn of this conversation
        environment = tool_environment(config)
        self.workspace = workspace or Workspace(Path.cwd(), environment=environment)
        self.approval = ApprovalPolicy(approver, allow_all=allow_all, allow_local=allow_local)
        self.mcp = McpHub(config.mcp_servers, environment)
        self._mcp_started = threading.Event()
        if not config.mcp_servers:
            self._mcp_started.set()
        self._warned: set[str] = set()
        self._call = call
        self._servers = servers
        self.store = store
        self.id: str | None = None  # the stored session, created with the first turn
        self.head_id: int | None = None  # the stored message the conversation continues from
        # Each model's window, the conversation fitted to them, and its summary once compacted.
        self.context = ContextKeeper(store)

    # ------------------------------------------------------------------ the stored conversation

    def open(self, session_id: str) -> None:
        """Continue a stored session (an id or a prefix of one): its messages become the context."""
        if self.store is None:
            raise StoreError("no session store")
        summary = self.store.session(session_id)
        lock = SessionLock(self.store.file.parent, summary.id)
        if lock.try_acquire():  # else another process's turn runs on it now: that one is not interrupted
            try:
                self.store.mark_interrupted(summary.id)
            except StoreDamaged:  # read-only now: what it holds can still be read, and continued unsaved
                pass
            finally:
                lock.release()
        self.messages, self.head_id = saved_messages(self.store, summary.id)
        self.id = summary.id
        self.context.reload(summary.id, self.head_id)
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

    def use_model(self, spec: str, *, as_aggregator: bool) -> Preset:
        """Switch to this session's preset with `spec` (provider:model) as its aggregator, or as one more
        reference: a `custom` preset, for this session only (ConfigError for an unknown provider)."""
        preset = (replace_aggregator if as_aggregator else add_reference)(self.config, self.preset, spec)
        self.config = with_preset(self.config, preset)
        return self.switch_preset(preset.name)

    def use_self_moa(self, spec: str) -> Preset:
        """Switch to a Self-MoA on one model (`provider:model`) for this session: a `custom` preset. It takes
        its settings (workers, timeouts) from the bundled preset named after the provider when there is one
        (`ollama`, `local`: tuned for models on this machine), else from the current preset."""
        provider = spec.partition(":")[0]
        preset = self_moa(self.config, self.config.presets.get(provider, self.preset), spec)
        self.config = with_preset(self.config, preset)
        return self.switch_preset(preset.name)

    def _trace_writer(self, preset: Preset) -> TraceWriter | None:
        """Where this turn's calls are traced (save_traces), beside the session database; None unless the
        session is stored (an unsaved `ask` leaves nothing behind)."""
        if not self.config.traces_for(preset) or self.store is None or self.id is None:
            return None
        scrub = privacy_scrub(self.config, for_models=False)
        return TraceWriter(self.id, folder=self.store.file.parent, scrub=scrub)

    def over_budget(self, text: str, *, solo: bool = False) -> str | None:
        """Why sending `text` would exceed the preset's `max_cost_per_turn`, or None (no limit, or within)."""
        limit = self.preset.max_cost_per_turn
        if limit is None:
            return None
        messages = for_models([*self.messages, user(text)])
        estimate = estimate_turn(self.config, self.preset, messages, solo=solo)
        if estimate.dollars <= limit:
            return None
        left_out = f" (not counting {', '.join(estimate.unpriced)}: no price)" if estimate.unpriced else ""
        return (
            f"this turn may cost up to {format_cost(estimate.dollars)}{left_out}, more than the preset's "
            f"max_cost_per_turn of {format_cost(limit)}"
        )

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

    def send(
        self, text: str, *, observer: Observer | None = None, cancel: CancelToken | None = None, solo: bool = False
    ) -> TurnResult:
        """Run one turn for the user's `text` on the current preset (`solo`: its aggregator alone, no
        references). Blocks; never raises. Another process's turn on the same stored session is waited for,
        and what it added is then part of this turn's context."""

        def turn(new_id: str | None) -> TurnResult:
            self._follow_the_store(observer)
            self.messages.append(user(text))
            return self._turn("ask", observer, cancel, prompt=text, parent_id=self.head_id, solo=solo, new_id=new_id)

        return self._holding_the_session(observer, cancel, turn)

    def edit(self, text: str, *, observer: Observer | None = None, cancel: CancelToken | None = None) -> TurnResult:
        """Send `text` in place of the last prompt, as a new branch: the old prompt and its reply stay, as
        another version of this exchange."""

        def turn(_new_id: str | None) -> TurnResult:
            last = self._last_prompt()
            self.messages = [*self.messages[: self._last_user_index()], user(text)]
            return self._turn("edit", observer, cancel, prompt=text, parent_id=last.parent_id)

        return self._holding_the_session(observer, cancel, turn)

    def rerun(
        self, *, aggregator_only: bool, observer: Observer | None = None, cancel: CancelToken | None = None
    ) -> TurnResult:
        """Answer the last prompt again: the whole turn (re-ask, or retry after a failure), or only the
        aggregator on the stored reference answers (regenerate: no reference is asked again). The earlier
        reply stays, as another version."""
        last = self._last_prompt()
        references = None
        if aggregator_only:
            assert self.store is not None and self.id is not None
            asked = [t for t in self.store.turns(self.id) if t.user_message_id == last.id and t.references]
            if not asked:
                raise StoreError("this prompt has no stored reference answers to regenerate from; re-ask it instead")
            references = tuple(ReferenceFinished(c.record, c.text, c.reasoning) for c in asked[-1].references)

        def turn(_new_id: str | None) -> TurnResult:
            self.messages = self.messages[: self._last_user_index() + 1]
            kind = "regenerate" if aggregator_only else "reask"
            return self._turn(kind, observer, cancel, user_id=last.id, references=references)

        return self._holding_the_session(observer, cancel, turn)

    def _holding_the_session(
        self, observer: Observer | None, cancel: CancelToken | None, turn: Callable[[str | None], TurnResult]
    ) -> TurnResult:
        """`turn`, run holding the stored session's lock (store/session_lock.py), given the id a session not
        yet stored is to be stored under (locked before anyone can see it). A turn that cannot have the lock
        ends cancelled or failed, with nothing written."""
        if self.store is None:
            return turn(None)
        new_id = new_session_id() if self.id is None else None
        lock = SessionLock(self.store.file.parent, self.id or new_id or "")
        started = clock.monotonic()
        try:
            self._wait_for(lock, observer, cancel or CancelToken())
        except (Cancelled, StoreError, OSError) as exc:
            status: TurnStatus = "cancelled" if isinstance(exc, Cancelled) else "failed"
            error = CANCELLED if isinstance(exc, Cancelled) else f"not sent: {exc}"
            return TurnResult(status, "", error, round(clock.monotonic() - started, 3), ())
        try:
            return turn(new_id)
        finally:
            lock.release()

    def _wait_for(self, lock: SessionLock, observer: Observer | None, cancel: CancelToken) -> None:
        """Take `lock`, waiting while another process's turn holds it (saying so), up to WAIT seconds."""
        if lock.try_acquire():
            return
        holder = lock.holder()
        who = f" (process {holder})" if holder else ""
        emit(
            observer,
            Notice(
                f"another moa-chat turn on this session is running{who}: waiting for it to end, up to "
                f"{WAIT / 60:g} minutes, so that this turn sees its exchange",
                "warning",
            ),
        )
        deadline = clock.monotonic() + WAIT
        while not lock.try_acquire():
            left = deadline - clock.monotonic()
            if left <= 0:
                raise StoreError(
                    f"another moa-chat turn{who} has held session {self.id} for {WAIT / 60:g} minutes; try again "
                    "once it has ended"
                )
            cancel.sleep(min(LOCK_POLL, left))

    def versions(self) -> tuple[int, int]:
        """(which, how many) versions the last exchange has; (1, 1) when it has only one."""
        if self.store is None or self.id is None or not self._has_prompt():
            return 1, 1
        starts = self.store.alternatives(self.id, self._last_prompt().id)
        path = {m.id for m in self.store.path(self.id, self.head_id)}
        current = next((n for n, start in enumerate(starts) if start in path), len(starts) - 1)
        return current + 1, max(1, len(starts))

    def switch_version(self, step: int) -> tuple[int, int]:
        """Show another version of the last exchange (its newest continuation); returns versions()."""
        which, count = self.versions()
        target = which - 1 + step
        if self.store is None or self.id is None or not 0 <= target < count:
            return which, count
        starts = self.store.alternatives(self.id, self._last_prompt().id)
        self.store.set_head(self.id, self.store.latest_leaf(starts[target]))
        self.messages, self.head_id = saved_messages(self.store, self.id)
        self.context.reload(self.id, self.head_id)
        return self.versions()

    def _has_prompt(self) -> bool:
        return any(m["role"] == "user" for m in self.messages)

    def _last_user_index(self) -> int:
        return max(n for n, m in enumerate(self.messages) if m["role"] == "user")

    def _last_prompt(self) -> StoredMessage:
        if self.store is None or self.id is None:
            raise StoreError("editing and answering again need the session store (this conversation is not saved)")
        prompts = [m for m in self.store.path(self.id, self.head_id) if m.role == "user"]
        if not prompts:
            raise StoreError("there is no prompt to answer again yet")
        return prompts[-1]

    def _turn(
        self,
        kind: str,
        observer: Observer | None,
        cancel: CancelToken | None,
        *,
        prompt: str | None = None,
        parent_id: int | None = None,
        user_id: int | None = None,
        references: tuple[ReferenceFinished, ...] | None = None,
        solo: bool = False,
        new_id: str | None = None,
    ) -> TurnResult:
        started = clock.monotonic()
        preset = self.preset
        cancel = cancel or CancelToken()
        # The user's message joins the store before any request goes out.
        display = privacy_scrub(self.config, for_models=False)
        shown = DisplayScrub(observer, display) if observer is not None and display is not None else None
        if shown is not None:
            observer = shown  # the front end sees redacted text; the saver below keeps it as it was
        saver = self._begin_saving(
            kind, preset, observer, prompt=prompt, parent_id=parent_id, user_id=user_id, new_id=new_id
        )
        env = self._env(preset, cancel, saver if saver is not None else observer, saver.tracer if saver else None)
        plan = TurnPlan(
            preset,
            solo=solo,
            given=references,
            restart_cut_reply=self.restart_cut_reply,
            answer_extractor=self.answer_extractor,
        )
        try:
            registry, warnings = self.tools(preset)
            for line in warnings:
                env.emit(Notice(line, "warning"))
            unstarted = self._start_servers(preset, env, aggregator_only=solo or references is not None)
            if unstarted is not None:
                status, error = unstarted
                seconds = round(clock.monotonic() - started, 3)
                result = TurnResult(status=status, text="", error=error, seconds=seconds, references=())
            else:
                tools = ChatTools(registry, self.approval)
                stored = (self.id, self.head_id)
                self.context.compact_if_due(env, preset, self.messages, stored, tools=tools.offered(), solo=solo)
                loop = ToolLoop(env, plan, tools)
                result = loop.run(self._for_models(preset))
                if references is None:  # asked this turn, not a regeneration's stored answers
                    self.context.note_answers(env.budget, preset, result.references)
        except Exception as exc:  # a bug must end the turn visibly, never leave it running
            result = TurnResult(
                status="failed",
                text="",
                error=f"moa-chat failed during the turn ({describe_error(exc)}); the conversation is kept, "
                "so you can send the prompt again",
                seconds=round(clock.monotonic() - started, 3),
                references=(),
                ledger=env.ledger,
            )
        self.messages.extend(result.new_messages)
        self.ledger.extend(result.ledger.records)
        if saver is not None:
            head = saver.finish(result)
            if head is not None:  # a turn that could not be saved must not cut the stored conversation
                self.head_id = head
                self._catch_up()
        if shown is not None and display is not None:
            shown.flush()
            # What the front end shows of the result is redacted too; the conversation above kept it whole.
            result = dataclasses.replace(
                result,
                text=display(result.text),
                error=display(result.error) if result.error else result.error,
                references=tuple(scrubbed_event(r, display) for r in result.references),
            )
        return result

    def _env(
        self, preset: Preset, cancel: CancelToken, observer: Observer | None, tracer: Tracer | None = None
    ) -> TurnEnv:
        """A turn's environment on `preset`: the session's CallLLM, the models' windows, the privacy filter."""
        budget = self.context.budget(self.config, preset)
        filtered = model_filter(self.config)
        return TurnEnv(self.config, self._call, cancel, observer, tracer, filtered, budget=budget)

    def compact(self, cancel: CancelToken | None = None) -> CompactionEnded | None:
        """Compact the conversation now (the chat's "Compact now"): how it ended (its error says why it did
        not), or None when no exchange is left to summarise. Blocks: a worker thread's."""
        events: list[TurnEvent] = []
        env = self._env(self.preset, cancel or CancelToken(), events.append)
        with contextlib.suppress(CompactionFailed):  # its CompactionEnded says why
            if self._start_servers(self.preset, env, aggregator_only=True) is None:
                self.context.compact(env, self.preset, self.messages, (self.id, self.head_id))
        self.ledger.extend(env.ledger.records)
        return next((e for e in events if isinstance(e, CompactionEnded)), None)

    def _for_models(self, preset: Preset) -> list[Message]:
        """The conversation as the models are sent it, starting with the system prompt: the session's (ask
        --system), else the preset's, else the config's; sent first, never stored. A compacted conversation's
        summary stands in for the exchanges it summarises."""
        conversation = self.context.view(self.messages)
        prompt = self.system_prompt if self.system_prompt is not None else self.config.system_prompt_for(preset)
        if prompt and not (conversation and conversation[0]["role"] == "system"):
            conversation.insert(0, system(prompt))
        return conversation

    def _catch_up(self) -> None:
        """Read the conversation again when the stored one holds more than this session's: another process
        continued it at the same time, and the store placed both exchanges in order."""
        if self.store is None or self.id is None:
            return
        with contextlib.suppress(StoreError, sqlite3.Error):
            stored, head = saved_messages(self.store, self.id)
            if len(stored) != len(self.messages):
                self.messages, self.head_id = stored, head
                self.context.reload(self.id, head)

    def _follow_the_store(self, observer: Observer | None) -> None:
        """Before a turn: when another process continued this session (while this one waited for it), the
        conversation as stored now, what it added included; `observer` is told."""
        if self.store is None or self.id is None:
            return
        with contextlib.suppress(StoreError, sqlite3.Error):
            stored, head = saved_messages(self.store, self.id)
            if head is not None and head != self.head_id:
                self.messages, self.head_id = stored, head
                self.context.reload(self.id, head)
                message = "another moa-chat process continued this session meanwhile; this turn sees what it added"
                emit(observer, Notice(message))

    def _start_servers(self, preset: Preset, env: TurnEnv, *, aggregator_only: bool) -> tuple[TurnStatus, str] | None:
        """Start the servers moa-chat runs itself for this turn's models (the local model) before the first
        call, so the front end can show it happening: "Starting the local model…", then "ready". A server
        that cannot start ends the turn at once (status and reason), rather than failing every call in turn;
        a cancel stops the wait (the server goes on starting for the next turn)."""
        start = self._servers
        if start is None:
            return None
        slots = (preset.aggregator,) if aggregator_only else (*preset.references, preset.aggregator)
        for name in dict.fromkeys(slot.provider for slot in slots):
            try:
                start(name, self.config, report=env.emit, abandon=lambda: env.cancel.cancelled)
            except StartAbandoned:
                return "cancelled", CANCELLED
            except Exception as exc:
                return "failed", describe_error(exc)
        return None

    def _begin_saving(
        self,
        kind: str,
        preset: Preset,
        observer: Observer | None,
        *,
        prompt: str | None,
        parent_id: int | None,
        user_id: int | None,
        new_id: str | None = None,
    ) -> TurnSaver | None:
        if self.store is None:
            return None
        try:
            if self.id is None:
                self.id = self.store.create_session(preset.name, title=prompt or "", session_id=new_id)
            saver = TurnSaver.begin(
                self.store,
                self.id,
                preset,
                kind=kind,
                observer=observer,
                prompt=prompt,
                parent_id=parent_id,
                user_id=user_id,
                traces=self._trace_writer(preset),
            )
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
        self.context.forget()

    def begin_close(self) -> None:
        """Start stopping what this session runs (its MCP servers) without waiting; close() waits."""
        self.mcp.stop()

    def close(self) -> None:
        self.mcp.close()
