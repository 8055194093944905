"""Running the chat's turns: a prompt becomes a `TurnRequest`, the runner hands it to the session on a worker
thread, and what the session reports comes back through the bridge as messages the screen routes here.

The runner owns the turn's lifecycle, as one typed state (`TurnPhase`: idle, running, draining): dispatch (the
requests leave before the screen does its work for the turn), cancel (on a side thread), the notice of a local
model server starting, and the end of the turn (`end`, given the turn's one `TurnFinished`). The approval
handshake needs nothing of it: the session was built with the app's DialogApprover (tui/approver.py) and waits
on its answer with the turn's cancel token, so a cancel here withdraws an open question too.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from enum import Enum
from functools import partial

from textual.timer import Timer
from textual.widget import Widget

from ..engine import CancelToken, ReplyRestarted
from ..engine.events import CompactionEnded, CompactionStarted
from ..engine.panel import panel
from ..session import ChatSession, Notice, Observer, ServerStart, ToolCallEvent, TurnEvent, TurnResult
from ..session.reply_parts import ReplyEnding, panel_answers
from ..text.wording import plural
from .bridge import CoreEvent, ReplyText, TurnBridge, TurnFinished
from .widgets.chat_log import ChatLog, NoticeLine, UserMessage, Welcome
from .widgets.compaction_marker import CompactionMarker
from .widgets.reply import AssistantReply
from .widgets.sidebar import PanelEvent, ReferenceSidebar

# The longest the UI thread stands aside after Enter for the turn's requests to leave (TurnRunner.dispatch);
# they take a few milliseconds, more in a long conversation or while a local model starts.
DISPATCH_WAIT = 0.1


@dataclass(frozen=True)
class Send:
    """A new prompt (`solo`: to the aggregator alone, no references)."""

    text: str
    solo: bool = False


@dataclass(frozen=True)
class Edit:
    """The last prompt, edited: sent as a new version of the last exchange."""

    text: str


@dataclass(frozen=True)
class Rerun:
    """The last prompt again: the whole turn (re-ask), or the aggregator on the stored answers (regenerate)."""

    aggregator_only: bool


TurnRequest = Send | Edit | Rerun


def run_request(session: ChatSession, request: TurnRequest, observer: Observer, cancel: CancelToken) -> TurnResult:
    """The session call that `request` stands for. Blocks for the whole turn: a worker thread's."""
    match request:
        case Send(text, solo):
            return session.send(text, observer=observer, cancel=cancel, solo=solo)
        case Edit(text):
            return session.edit(text, observer=observer, cancel=cancel)
        case Rerun(aggregator_only):
            return session.rerun(aggregator_only=aggregator_only, observer=observer, cancel=cancel)


class TurnPhase(Enum):
    """Where the chat's turn is."""

    IDLE = "idle"  # no turn: the prompt takes the next one
    RUNNING = "running"  # the turn's thread runs, and what it reports is shown as it comes
    DRAINING = "draining"  # the thread is done, and the reply's text that outran the screen is still being shown


