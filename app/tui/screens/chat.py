"""The chat: one ChatSession shown as a log, a reference sidebar and a prompt.

The screen lays the chat out and routes: a prompt becomes a TurnRequest for its TurnRunner (turn_runner.py),
which runs it on a worker thread; what the turn reports crosses back through the bridge, in order, and the
runner hands each event to the widget it concerns. The keys and the footer's choice of them are bindings.py's;
the ways to change the preset are preset_choices.py's; Tab's order is tab_order.py's (the screen's base); what
the screen needs of the app is a ChatHost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual import events, on
from textual.app import App, ComposeResult
from textual.binding import ActiveBinding
from textual.containers import Horizontal
from textual.widgets import OptionList

from ...config import Preset
from ...engine.panel import panel
from ...session import ChatSession, Exchange
from ...session.attachments import AttachmentError, attach, mentioned_files, read_attachment, split_attachments
from ...store import StoreError
from ...text.wording import plural
from ..bindings import CHAT_BINDINGS, footer_bindings, footer_ids
from ..bridge import CoreEvent, ReplyText, TurnFinished
from ..context_actions import compact_now, open_summary, refused
from ..host import ChatHost
from ..keys import key_texts
from ..last_reply import copy_code, copy_reply, show_panel, show_side_by_side
from ..preset_choices import PresetChoices
from ..tab_order import TabOrder
from ..turn_runner import Edit, Rerun, Send, TurnPhase, TurnRequest, TurnRunner
from ..widgets.chat_log import ChatLog, NoticeLine, UserMessage, Welcome
from ..widgets.compaction_marker import CompactionMarker
from ..widgets.footer import KeyFooter
from ..widgets.header import StatusHeader
from ..widgets.path_completion import PathCompletion
from ..widgets.prompt_input import PromptInput
from ..widgets.reference_card import ReferenceCard
from ..widgets.reply import AssistantReply
from ..widgets.sidebar import ReferenceSidebar
from ..widgets.store_watch import StoreWatch
from .confirm import ConfirmScreen
from .session_browser import SessionsScreen


def find_chat(app: App[Any]) -> ChatScreen:
    """The chat, wherever it sits in the screen stack (a modal may be on top of it)."""
    for screen in reversed(app.screen_stack):
        if isinstance(screen, ChatScreen):
            return screen
    raise LookupError("the chat screen is not mounted yet")


class ChatScreen(TabOrder):
    # Below 90 columns the sidebar would squeeze the conversation: it hides, and F4 lays it over the log.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (90, "-wide")]
    # The prompt has focus in the first frame: Textual's default, the first focusable widget, is the first
    # reference card, which would flash as on_mount's focus() moved the focus on a frame later.
    AUTO_FOCUS = "PromptInput"

    # The log's own children can take focus (a tool call, "earlier messages"): focus is never invisible.
    DEFAULT_CSS = """
    ChatScreen EarlierMessages:focus {
        background: $accent 20%;
    }
    """

    BINDINGS = CHAT_BINDINGS

    def __init__(self, session: ChatSession, host: ChatHost, *, notice: str | None = None) -> None:
        """`host`: the app, for the clipboard and the models a local Ollama has."""
        super().__init__()
        self.session = session
        self.host = host
        self.notice = notice
        self.runner = TurnRunner(session, self)
        self.presets = PresetChoices(session, self, host, self._show_switched)
        self._history = session.history()  # the stored conversation this screen opens with, until it is shown
        self.last_reply: AssistantReply | None = None  # the newest reply on screen, once finished
        self._sidebar_stale = False
        self._clear_after_turn = False
        self._editing = False  # the prompt box holds an edit of the last prompt
        self._solo_next = False  # Ctrl+T: the next prompt goes to the aggregator alone

    @property
    def turn_running(self) -> bool:
        """Whether a turn is on (running, or its reply still being shown): the prompt looks busy, Esc cancels."""
        return self.runner.phase is not TurnPhase.IDLE

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        """The keys in force, in the footer's order, shown in it as the chat's state says (bindings.py): Textual's
        Footer reads this, so what it shows follows the chat's state (refresh_bindings)."""
        last = self.last_reply
        shown = footer_ids(
            saved=self.session.store is not None,
            narrow=self.has_class("-narrow"),
            busy=self.turn_running or self._editing,
            versions=last.version[1] if last is not None else None,  # (which, how many) of the last exchange
        )
        return footer_bindings(
            super().active_bindings,
            shown,
            width=self.size.width,
            key_display=self.app.get_key_display,
            cancel_stops_edit=not self.turn_running,
        )

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
            # Not a Tab stop: focused, it would show nothing and swallow what is typed. PgUp/PgDn and Ctrl+End
            # scroll it from anywhere; what can be done in it (a tool call, earlier messages) still takes focus.
            log.can_focus = False
            with log:
                if not self._history:
                    # Composed, not mounted on mount: the first frame is then the whole screen (mounted, the
                    # welcome and the notices would come frames after the rest, bench/startup.py).
                    yield Welcome.for_preset(self.preset, key_texts(self))
                    yield from self._opening_notices()
            yield ReferenceSidebar(self.preset, id="sidebar")
        yield PromptInput(id="prompt")
        yield KeyFooter()
        yield PathCompletion(id="path-completion")
        yield StoreWatch(self.session.store)

    def _opening_notices(self) -> list[NoticeLine]:
        """Why the app started as it did (the preset it chose), and a preset's missing keys."""
        error, warning = self.session.preflight(self.preset)
        opening = [(self.notice, "info"), (error, "error"), (warning, "warning")]
        return [NoticeLine(text, level) for text, level in opening if text]

    def paints_uncapped(self) -> bool:
        # A drain waits for each batch's frame before the next batch (its work spaces the frames out); waiting
        # for the timer's tick as well would add to every batch, and the log's scroll to its new end a second frame.
        return self.runner.phase is TurnPhase.DRAINING

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
            self.runner.start_mcp()

    def _show_turn_phase(self) -> None:
        """The prompt's look and the footer's keys as the turn's phase is when this runs (called a frame late,
        it shows the phase then, never a stale one)."""
        self.query_one(PromptInput).set_class(self.turn_running, "-busy")
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_turn":
            return self.turn_running or self._editing
        if action in ("copy_reply", "copy_code"):
            return True if self.last_reply is not None else None
        return True

    # ------------------------------------------------------------------ answering again, editing, versions

    def _last_prompt(self) -> UserMessage | None:
        """The last prompt, when it can be answered again or edited (else a notice says why not)."""
        if self.turn_running:
            self.notify("A turn is running — wait for it, or press Esc to cancel it.", severity="warning")
            return None
        last = self.chat_log.last_prompt() if self.session.store is not None else None
        if last is None:
            self.notify("There is no saved prompt to answer again yet.", severity="warning")
        return last

    async def action_rerun(self, aggregator_only: bool) -> None:
        """Re-ask (the whole turn) or regenerate (the aggregator on the stored answers) the last prompt; the
        reply shown so far stays in the store as another version."""
        if (last := self._last_prompt()) is None:
            return
        error, _warning = self.session.preflight(self.preset)
        if error:
            self.notify(error, severity="error", timeout=8)
            return
        await self._dispatch(Rerun(aggregator_only))
        await self.chat_log.drop_after(last)
        await self.runner.show_reply(self.chat_log, self.sidebar)

    def action_edit_prompt(self) -> None:
        if (last := self._last_prompt()) is None:
            return
        prompt = self.query_one(PromptInput)
        # What was typed: its `@path` mentions attach the files again when it is sent.
        prompt.load_text(split_attachments(last.text)[0])
        prompt.move_cursor(prompt.document.end)
        prompt.focus()
        self._editing = True
        self.notify("Editing the last prompt: Enter sends it as a new version (the old one stays); Esc stops.")
        self.refresh_bindings()

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

    def action_sessions(self) -> None:
        store = self.session.store
        if store is None:
            self.notify("Conversations are not being saved in this run: there is nothing to open.", severity="warning")
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
        try:
            self.session.open(session_id)
        except StoreError as exc:  # the store cannot read it (damaged): the open conversation stays
            self.notify(str(exc), title="Cannot open the session", severity="error")
            return
        await self._render_session()
        self.query_one(StatusHeader).show(self.preset, ledger=self.session.ledger)
        await self.sidebar.show_preset(self.preset)
        self.refresh_bindings()
        self.query_one(PromptInput).focus()

    async def _render_session(self, history: list[Exchange] | None = None) -> None:
        """Show the stored conversation as it now stands (after opening it, or switching a version)."""
        self._editing = False
        self.last_reply = await self.chat_log.show_history(history or self.session.history())
        if self.last_reply is not None:
            self.last_reply.show_version(*self.session.versions())
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
        if refused(self, self.session, content, files):  # no window of the preset's models can hold it
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

    def action_compact(self) -> None:
        """Ctrl+L: summarise the conversation's earlier exchanges now."""
        if self.turn_running:
            self.notify("A turn is running — wait for it, or press Esc to cancel it.", severity="warning")
            return
        compact_now(self, self.session, self.chat_log)

    def on_compaction_marker_opened(self, event: CompactionMarker.Opened) -> None:
        open_summary(self, event.marker)

    def action_send_solo(self) -> None:
        """Ctrl+T: send what is in the prompt to the aggregator alone."""
        self._solo_next = True
        self.query_one(PromptInput).submit()

    async def start_turn(self, text: str, *, solo: bool = False) -> None:
        editing, self._editing = self._editing, False
        request = Edit(text) if editing else Send(text, solo=solo)
        error, warning = self.session.preflight(self.preset)
        if error is None:
            await self._dispatch(request)
        await self.runner.show_prompt(request, self.chat_log, self.sidebar, error=error, warning=warning)

    async def _dispatch(self, request: TurnRequest) -> None:
        """Start `request`'s turn: its requests leave before the screen does any of its work for the turn, and
        the prompt and the keys look busy from the frame that shows the prompt sent."""
        self.runner.dispatch(request)
        self._show_turn_phase()
        await self.runner.stand_aside()

    async def on_core_event(self, message: CoreEvent) -> None:
        await self.runner.apply(message, self.chat_log, self.sidebar)

    async def on_reply_text(self, message: ReplyText) -> None:
        await self.runner.append_text(message)

    async def on_turn_finished(self, message: TurnFinished) -> None:
        """The end of a turn, the one place the screen changes for it. The runner ends it (`TurnRunner.end`): the
        reply's last text and its footer, and the sidebar's cards, in one frame; or while the reply outruns the
        screen, it drains the rest first and the message comes again, `shown`. Then the header's totals, and the
        prompt and the footer's keys ready for the next turn: in the same frame when the reply was drained
        (nothing of it waits for them), else a frame later, so that the finished reply's frame comes first
        (restyling them is a large part of that frame on a slow machine, bench/fanout.py). That frame is
        painted as soon as the screen is idle, not held to the stream's frame pace."""
        reply = await self.runner.end(message, self.sidebar)
        if self.runner.phase is TurnPhase.DRAINING:
            return
        if reply is not None:
            self.last_reply = reply
        self.query_one(StatusHeader).show(ledger=self.session.ledger)
        if message.shown:
            self._show_turn_phase()
        else:
            self.call_after_refresh(self._show_turn_phase)
        self.paint_next_at_once()
        if self._sidebar_stale:
            self._sidebar_stale = False
            await self.sidebar.show_preset(self.preset)
        if self._clear_after_turn:
            self._clear_after_turn = False
            await self._clear()

    def action_cancel_turn(self) -> None:
        if self.turn_running:
            self.runner.cancel()
        elif self._editing:  # no turn running: Esc stops an edit
            self._editing = False
            self.query_one(PromptInput).load_text("")
            self.notify("Edit dropped.")
            self.refresh_bindings()

    def on_unmount(self) -> None:
        self.runner.close()
        self.session.close()

    # ------------------------------------------------------------------ presets

    def choose_model(self, provider: str, *, as_aggregator: bool) -> None:
        self.presets.choose_model(provider, as_aggregator=as_aggregator)

    def action_preset_picker(self) -> None:
        self.presets.pick()

    def action_next_preset(self) -> None:
        self.presets.cycle(+1)

    def action_previous_preset(self) -> None:
        self.presets.cycle(-1)

    def ollama_changed(self) -> None:
        """Ollama answered differently (it started, stopped, pulled a model): whether the preset can run may
        have changed with it."""
        self.query_one(StatusHeader).refresh()

    def _show_switched(self, preset: Preset) -> None:
        self.query_one(StatusHeader).show(preset)
        when = " from the next turn" if self.turn_running else ""
        refs = len(panel(preset))  # a model asked `samples:` times counts once a sample, as in the sidebar
        self.notify(
            f"{preset.name}: {plural(refs, 'reference')} → {preset.aggregator.label}{when}",
            title="Preset switched",
        )
        if self.turn_running:
            self._sidebar_stale = True
        else:
            self.call_later(self.sidebar.show_preset, preset)
        self.call_later(self.presets.announce_preflight, preset)

    # ------------------------------------------------------------------ the rest

    def action_panel(self) -> None:
        show_panel(self, self.last_reply)

    def on_assistant_reply_panel_requested(self, event: AssistantReply.PanelRequested) -> None:
        show_panel(self, event.reply)

    def action_side_by_side(self) -> None:
        show_side_by_side(self, self.last_reply)

    def action_trace(self) -> None:
        from .trace import TraceScreen

        session = self.session
        self.app.push_screen(TraceScreen(session.store, session.id, traces_on=session.config.traces_for(self.preset)))

    def on_reference_card_selected(self, event: ReferenceCard.Selected) -> None:
        # Closed, it hands the keys back to the prompt: left on the card, what is typed next would go nowhere.
        from .reference_detail import ReferenceDetail

        self.app.push_screen(ReferenceDetail(event.card, self.host), lambda _: self.focus_prompt())

    @on(OptionList.OptionSelected, "#path-completion")
    def _on_path_chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.query_one(PromptInput).take_completion(event.option_index)

    def action_toggle_sidebar(self) -> None:
        self.sidebar.toggle()

    def action_scroll_log(self, direction: int) -> None:
        self.chat_log.page(direction)

    def action_scroll_bottom(self) -> None:
        self.chat_log.scroll_end(animate=False)  # and follows new text again (the anchor holds)

    def action_copy_reply(self) -> None:
        copy_reply(self, self.host, self.last_reply)

    def action_copy_code(self) -> None:
        copy_code(self, self.host, self.last_reply)

    async def action_new_conversation(self) -> None:
        if self.turn_running:
            self._clear_after_turn = True
            self.action_cancel_turn()
            return
        await self._clear()

    async def _clear(self) -> None:
        saved = self.session.id is not None
        self.session.new_conversation()
        self.last_reply = None
        self.chat_log.forget_history()
        log = self.chat_log
        await log.remove_children()
        await log.mount(Welcome.for_preset(self.preset, key_texts(self)))
        await self.sidebar.show_preset(self.preset)
        self.query_one(StatusHeader).show(ledger=self.session.ledger)  # tokens and cost start again at 0
        self.refresh_bindings()
        self.notify("New conversation." + (" The last one is saved." if saved else ""))
