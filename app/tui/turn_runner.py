"""Running the chat's turns: a prompt becomes a `TurnRequest`, the runner hands it to the session on a worker
thread, and what the session reports comes back through the bridge as messages the screen routes here.

The runner owns the turn's lifecycle: dispatch (the requests leave before the screen does its work for the turn),
cancel (on a side thread), the notice of a local model server starting, and the end of the turn. The approval
handshake needs nothing of it: the session was built with the app's DialogApprover (tui/approver.py) and waits
on its answer with the turn's cancel token, so a cancel here withdraws an open question too.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from textual.timer import Timer
from textual.widget import Widget

from ..engine import CancelToken, ReplyRestarted
from ..engine.panel import panel
from ..llm.messages import Content
from ..session import ChatSession, Notice, Observer, ServerStart, ToolCallEvent, TurnEvent, TurnResult
from ..session.image_attachments import prompt_text
from .bridge import CoreEvent, ReplyText, TurnBridge, TurnDone
from .widgets.chat_log import ChatLog, NoticeLine, UserMessage, Welcome
from .widgets.reply import AssistantReply
from .widgets.sidebar import PanelEvent, ReferenceSidebar

# The longest the UI thread stands aside after Enter for the turn's requests to leave (TurnRunner.dispatch);
# they take a few milliseconds, more in a long conversation or while a local model starts.
DISPATCH_WAIT = 0.1


@dataclass(frozen=True)
class Send:
    """A new prompt (`solo`: to the aggregator alone, no references); its images, if any, as content parts."""

    text: Content
    solo: bool = False


@dataclass(frozen=True)
class Edit:
    """The last prompt, edited: sent as a new version of the last exchange."""

    text: Content


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


class TurnRunner:
    """The turns of one chat. `host` (the chat screen) receives the bridge's messages and hands them back here
    (`apply`, `append_text`, `holds_back`, `finish`); its workers and timers run the turn's thread and clocks.
    `busy` tells it a turn has begun (True); the host says when one has ended, once it is shown."""

    def __init__(self, session: ChatSession, host: Widget, busy: Callable[[bool], None]) -> None:
        self.session = session
        self._host = host
        self._busy = busy
        self.reply: AssistantReply | None = None  # the running turn's, until its end
        self._cancel: CancelToken | None = None
        self._bridge: TurnBridge | None = None
        self._starting: Timer | None = None  # counts the seconds while a local model server starts

    @property
    def running(self) -> bool:
        return self._cancel is not None

    @property
    def draining(self) -> bool:
        """Whether the turn is over and its reply's text is still being shown (AssistantReply.drain)."""
        return self.reply is not None and self.reply.draining

    async def start(self, request: Send | Edit, log: ChatLog, sidebar: ReferenceSidebar) -> None:
        """A prompt's turn: its requests leave first, before the screen does any of its work for the turn; then
        the log shows the prompt (in place of the one edited) and the reply that will stream."""
        error, warning = self.session.preflight(self.session.preset)
        if error is None:
            await self.dispatch(request)
        editing = isinstance(request, Edit)
        if editing and (last := log.last_prompt()) is not None:
            await log.drop_after(last, inclusive=True)
        await log.query(Welcome).remove()
        await log.mount(UserMessage(prompt_text(request.text)))
        log.scroll_end(animate=False)  # whatever was being read, the new exchange is what to follow
        if error:
            await log.mount(NoticeLine(error, "error"))
            return
        if warning:
            self._host.notify(warning, severity="warning", timeout=6)
        if isinstance(request, Send) and request.solo:
            await log.mount(NoticeLine("solo: the aggregator alone, no references (Ctrl+T)", "info"))
        await self.show_reply(log, sidebar)

    async def dispatch(self, request: TurnRequest) -> None:
        """Run `request` on the turn's worker, and keep the UI thread off the GIL until the turn's requests have
        left, DISPATCH_WAIT at most. Layout and paint hold the GIL for tens of milliseconds at a time while
        building and sending a request needs it at every step (bench/fanout.py measures the difference). What
        the worker reports meanwhile is held back until the reply is up (`show_reply`)."""
        preset = self.session.preset
        seats = len(panel(preset))
        self.reply = AssistantReply(preset.name, preset.aggregator.label, len(preset.references), seats=seats)
        self._cancel = cancel = CancelToken()
        self._bridge = bridge = TurnBridge(self._host.post_message, held=True)
        self._busy(True)
        self._host.run_worker(
            partial(self._run, request, cancel, bridge),
            name="turn",
            group="turn",
            exclusive=True,
            thread=True,
            exit_on_error=False,
        )
        await asyncio.sleep(0)  # the worker's task hands the job to its thread
        bridge.wait_dispatched(DISPATCH_WAIT)

    def _run(self, request: TurnRequest, cancel: CancelToken, bridge: TurnBridge) -> None:
        """Runs on a worker thread: everything it learns reaches the UI as posted messages."""
        try:
            result = run_request(self.session, request, bridge, cancel)
        except Exception as exc:  # e.g. nothing stored to regenerate from: the turn ends, saying why
            result = TurnResult(status="failed", text="", error=str(exc), seconds=0.0, references=())
        bridge.post_after_text(TurnDone(result))

    async def show_reply(self, log: ChatLog, sidebar: ReferenceSidebar) -> None:
        """Mount the reply that will stream, set the panel's cards going, and let the turn's events through."""
        assert self.reply is not None and self._bridge is not None, "a turn was dispatched"
        await log.mount(self.reply)
        log.scroll_end(animate=False)
        sidebar.start_turn()
        self._bridge.release()  # the turn's events, held back until now

    def cancel(self) -> None:
        """Stop the running turn (its partial reply stays); a turn that is over has the rest of its reply shown
        at once."""
        if self._cancel is None:
            return
        if self.reply is not None and self.reply.draining:
            self.reply.hurry()
            return
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
        elif isinstance(event, PanelEvent):
            sidebar.apply(event)
            if reply is not None:
                reply.panel_event(event)

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

    def holds_back(self, message: TurnDone) -> bool:
        """Whether the end of the turn waits for its reply to be shown: all the text is here, more of it unshown
        than a batch holds (a stream faster than the screen). The rest goes on batch by batch, a frame painted
        after each, and `message` comes again (`shown`) once it is on screen. Otherwise the turn ends at once:
        the text's last batch and the footer share a frame (painting the text first would hold the footer
        back a whole frame, to show the last few tokens a little sooner). A cancelled turn's rest goes in one batch,
        with no frames waited for (the user asked to stop): `finish` closes the reply."""
        reply, result = self.reply, message.result
        if reply is None or message.shown or result.status == "cancelled" or not reply.behind:
            return False
        reply.drain(partial(self._host.post_message, TurnDone(result, shown=True)))
        return True

    async def finish(self, result: TurnResult, sidebar: ReferenceSidebar) -> AssistantReply | None:
        """End the turn on screen with `result`; the turn's reply, now finished (None when it had none)."""
        self._stop_ticking()
        reply = self.reply
        if reply is not None:
            await reply.finish(result, tokens=result.usage.total_tokens)
            reply.show_version(*self.session.versions())
        # The card names its model already: show only the reason.
        reason = result.error.split(" failed: ", 1)[-1] if result.error else None
        sidebar.end_turn(result.status, reason, result.ledger)
        self.reply = self._cancel = self._bridge = None
        return reply