class TurnRunner:
    """The turns of one chat. `host` (the chat screen) receives the bridge's messages and hands them back here
    (`apply`, `append_text`, `end`); its workers and timers run the turn's thread and clocks. `phase` says
    where the turn is; the host reads it to show the prompt and the keys."""

    def __init__(self, session: ChatSession, host: Widget) -> None:
        self.session = session
        self._host = host
        self.phase = TurnPhase.IDLE
        self.reply: AssistantReply | None = None  # the running turn's, until its end
        self._cancel: CancelToken | None = None
        self._bridge: TurnBridge | None = None
        self._starting: Timer | None = None  # counts the seconds while a local model server starts

    async def show_prompt(
        self, request: Send | Edit, log: ChatLog, sidebar: ReferenceSidebar, *, error: str | None, warning: str | None
    ) -> None:
        """A prompt's turn, once its requests have left (or, with the preflight's `error`, there is no turn): the
        log shows the prompt (in place of the one edited), then the reply that will stream or the error."""
        editing = isinstance(request, Edit)
        if editing and (last := log.last_prompt()) is not None:
            await log.drop_after(last, inclusive=True)
        await log.query(Welcome).remove()
        await log.mount(UserMessage(request.text))
        log.scroll_end(animate=False)  # whatever was being read, the new exchange is what to follow
        if error:
            await log.mount(NoticeLine(error, "error"))
            return
        if warning:
            self._host.notify(warning, severity="warning", timeout=6)
        if isinstance(request, Send) and request.solo:
            await log.mount(NoticeLine("solo: the aggregator alone, no references (Ctrl+T)", "info"))
        await self.show_reply(log, sidebar)

    def dispatch(self, request: TurnRequest) -> None:
        """Run `request` on the turn's worker: the phase is running from here on. The caller shows it, then
        calls `stand_aside` before it does any work of its own for the turn. What the worker reports is held back
        until the reply is up (`show_reply`)."""
        preset = self.session.preset
        seats = len(panel(preset))
        self.reply = AssistantReply(preset.name, preset.aggregator.label, len(preset.references), seats=seats)
        self._cancel = cancel = CancelToken()
        self._bridge = bridge = TurnBridge(self._host.post_message, held=True)
        self.phase = TurnPhase.RUNNING
        self._host.run_worker(
            partial(self._run, request, cancel, bridge),
            name="turn",
            group="turn",
            exclusive=True,
            thread=True,
            exit_on_error=False,
        )

    async def stand_aside(self) -> None:
        """Keep the UI thread off the GIL until the dispatched turn's requests have left, DISPATCH_WAIT at most.
        Layout and paint hold the GIL for tens of milliseconds at a time while building and sending a request
        needs it at every step (bench/fanout.py measures the difference)."""
        assert self._bridge is not None, "a turn was dispatched"
        await asyncio.sleep(0)  # the worker's task hands the job to its thread
        self._bridge.wait_dispatched(DISPATCH_WAIT)

    def _run(self, request: TurnRequest, cancel: CancelToken, bridge: TurnBridge) -> None:
        """Runs on a worker thread: everything it learns reaches the UI as posted messages."""
        try:
            result = run_request(self.session, request, bridge, cancel)
        except Exception as exc:  # e.g. nothing stored to regenerate from: the turn ends, saying why
            result = TurnResult(status="failed", text="", error=str(exc), seconds=0.0, references=())
        bridge.post_after_text(TurnFinished(result))

    async def show_reply(self, log: ChatLog, sidebar: ReferenceSidebar) -> None:
        """Mount the reply that will stream, set the panel's cards going, and let the turn's events through."""
        assert self.reply is not None and self._bridge is not None, "a turn was dispatched"
        await log.mount(self.reply)
        log.scroll_end(animate=False)
        sidebar.start_turn()
        self._bridge.release()  # the turn's events, held back until now

    def cancel(self) -> None:
        """Stop the running turn (its partial reply stays); a draining one has the rest of its reply shown at
        once."""
        match self.phase:
            case TurnPhase.DRAINING if self.reply is not None:
                self.reply.hurry()
            case TurnPhase.RUNNING if self._cancel is not None:
                # Closing HTTP streams can block for a moment; never on the UI's thread.
                threading.Thread(target=self._cancel.cancel, name="cancel-turn", daemon=True).start()
                if self.reply is not None:
                    self.reply.set_status("cancelling…")

    def start_mcp(self) -> None:
        """MCP servers start off the UI thread; until they are up, turns use the built-in tools."""
        self._host.run_worker(self._start_mcp, name="mcp", group="mcp", thread=True, exit_on_error=False)

    def _start_mcp(self) -> None:
        def report(line: str) -> None:
            self._host.post_message(CoreEvent(Notice(line, "warning")))

        self.session.start_mcp(report=report)

    def close(self) -> None:
        """The chat is going: a running turn stops."""
        if self._cancel is not None:
            self._cancel.cancel()

    # ------------------------------------------------------------------ what the turn reports

    async def apply(self, message: CoreEvent, log: ChatLog, sidebar: ReferenceSidebar) -> None:
        """Route a core event to the widget it concerns."""
        event: TurnEvent = message.event
        reply = self.reply
        if isinstance(event, ServerStart):
            await self._server_start(event, log)
        elif isinstance(event, ToolCallEvent):
            if reply is not None:
                await reply.tool_event(event)
        elif isinstance(event, Notice):
            await log.mount(NoticeLine(event.text, event.level))
        elif isinstance(event, ReplyRestarted):
            if reply is not None:
                await reply.restart(event.reason)
        elif isinstance(event, CompactionStarted):
            if (waiting := self._waiting(reply)) is not None:
                waiting.set_status(f"summarising {plural(event.exchanges, 'earlier exchange')}…")
        elif isinstance(event, CompactionEnded):
            await self._compacted(event, log)
        elif isinstance(event, PanelEvent):
            sidebar.apply(event)
            if reply is not None:
                reply.panel_event(event)

    async def _compacted(self, event: CompactionEnded, log: ChatLog) -> None:
        """A compaction before this turn's requests: its marker goes above the turn's prompt (it stands for
        what came before); one that failed says why, the conversation as it was."""
        if (waiting := self._waiting(self.reply)) is not None:
            waiting.show_consulting()
        if event.error is not None:
            notice = NoticeLine(f"The conversation was not compacted: {event.error}. It is as it was.", "warning")
            await log.mount(notice, before=log.last_prompt())
            return
        await log.mount(CompactionMarker(event), before=log.last_prompt())

    async def append_text(self, message: ReplyText) -> None:
        text = message.text
        if text is None:  # coalesced: collect whatever this segment's epoch has buffered
            text = self._bridge.take(message.epoch, thinking=message.thinking) if self._bridge else ""
        if text and self.reply is not None:
            await (self.reply.think(text) if message.thinking else self.reply.append_text(text))

    async def _server_start(self, event: ServerStart, log: ChatLog) -> None:
        """A server moa-chat runs itself (the local model) starting before the turn's first call: the reply's
        header says so, with the seconds going by (a cold first load can take a while); once it answers, a
        line in the log above the reply says how long it took. A start that fails ends the turn, saying why."""
        reply = self.reply
        self._stop_ticking()
        if event.stage == "starting":
            began = time.monotonic()

            def tick() -> None:
                if (waiting := self._waiting(reply)) is not None:
                    waiting.set_status(f"{event.text} {time.monotonic() - began:.0f}s")

            if (waiting := self._waiting(reply)) is not None:
                waiting.set_status(event.text)
            self._starting = self._host.set_interval(1.0, tick)
            return
        if (waiting := self._waiting(reply)) is not None:
            waiting.show_consulting()
        if event.stage == "ready":
            above = reply if reply is not None and reply.parent is log else None
            await log.mount(NoticeLine(event.text, "info"), before=above)

    def _waiting(self, reply: AssistantReply | None) -> AssistantReply | None:
        """`reply` while it is the turn's, on screen and without text: its header may say what it waits for."""
        if reply is not None and reply is self.reply and reply.is_mounted and not reply.text:
            return reply
        return None

    def _stop_ticking(self) -> None:
        if self._starting is not None:
            self._starting.stop()
            self._starting = None

    # ------------------------------------------------------------------ the end of a turn

    async def end(self, message: TurnFinished, sidebar: ReferenceSidebar) -> AssistantReply | None:
        """The turn's thread is done: end the turn on screen, or first show the rest of its reply.

        A reply whose text outran the screen (more of it unshown than a batch holds) is drained: the rest goes on
        batch by batch, a frame painted after each, the phase is draining meanwhile, and `message` comes again,
        `shown`, once all of it is on screen. Otherwise the turn ends at once: the reply's last batch and its
        footer share a frame (painting the text first would hold the footer back a whole frame, to show the last
        few tokens a little sooner), and the phase is idle again. A cancelled turn's rest goes in one batch, with
        no frames waited for (the user asked to stop). Returns the turn's reply, now finished (None while it
        drains, or when the turn had none)."""
        reply, result = self.reply, message.result
        if self.phase is TurnPhase.RUNNING and reply is not None and result.status != "cancelled" and reply.behind:
            self.phase = TurnPhase.DRAINING
            reply.drain(partial(self._host.post_message, TurnFinished(result, shown=True)))
            return None
        self._stop_ticking()
        if reply is not None:
            ending = ReplyEnding.of_turn(result)
            await reply.finish(ending, text=result.text, panel=panel_answers(result.references))
            reply.show_version(*self.session.versions())
        # The card names its model already: show only the reason.
        reason = result.error.split(" failed: ", 1)[-1] if result.error else None
        sidebar.end_turn(result.status, reason, result.ledger)
        self.reply = self._cancel = self._bridge = None
        self.phase = TurnPhase.IDLE
        return reply
