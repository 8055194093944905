"""The chat: one ChatSession shown as a log, a reference sidebar and a prompt.

The screen drives its session's turns on a worker thread and renders what the core reports: events
cross the thread boundary through the bridge, in order, and are applied to the widgets here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from textual import events, on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import ActiveBinding, Binding
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import OptionList

from ...config import ConfigError, Preset
from ...engine import (
    AggregatorFinished,
    AggregatorStarted,
    CallRetrying,
    CancelToken,
    ReferenceFinished,
    ReferenceProgress,
    ReferenceQueued,
    ReferenceStarted,
)
from ...providers import next_runnable
from ...session import ChatSession, Exchange, Notice, Observer, ServerStart, ToolCallEvent, TurnResult
from ...session.attachments import AttachmentError, attach, mentioned_files, read_attachment, split_attachments
from ...text.wording import plural
from ..approver import DialogApprover
from ..bridge import CoreEvent, ReplyText, TurnBridge, TurnDone
from ..keys import key_texts
from ..pacing import PromptlyPainted
from ..widgets.chat_log import ChatLog, NoticeLine, UserMessage, Welcome
from ..widgets.footer import KeyFooter
from ..widgets.header import StatusHeader
from ..widgets.path_completion import PathCompletion
from ..widgets.prompt_input import PromptInput
from ..widgets.reference_card import ReferenceCard
from ..widgets.reply import AssistantReply
from ..widgets.sidebar import ReferenceSidebar
from .confirm import ConfirmScreen
from .model_picker import ModelPicker
from .preset_picker import PresetPicker, SelfMoA
from .session_browser import SessionsScreen

if TYPE_CHECKING:
    from ..app import MoAChatApp

# What the footer shows, in this order, and when (`ChatScreen.footer_ids`): the keys a newcomer needs, and the
# ones for what can be done right now. Every key, these and the rest, is in the help (F1) and the palette.
FOOTER_ORDER = (
    "cancel_turn",  # while a turn runs, or an edit is open
    "help",
    "copy_reply",  # after a reply
    "edit_prompt",
    "regenerate",
    "previous_version",  # when the last exchange has more than one version
    "next_version",
    "preset_picker",
    "toggle_sidebar",  # on a narrow screen, where the sidebar starts hidden
    "sessions",  # when conversations are saved
    "new_conversation",
    "quit",
)
# When they do not all fit the width, the footer gives them up from the end of this list.
FOOTER_PRIORITY = (
    "cancel_turn",
    "help",
    "quit",
    "copy_reply",
    "toggle_sidebar",  # narrow screens only, and there it is the way to the panel's progress
    "preset_picker",
    "previous_version",  # shown just after a regenerate or an edit: what is wanted next
    "next_version",
    "edit_prompt",
    "regenerate",
    "new_conversation",
    "sessions",
)
VERSIONS = Binding.Group("Versions")
# The longest the UI thread stands aside after Enter for the turn's requests to leave (ChatScreen._dispatch);
# they take a few milliseconds, more in a long conversation or while a local model starts.
DISPATCH_WAIT = 0.1


class ChatScreen(PromptlyPainted[None]):
    # Below 90 columns the sidebar would squeeze the conversation: it hides, and F4 lays it over the log.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (90, "-wide")]
    # The prompt has focus in the first frame. Textual's default, the first focusable widget, put it on the
    # first reference card, and on_mount's focus() moved it a frame later: the card flashed (60 ms, in a pty).
    AUTO_FOCUS = "PromptInput"

    # The log's own children can take focus (a tool call, "earlier messages"): focus is never invisible.
    DEFAULT_CSS = """
    ChatScreen EarlierMessages:focus {
        background: $accent 20%;
    }
    """

    BINDINGS = [
        Binding("f2", "preset_picker", "Presets", id="preset_picker", tooltip="pick a preset"),
        Binding("f3", "next_preset", "Next preset", id="next_preset", tooltip="next preset"),
        # xterm, GNOME Terminal and tmux send Shift+F3 as CSI 1;2R, which keys.KeyParser reads as shift+f3 (Textual
        # alone took it for a cursor report); F15 is that sequence's name in Textual's table, kept as a fallback.
        Binding(
            "shift+f3,f15",
            "previous_preset",
            "Previous preset",
            id="previous_preset",
            show=False,
            tooltip="previous preset",
        ),
        Binding(
            "escape",
            "cancel_turn",
            "Cancel",
            id="cancel_turn",
            tooltip="cancel the running turn (the partial reply stays)",
        ),
        Binding("f4", "toggle_sidebar", "Sidebar", id="toggle_sidebar", tooltip="show or hide the reference sidebar"),
        # Priority: the prompt would take them to move its cursor; reading back matters more while typing.
        Binding(
            "pageup",
            "scroll_log(-1)",
            "Scroll up",
            id="scroll_log_up",
            show=False,
            priority=True,
            tooltip="scroll the conversation up (a streaming reply stops pulling the view down)",
        ),
        Binding(
            "pagedown",
            "scroll_log(1)",
            "Scroll down",
            id="scroll_log_down",
            show=False,
            priority=True,
            tooltip="scroll the conversation down (at the bottom it follows new text again)",
        ),
        # Not priority: in the prompt End is the end of the line; Ctrl+End works from anywhere.
        Binding(
            "ctrl+end,end",
            "scroll_bottom",
            "Bottom",
            id="scroll_bottom",
            show=False,
            tooltip="jump to the newest text and follow it (End too, outside the prompt)",
        ),
        Binding("f5", "copy_reply", "Copy", id="copy_reply", tooltip="copy the last reply"),
        # Priority: the prompt (a TextArea) uses F6 to select a line.
        Binding(
            "f6",
            "copy_code",
            "Copy code",
            id="copy_code",
            show=False,
            priority=True,
            tooltip="copy the last code block",
        ),
        Binding("ctrl+n", "new_conversation", "New chat", id="new_conversation", tooltip="new conversation"),
        Binding(
            "ctrl+r",
            "rerun(False)",
            "Re-ask",
            id="reask",
            show=False,
            tooltip="answer the last prompt again, references and all (retry after a failure)",
        ),
        Binding(
            "ctrl+g",
            "rerun(True)",
            "Regenerate",
            id="regenerate",
            tooltip="regenerate the last reply: the aggregator again, on the stored reference answers",
        ),
        # Not Ctrl+E: the prompt (a TextArea) uses it for the end of the line.
        Binding(
            "f8",
            "edit_prompt",
            "Edit",
            id="edit_prompt",
            tooltip="edit the last prompt; Enter sends it as a new version (the old one stays)",
        ),
        Binding(
            "f9",
            "version(-1)",
            "Previous version",
            id="previous_version",
            group=VERSIONS,
            tooltip="previous version of the last exchange",
        ),
        Binding(
            "f10",
            "version(1)",
            "Next version",
            id="next_version",
            group=VERSIONS,
            tooltip="next version of the last exchange",
        ),
        # Priority: the prompt (a TextArea) uses F7 to select all.
        Binding(
            "f7",
            "panel",
            "Panel answers",
            id="panel",
            show=False,
            priority=True,
            tooltip="what each reference answered for the last reply",
        ),
        Binding(
            "ctrl+b",
            "side_by_side",
            "Side by side",
            id="side_by_side",
            show=False,
            tooltip="the references' answers to the last reply, side by side",
        ),
        Binding(
            "ctrl+t",
            "send_solo",
            "Solo",
            id="send_solo",
            show=False,
            tooltip="send the prompt to the aggregator alone, no references (a quick question)",
        ),
        Binding(
            "ctrl+o",
            "sessions",
            "Sessions",
            id="sessions",
            tooltip="stored sessions: search, open, rename, delete",
        ),
    ]

    # No repaint: nothing the screen draws itself depends on it (a repaint was of the whole screen, 4 ms of the
    # finished reply's frame); the prompt and the footer follow it in `_show_busy`.
    turn_running: reactive[bool] = reactive(False, init=False, repaint=False)

    def __init__(self, session: ChatSession, *, notice: str | None = None) -> None:
        super().__init__()
        self.session = session
        self.notice = notice
        self._history = session.history()  # the stored conversation this screen opens with, until it is shown
        self._cancel: CancelToken | None = None
        self._bridge: TurnBridge | None = None
        self._reply: AssistantReply | None = None
        self._last_reply: AssistantReply | None = None
        self._sidebar_stale = False
        self._clear_after_turn = False
        self._editing = False  # the prompt box holds an edit of the last prompt
        self._solo_next = False  # Ctrl+T: the next prompt goes to the aggregator alone
        self._starting_timer: Timer | None = None  # counts the seconds while a local model server starts
        self._shown_before_end = False  # the turn that is ending drained its reply: all of it is on screen
        # The approval modal's quiet period runs on this clock: real time, or a test's.
        self.approval_clock: Callable[[], float] = time.monotonic
        session.approval.approver = DialogApprover(self.app, clock=lambda: self.approval_clock())

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        """The keys in force, in FOOTER_ORDER, those with an id shown in the footer only when `footer_ids` names
        them: Textual's Footer reads this, so what it shows follows the chat's state (refresh_bindings)."""
        active_bindings = super().active_bindings
        shown = self._fitting(self.footer_ids(), active_bindings)
        rank = {binding_id: position for position, binding_id in enumerate(FOOTER_ORDER)}
        bindings: dict[str, ActiveBinding] = {}
        for key, active in active_bindings.items():
            binding = active.binding
            if binding.id:
                show = binding.id in shown
                description = "Stop editing" if binding.id == "cancel_turn" and not self.turn_running else None
                if show != binding.show or description:
                    binding = dataclasses.replace(binding, show=show, description=description or binding.description)
                active = ActiveBinding(active.node, binding, active.enabled, active.tooltip)
            bindings[key] = active
        return dict(sorted(bindings.items(), key=lambda item: rank.get(item[1].binding.id or "", len(rank))))

    def footer_ids(self) -> set[str]:
        """The binding ids the footer shows now."""
        shown = {"help", "preset_picker", "new_conversation", "quit"}
        saved = self.session.store is not None
        if saved:
            shown.add("sessions")
        if self.has_class("-narrow"):
            shown.add("toggle_sidebar")
        if self.turn_running or self._editing:
            shown.add("cancel_turn")
        elif self._last_reply is not None:
            shown.add("copy_reply")
            if saved:
                shown.update({"edit_prompt", "regenerate"})
            if self._last_reply.version[1] > 1:  # (which, how many) of the last exchange
                shown.update({"previous_version", "next_version"})
        return shown

    def _fitting(self, shown: set[str], bindings: dict[str, ActiveBinding]) -> set[str]:
        """`shown` less its least needed keys (FOOTER_PRIORITY) until the footer fits the screen's width: past
        it, the last keys (Quit among them) were cut off at the edge. A group's keys go together."""
        widths: dict[str, int] = {}
        group_of: dict[str, Binding.Group] = {}
        for active in bindings.values():
            binding = active.binding
            if binding.id in shown and binding.id not in widths:
                # " key description ": a group's keys share one description (the versions' "f9 f10 Versions").
                label = binding.description
                if binding.group is not None:
                    label = "" if binding.group in group_of.values() else binding.group.description
                    group_of[binding.id] = binding.group
                widths[binding.id] = len(self.app.get_key_display(binding)) + len(label) + 3
        room = self.size.width - 12  # the palette's key keeps the right edge ("▏^p palette")
        kept = set(widths)
        for binding_id in reversed(FOOTER_PRIORITY):
            if sum(widths[i] for i in kept) <= room:
                break
            group = group_of.get(binding_id)
            kept -= {binding_id, *(i for i, g in group_of.items() if group is not None and g is group)}
        return kept

    def on_resize(self, event: events.Resize) -> None:
        # The breakpoint classes are set as the screen is laid out: read them once that is done.
        self.call_after_refresh(self.refresh_bindings)

    @property
    def preset(self) -> Preset:
        return self.session.preset

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield StatusHeader(self.preset, id="header")
        with Horizontal(id="body"):
            log = ChatLog(id="chat-log")
            # Not a Tab stop: focused, it showed nothing and swallowed what was typed. PgUp/PgDn and Ctrl+End
            # scroll it from anywhere; what can be done in it (a tool call, earlier messages) still takes focus.
            log.can_focus = False
            with log:
                if not self._history:
                    # Composed, not mounted on mount: the first frame is then the whole screen (mounted, the
                    # welcome and the notices came two frames after the rest, bench/startup.py).
                    yield Welcome.for_preset(self.preset, key_texts(self))
                    yield from self._opening_notices()
            yield ReferenceSidebar(self.preset, id="sidebar")
        yield PromptInput(id="prompt")
        yield KeyFooter()
        yield PathCompletion(id="path-completion")

    def _opening_notices(self) -> list[NoticeLine]:
        """Why the app started as it did (the preset it chose), and a preset's missing keys."""
        error, warning = self.session.preflight(self.preset)
        opening = [(self.notice, "info"), (error, "error"), (warning, "warning")]
        return [NoticeLine(text, level) for text, level in opening if text]

    def paints_promptly(self) -> bool:
        # While a turn runs, the timer paces the frames (tui/pacing.py says why); its end (a reply's last
        # batches, drawn back to back once the stream is over), and every key outside a turn, are painted at once.
        return not self.turn_running or self._draining

    def paints_uncapped(self) -> bool:
        # A drain waits for each batch's frame before the next batch (its work spaces the frames out); waiting
        # for the timer's tick as well added 13 ms a batch, and the log's scroll to its new end a second frame.
        return self._draining

    @property
    def _draining(self) -> bool:
        """Whether the turn is over and its reply's text is still being shown (AssistantReply.drain)."""
        return self._reply is not None and self._reply.draining

    async def on_mount(self) -> None:
        if self._history:
            await self._render_session(self._history)
            self.query_one(StatusHeader).show(ledger=self.session.ledger)
            await self.chat_log.mount_all(self._opening_notices())
        self._history = []  # the widgets have what they need; the log keeps no second copy
        prompt = self.query_one(PromptInput)
        prompt.prompt_history = self.session.prompt_history()
        prompt.focus()
        if self.session.config.mcp_servers:
            self._start_mcp()

    @work(thread=True, group="mcp", exit_on_error=False)
    def _start_mcp(self) -> None:
        """MCP servers start off the UI thread; until they are up, turns use the built-in tools."""

        def report(line: str) -> None:
            self.post_message(CoreEvent(Notice(line, "warning")))

        self.session.start_mcp(report=report)

    @property
    def sidebar(self) -> ReferenceSidebar:
        return self.query_one(ReferenceSidebar)

    @property
    def chat_log(self) -> ChatLog:
        return self.query_one(ChatLog)

    def watch_turn_running(self, running: bool) -> None:
        if running or self._shown_before_end:
            # A drained reply was on screen before its turn ended (on_turn_done): nothing of it waits for this.
            self._show_busy(running)
        else:
            # The finished reply's frame first: restyling the prompt and the footer's keys took 30-60 ms of it
            # on a slow machine (bench/fanout.py), and they can follow a frame later.
            self.call_after_refresh(self._show_busy, False)

    def _show_busy(self, running: bool) -> None:
        if running == self.turn_running:  # not a stale call from a turn that has already ended, or begun
            self.query_one(PromptInput).set_class(running, "-busy")
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_turn":
            return self.turn_running or self._editing
        if action in ("copy_reply", "copy_code"):
            return True if self._last_reply is not None else None
        return True

    # ------------------------------------------------------------------ answering again, editing, versions

    def _can_rewrite(self) -> bool:
        if self.turn_running:
            self.notify("A turn is running — wait for it, or press Esc to cancel it.", severity="warning")
            return False
        if self.session.store is None or not self.chat_log.query(UserMessage):
            self.notify("There is no saved prompt to answer again yet.", severity="warning")
            return False
        return True

    async def action_rerun(self, aggregator_only: bool) -> None:
        """Re-ask (the whole turn) or regenerate (the aggregator on the stored answers) the last prompt; the
        reply shown so far stays in the store as another version."""
        if not self._can_rewrite():
            return
        error, _warning = self.session.preflight(self.preset)
        if error:
            self.notify(error, severity="error", timeout=8)
            return
        await self._dispatch(
            lambda observer, cancel: self.session.rerun(
                aggregator_only=aggregator_only, observer=observer, cancel=cancel
            )
        )
        await self._drop_after(self.chat_log.query(UserMessage).last())
        await self._show_reply()

    def action_edit_prompt(self) -> None:
        if not self._can_rewrite():
            return
        prompt = self.query_one(PromptInput)
        # What was typed: its `@path` mentions attach the files again when it is sent.
        prompt.load_text(split_attachments(self.chat_log.query(UserMessage).last().text)[0])
        prompt.move_cursor(prompt.document.end)
        prompt.focus()
        self._editing = True
        self.notify("Editing the last prompt: Enter sends it as a new version (the old one stays); Esc stops.")
        self.refresh_bindings()

    async def _drop_after(self, widget: Widget, *, inclusive: bool = False) -> None:
        """Take the log's widgets after `widget` (and it, if inclusive) off the screen; the store keeps them."""
        children = list(self.chat_log.children)
        position = children.index(widget) + (0 if inclusive else 1)
        await self.chat_log.remove_children(children[position:])

    async def action_version(self, step: int) -> None:
        if self.turn_running or self.session.store is None:
            return
        before = self.session.versions()
        after = self.session.switch_version(step)
        if after == before:
            which, count = after
            self.notify(f"Version {which} of {count}: there is no other that way.", severity="information")
            return
        await self._render_session()
        self.notify(f"Version {after[0]} of {after[1]}.")

    def action_panel(self) -> None:
        if self._last_reply is None:
            self.notify("No reply yet.", severity="warning")
            return
        from .panel import PanelAnswers  # imported when first needed: see DEFERRED in tui/app.py

        self.app.push_screen(PanelAnswers(self._last_reply.panel, self._last_reply.aggregator))

    def on_assistant_reply_panel_requested(self, event: AssistantReply.PanelRequested) -> None:
        from .panel import PanelAnswers

        self.app.push_screen(PanelAnswers(event.reply.panel, event.reply.aggregator))

    def action_sessions(self) -> None:
        store = self.session.store
        if store is None:
            self.notify(
                "Conversations are not being saved in this run, so there is nothing to open.", severity="warning"
            )
            return

        def chosen(session_id: str | None) -> None:
            if session_id and session_id != self.session.id:
                self.call_later(self.open_session, session_id)

        self.app.push_screen(SessionsScreen(store, current=self.session.id), chosen)

    async def open_session(self, session_id: str) -> None:
        """Continue a stored session here: its history replaces the log, its preset becomes current."""
        if self.turn_running:
            self.notify("A turn is running — wait for it, or press Esc, then open the session.", severity="warning")
            return
        self.session.open(session_id)
        await self._render_session()
        self.query_one(StatusHeader).show(self.preset, ledger=self.session.ledger)
        await self.sidebar.show_preset(self.preset)
        self.refresh_bindings()
        self.query_one(PromptInput).focus()

    async def _render_session(self, history: list[Exchange] | None = None) -> None:
        """Show the stored conversation as it now stands (after opening it, or switching a version)."""
        self._editing = False
        self._last_reply = await self.chat_log.show_history(history or self.session.history())
        if self._last_reply is not None:
            self._last_reply.show_version(*self.session.versions())
        self.refresh_bindings()

    # ------------------------------------------------------------------ a turn

    async def on_prompt_input_submitted(self, event: PromptInput.Submitted) -> None:
        if self.turn_running:
            self.notify("A turn is running — wait for it, or press Esc to cancel it.", severity="warning")
            return
        try:
            # `@path` naming a file in the working folder attaches its text (shown as a chip in the log).
            files = [read_attachment(path, base=Path.cwd()) for path in mentioned_files(event.text, Path.cwd())]
            content = attach(event.text, files) if files else event.text
        except AttachmentError as exc:
            self.notify(str(exc), title="Not sent", severity="error")  # the prompt stays in the box
            return
        solo, self._solo_next = self._solo_next, False
        typed = event.text

        async def send(confirmed: bool | None = True) -> None:
            if not confirmed:
                return  # a "no" leaves the prompt in the box
            self.query_one(PromptInput).accept(typed)
            self.session.remember_prompt(typed)
            await self.start_turn(content, solo=solo)

        over = self.session.over_budget(content, solo=solo)
        if over:
            # Above the preset's max_cost_per_turn: the user decides.
            question = f"{over[0].upper()}{over[1:]}. Send it anyway?"
            self.app.push_screen(ConfirmScreen("Over the cost limit", question), send)
            return
        await send()

    def action_side_by_side(self) -> None:
        if self._last_reply is None:
            self.notify("No reply yet: the references' answers show here after a turn.", severity="warning")
            return
        from .side_by_side import SideBySide

        self.app.push_screen(SideBySide(self._last_reply.panel, self._last_reply.aggregator))

    def action_trace(self) -> None:
        from .trace import TraceScreen

        session = self.session
        self.app.push_screen(TraceScreen(session.store, session.id, traces_on=session.config.traces_for(self.preset)))

    def action_send_solo(self) -> None:
        """Ctrl+T: send what is in the prompt to the aggregator alone."""
        self._solo_next = True
        self.query_one(PromptInput).submit()

    async def start_turn(self, text: str, *, solo: bool = False) -> None:
        log = self.chat_log
        editing, self._editing = self._editing, False
        error, warning = self.session.preflight(self.preset)
        if error is None:
            # The turn's requests leave first, before the screen does any of its work for the turn.
            if editing:
                await self._dispatch(lambda observer, cancel: self.session.edit(text, observer=observer, cancel=cancel))
            else:
                await self._dispatch(
                    lambda observer, cancel: self.session.send(text, observer=observer, cancel=cancel, solo=solo)
                )
        if editing and log.query(UserMessage):
            await self._drop_after(log.query(UserMessage).last(), inclusive=True)
        await log.query(Welcome).remove()
        await log.mount(UserMessage(text))
        log.scroll_end(animate=False)  # whatever was being read, the new exchange is what to follow
        if error:
            await log.mount(NoticeLine(error, "error"))
            return
        if warning:
            self.notify(warning, severity="warning", timeout=6)
        if solo and not editing:
            await log.mount(NoticeLine("solo: the aggregator alone, no references (Ctrl+T)", "info"))
        await self._show_reply()

    async def _dispatch(self, job: Callable[[Observer, CancelToken], TurnResult]) -> None:
        """Run `job` (a ChatSession call) on the turn's worker, and keep the UI thread off the GIL until the
        turn's requests have left, DISPATCH_WAIT at most. Layout and paint hold the GIL for tens of milliseconds
        at a time while building and sending a request needs it at every step: the references' requests left
        over 40-100 ms while the screen showed the prompt (bench/fanout.py), and now within a few. What the
        worker reports meanwhile is held back until the reply is up (_show_reply)."""
        preset = self.preset
        self._reply = AssistantReply(preset.name, preset.aggregator.label, len(preset.references))
        self._cancel = CancelToken()
        self._bridge = TurnBridge(self.post_message, held=True)
        self.turn_running = True
        self._run_turn(job, self._cancel, self._bridge)
        await asyncio.sleep(0)  # the worker's task hands the job to its thread
        self._bridge.wait_dispatched(DISPATCH_WAIT)

    async def _show_reply(self) -> None:
        """Mount the reply that will stream, and set the panel's cards going."""
        assert self._reply is not None and self._bridge is not None, "a turn was dispatched"
        await self.chat_log.mount(self._reply)
        self.chat_log.scroll_end(animate=False)
        self.sidebar.start_turn()
        self._bridge.release()  # the turn's events, held back until now

    @work(thread=True, exclusive=True, group="turn", exit_on_error=False)
    def _run_turn(
        self, job: Callable[[Observer, CancelToken], TurnResult], cancel: CancelToken, bridge: TurnBridge
    ) -> None:
        """Runs on a worker thread: everything it learns reaches the UI as posted messages."""
        try:
            result = job(bridge, cancel)
        except Exception as exc:  # e.g. nothing stored to regenerate from: the turn ends, saying why
            result = TurnResult(status="failed", text="", error=str(exc), seconds=0.0, references=())
        bridge.post_after_text(TurnDone(result))

    async def on_core_event(self, message: CoreEvent) -> None:
        event = message.event
        reply = self._reply
        if isinstance(event, ReferenceQueued | ReferenceStarted | ReferenceProgress | ReferenceFinished):
            card = self.sidebar.card(event.index)
            if card is not None:
                card.apply(event)
            if isinstance(event, ReferenceFinished) and reply is not None and not reply.text:
                cards = self.sidebar.cards()
                done = sum(c.status not in ("queued", "running") for c in cards)
                reply.set_status(f"consulting {plural(len(cards), 'reference')}… {done}/{len(cards)} finished")
        elif isinstance(event, AggregatorStarted | AggregatorFinished):
            self.sidebar.aggregator_card.apply(event)
            if isinstance(event, AggregatorStarted) and reply is not None and not reply.text:
                reply.set_status(
                    f"{event.label} is writing… ({event.references_ok}/{event.references_total} "
                    f"reference{'s' if event.references_total != 1 else ''} answered)"
                )
        elif isinstance(event, CallRetrying):
            card = self.sidebar.aggregator_card if event.role == "aggregator" else self.sidebar.card(event.index)
            if card is not None:
                card.apply(event)
            if event.role == "aggregator" and reply is not None and not reply.text:
                reply.set_status(
                    f"{event.label}: {event.reason} — retrying in {event.delay:.1f}s "
                    f"(attempt {event.attempt} of {event.attempts})"
                )
        elif isinstance(event, ServerStart):
            await self._server_start(event)
        elif isinstance(event, ToolCallEvent) and reply is not None:
            await reply.tool_event(event)
        elif isinstance(event, Notice):
            await self.chat_log.mount(NoticeLine(event.text, event.level))

    async def _server_start(self, event: ServerStart) -> None:
        """A server moa-chat runs itself (the local model) starting before the turn's first call: the reply's
        header says so, with the seconds going by (a cold first load can take a while); once it answers, a
        line in the log above the reply says how long it took. A start that fails ends the turn, saying why."""
        reply = self._reply
        if self._starting_timer is not None:
            self._starting_timer.stop()
            self._starting_timer = None
        if event.stage == "starting":
            began = time.monotonic()

            def tick() -> None:
                if (waiting := self._waiting(reply)) is not None:
                    waiting.set_status(f"{event.text} {time.monotonic() - began:.0f}s")

            if (waiting := self._waiting(reply)) is not None:
                waiting.set_status(event.text)
            self._starting_timer = self.set_interval(1.0, tick)
            return
        if (waiting := self._waiting(reply)) is not None:
            waiting.set_status(f"consulting {plural(waiting.references, 'reference')}…")
        if event.stage == "ready":
            above = reply if reply is not None and reply.parent is self.chat_log else None
            await self.chat_log.mount(NoticeLine(event.text, "info"), before=above)

    def _waiting(self, reply: AssistantReply | None) -> AssistantReply | None:
        """`reply` while it is the turn's, on screen and without text: its header may say what it waits for."""
        if reply is not None and reply is self._reply and reply.is_mounted and not reply.text:
            return reply
        return None

    async def on_reply_text(self, message: ReplyText) -> None:
        text = message.text
        if text is None:  # coalesced: collect whatever this segment's epoch has buffered
            text = self._bridge.take(message.epoch) if self._bridge else ""
        if text and self._reply is not None:
            await self._reply.append_text(text)

    async def on_turn_done(self, message: TurnDone) -> None:
        result: TurnResult = message.result
        reply = self._reply
        if reply is not None and not message.shown and result.status != "cancelled" and reply.behind:
            # All the text is here, more of it unshown than a batch holds (a stream faster than the screen): the
            # rest goes on batch by batch, a frame painted after each (this handler returns, so the screen
            # paints), and the turn ends once it is on screen. Otherwise the turn ends at once: the text's last
            # batch and the footer share a frame (painting the text first held the footer back a whole frame,
            # 50-70 ms in bench/fanout.py, to show the last few tokens 25 ms sooner). A cancelled turn's rest goes
            # in one batch, with no frames waited for (the user asked to stop): finish() closes the reply.
            reply.drain(lambda: self.post_message(TurnDone(result, shown=True)))
            return
        if self._starting_timer is not None:
            self._starting_timer.stop()
            self._starting_timer = None
        if reply is not None:
            await reply.finish(result, tokens=result.usage.total_tokens)
            reply.show_version(*self.session.versions())
            self._last_reply = reply
        # The card names its model already: show only the reason.
        reason = result.error.split(" failed: ", 1)[-1] if result.error else None
        self.sidebar.end_turn(result.status, reason, result.ledger)
        self.query_one(StatusHeader).show(ledger=self.session.ledger)
        self._reply = self._cancel = self._bridge = None
        self._shown_before_end = message.shown
        self.turn_running = False
        self._shown_before_end = False
        self.paint_next_at_once()  # the finished reply: not held to the stream's frame pace
        if self._sidebar_stale:
            self._sidebar_stale = False
            await self.sidebar.show_preset(self.preset)
        if self._clear_after_turn:
            self._clear_after_turn = False
            await self._clear()

    def action_cancel_turn(self) -> None:
        if self._cancel is None:  # no turn running: Esc stops an edit
            if self._editing:
                self._editing = False
                self.query_one(PromptInput).load_text("")
                self.notify("Edit dropped.")
                self.refresh_bindings()
            return
        if self._reply is not None and self._draining:
            self._reply.hurry()  # the turn is over, its reply still being shown: the rest at once
            return
        # Closing HTTP streams can block for a moment; never on the UI's thread.
        threading.Thread(target=self._cancel.cancel, name="cancel-turn", daemon=True).start()
        if self._reply is not None:
            self._reply.set_status("cancelling…")

    def on_unmount(self) -> None:
        if self._cancel is not None:
            self._cancel.cancel()
        self.session.close()

    # ------------------------------------------------------------------ presets

    def switch_preset(self, name: str) -> None:
        self._show_switched(self.session.switch_preset(name))

    def _show_switched(self, preset: Preset) -> None:
        self.query_one(StatusHeader).show(preset)
        when = " from the next turn" if self.turn_running else ""
        refs = len(preset.references)
        self.notify(
            f"{preset.name}: {plural(refs, 'reference')} → {preset.aggregator.label}{when}",
            title="Preset switched",
        )
        if self.turn_running:
            self._sidebar_stale = True
        else:
            self.call_later(self.sidebar.show_preset, preset)
        self.call_later(self._announce_preflight, preset)

    def _announce_preflight(self, preset: Preset) -> None:
        error, warning = self.session.preflight(preset)
        for text, level in ((error, "error"), (warning, "warning")):
            if text:
                self.notify(text, severity="error" if level == "error" else "warning", timeout=8)

    def _cycle_preset(self, step: int) -> None:
        # Only presets that can run: stepping onto one whose key is missing would just fail the next prompt.
        preset = next_runnable(self.session.config, self.preset.name, step)
        if preset is None:
            self.notify(
                "No other preset can run with the keys set here; F2 lists what each one needs.",
                title="Preset not switched",
                severity="warning",
            )
            return
        self.switch_preset(preset.name)

    def action_next_preset(self) -> None:
        self._cycle_preset(+1)

    def action_previous_preset(self) -> None:
        self._cycle_preset(-1)

    def choose_model(self, provider: str, *, as_aggregator: bool) -> None:
        """List `provider`'s models; the one chosen becomes the aggregator, or joins the references."""

        def chosen(spec: str | None) -> None:
            if not spec:
                return
            try:
                preset = self.session.use_model(spec, as_aggregator=as_aggregator)
            except ConfigError as exc:
                self.notify(str(exc), title="Model not used", severity="error")
                return
            self._show_switched(preset)

        self.app.push_screen(ModelPicker(self.session.config, provider, as_aggregator=as_aggregator), chosen)

    def use_self_moa(self, spec: str) -> None:
        """A Self-MoA on one model (`provider:model`, e.g. one of Ollama's) for this session."""
        try:
            preset = self.session.use_self_moa(spec)
        except ConfigError as exc:
            self.notify(str(exc), title="Model not used", severity="error")
            return
        self._show_switched(preset)

    def action_preset_picker(self) -> None:
        def chosen(choice: str | SelfMoA | None) -> None:
            if isinstance(choice, SelfMoA):
                self.use_self_moa(choice.spec)
            elif choice and choice != self.preset.name:
                self.switch_preset(choice)

        ollama = cast("MoAChatApp", self.app).ollama_models
        self.app.push_screen(PresetPicker(self.session.config, self.preset.name, ollama=ollama), chosen)

    # ------------------------------------------------------------------ the rest

    def on_reference_card_selected(self, event: ReferenceCard.Selected) -> None:
        # Closed, it hands the keys back to the prompt: left on the card, what is typed next went nowhere.
        from .reference_detail import ReferenceDetail

        self.app.push_screen(ReferenceDetail(event.card), lambda _: self.focus_prompt())

    def focus_prompt(self) -> None:
        self.set_focus(self.query_one(PromptInput))  # now, not after a refresh as Widget.focus: the next key lands here

    def steer_typing(self, event: events.Key) -> None:
        """A printable key typed while the focus is elsewhere on the chat (a card, a tool call, nowhere) goes to
        the prompt, unless something focused takes it (a binding, or a widget that reads text)."""
        if not event.is_printable or not event.character:
            return
        focused = self.focused
        if isinstance(focused, PromptInput):
            return
        if focused is not None and focused.check_consume_key(event.key, event.character):
            return
        if any(key in self.active_bindings for key in event.aliases):
            return
        self.focus_prompt()

    @on(OptionList.OptionSelected, "#path-completion")
    def _on_path_chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.query_one(PromptInput).take_completion(event.option_index)

    def action_toggle_sidebar(self) -> None:
        self.sidebar.toggle()

    def action_scroll_log(self, direction: int) -> None:
        # Scrolling up releases the log's anchor, so a streaming reply stops pulling the view down. Textual
        # releases it on any scroll, even a page down at the very bottom, which moved nothing and left the next
        # reply growing out of view: a page that reaches the end anchors it again instead.
        log = self.chat_log
        if direction < 0:
            log.scroll_page_up(animate=False)
        elif log.scroll_y + log.scrollable_content_region.height >= log.max_scroll_y:
            self.action_scroll_bottom()
        else:
            log.scroll_page_down(animate=False)

    def action_scroll_bottom(self) -> None:
        self.chat_log.scroll_end(animate=False)  # and follows new text again (the anchor holds)

    def action_copy_reply(self) -> None:
        if self._last_reply is None or not self._last_reply.text:
            self.notify("No reply to copy yet.", severity="warning")
            return
        text = self._last_reply.text
        cast("MoAChatApp", self.app).copy_text(text, f"the last reply ({len(text):,} characters)")

    def action_copy_code(self) -> None:
        code = self._last_reply.last_code_block() if self._last_reply else None
        if code is None:
            self.notify("The last reply has no code block.", severity="warning")
            return
        lines = code.count("\n") + (not code.endswith("\n"))
        cast("MoAChatApp", self.app).copy_text(code, f"the last code block ({plural(lines, 'line')})")

    async def action_new_conversation(self) -> None:
        if self.turn_running:
            self._clear_after_turn = True
            self.action_cancel_turn()
            return
        await self._clear()

    async def _clear(self) -> None:
        saved = self.session.id is not None
        self.session.new_conversation()
        self._last_reply = None
        self.chat_log.forget_history()
        log = self.chat_log
        await log.remove_children()
        await log.mount(Welcome.for_preset(self.preset, key_texts(self)))
        await self.sidebar.show_preset(self.preset)
        self.query_one(StatusHeader).show(ledger=self.session.ledger)  # tokens and cost start again at 0
        self.refresh_bindings()
        self.notify("New conversation." + (" The last one is saved." if saved else ""))

    def system_commands(self) -> Iterable[SystemCommand]:
        """The chat's entries in the command palette, each naming the key that does the same."""
        keys = key_texts(self)

        def key(binding_id: str) -> str:
            return f" ({keys[binding_id]})" if binding_id in keys else ""

        yield SystemCommand(
            "Pick preset", f"Choose the MoA preset for the next turn{key('preset_picker')}", self.action_preset_picker
        )
        yield SystemCommand("Next preset", f"Switch to the next preset{key('next_preset')}", self.action_next_preset)
        yield SystemCommand(
            "Previous preset", f"Switch to the previous preset{key('previous_preset')}", self.action_previous_preset
        )
        if self.turn_running:
            yield SystemCommand(
                "Cancel turn",
                f"Stop the running turn; the partial reply stays{key('cancel_turn')}",
                self.action_cancel_turn,
            )
        yield SystemCommand(
            "Trace of the last turn",
            "Every call of the last turn: request, answer, usage, cost (needs save_traces: true)",
            self.action_trace,
        )
        yield SystemCommand(
            "Side by side",
            f"The references' answers to the last reply, side by side{key('side_by_side')}",
            self.action_side_by_side,
        )
        yield SystemCommand(
            "Toggle sidebar", f"Show or hide the reference sidebar{key('toggle_sidebar')}", self.action_toggle_sidebar
        )
        if self._last_reply is not None:
            yield SystemCommand(
                "Copy reply", f"Copy the last reply to the clipboard{key('copy_reply')}", self.action_copy_reply
            )
            yield SystemCommand(
                "Copy code block",
                f"Copy the last code block of the last reply{key('copy_code')}",
                self.action_copy_code,
            )
        if self.session.store is not None:
            yield SystemCommand(
                "Sessions", f"Search, open, rename or delete stored sessions{key('sessions')}", self.action_sessions
            )
        yield SystemCommand(
            "New conversation",
            f"Clear the conversation and start again{key('new_conversation')}",
            self.action_new_conversation,
        )
