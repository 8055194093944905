"""The moa-chat Textual app: wiring between the prompt, the turn worker and the widgets that render it."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Iterable
from importlib.resources import files
from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.screen import Screen
from textual.theme import Theme
from textual.widgets import Footer

from ..cancel import CancelToken
from ..config import Config, Preset
from ..events import (
    AggregatorFinished,
    AggregatorStarted,
    Notice,
    ReferenceFinished,
    ReferenceProgress,
    ReferenceQueued,
    ReferenceStarted,
    ToolCallEvent,
)
from ..settings import load_settings, save_setting
from ..startup import preflight
from ..tools import ToolRegistry, Workspace, tools_for
from ..tools.approval import ApprovalPolicy
from ..tools.mcp_bridge import McpHub
from ..turn import ApprovalRequest, Decision, Turn, TurnResult
from .bridge import CoreEvent, ReplyText, TurnBridge, TurnDone
from .commands import PresetCommands
from .screens.approval import ApprovalScreen
from .screens.help import HelpScreen
from .screens.preset_picker import PresetPicker
from .screens.reference_detail import ReferenceDetail
from .widgets.chat_log import ChatLog, UserMessage, Welcome
from .widgets.chat_log import Notice as NoticeWidget
from .widgets.header import StatusHeader
from .widgets.prompt_input import PromptInput
from .widgets.reference_card import ReferenceCard
from .widgets.reply import AssistantReply
from .widgets.sidebar import ReferenceSidebar

STYLESHEETS = ("app.tcss", "chat.tcss", "sidebar.tcss", "prompt.tcss", "modals.tcss")


def stylesheet_paths() -> list[Path]:
    folder = files("moa_chat.styles")
    return [Path(str(folder / name)) for name in STYLESHEETS]


class MoAChatApp(App[int]):
    TITLE = "moa-chat"
    CSS_PATH = stylesheet_paths()  # type: ignore[assignment]
    COMMANDS = App.COMMANDS | {PresetCommands}
    BINDINGS = [
        Binding("f1", "help", "Help", id="help"),
        Binding("f2", "preset_picker", "Presets", id="preset_picker"),
        Binding("f3", "next_preset", "Next preset", id="next_preset"),
        Binding("shift+f3", "previous_preset", "Previous preset", id="previous_preset", show=False),
        Binding("escape", "cancel_turn", "Cancel", id="cancel_turn"),
        Binding("f4", "toggle_sidebar", "Sidebar", id="toggle_sidebar"),
        # Priority: the prompt would take them to move its cursor; reading back matters more while typing.
        Binding("pageup", "scroll_log(-1)", "Scroll up", id="scroll_log_up", show=False, priority=True),
        Binding("pagedown", "scroll_log(1)", "Scroll down", id="scroll_log_down", show=False, priority=True),
        Binding("f5", "copy_reply", "Copy reply", id="copy_reply"),
        # Priority: the prompt (a TextArea) uses F6 to select a line.
        Binding("f6", "copy_code", "Copy code", id="copy_code", show=False, priority=True),
        Binding("ctrl+n", "new_conversation", "New chat", id="new_conversation"),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
    ]

    # Under 120 columns the screen gets -narrow and the sidebar slims down (sidebar.tcss).
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (120, "-wide")]

    turn_running: reactive[bool] = reactive(False, init=False)

    def __init__(
        self,
        config: Config,
        preset: Preset,
        *,
        notice: str | None = None,
        theme: str | None = None,
        remember_theme: bool = True,
    ) -> None:
        super().__init__()
        self.config = config
        self.preset = preset
        self.notice = notice
        self.messages: list[dict[str, Any]] = []
        self.session_tokens = 0
        self._cancel: CancelToken | None = None
        self._bridge: TurnBridge | None = None
        self._reply: AssistantReply | None = None
        self._last_reply: AssistantReply | None = None
        self._sidebar_stale = False
        self.workspace = Workspace(Path.cwd())
        self.mcp = McpHub(config.mcp_servers)
        self._mcp_ready = not config.mcp_servers
        self._tool_warnings_shown: set[str] = set()
        self.approval = ApprovalPolicy(ask=self._ask_approval)
        self._approval_screen: ApprovalScreen | None = None
        self._clear_after_turn = False
        self._remember_theme = remember_theme
        chosen = theme or load_settings().get("theme")
        if isinstance(chosen, str) and chosen in self.available_themes:
            self.theme = chosen

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield StatusHeader(self.preset, id="header")
        with Horizontal(id="body"):
            yield ChatLog(id="chat-log")
            yield ReferenceSidebar(self.preset, id="sidebar")
        yield PromptInput(id="prompt")
        yield Footer()

    async def on_mount(self) -> None:
        if self.config.keymap:
            self.set_keymap(self.config.keymap)
        self.theme_changed_signal.subscribe(self, self._on_theme_changed)
        log = self.query_one(ChatLog)
        await log.mount(Welcome.for_preset(self.preset))
        if self.notice:
            await log.mount(NoticeWidget(self.notice, "info"))
        await self._announce_preflight(self.preset, in_log=True)
        self.query_one(PromptInput).focus()
        if self.config.mcp_servers:
            self._start_mcp()

    @work(thread=True, group="mcp", exit_on_error=False)
    def _start_mcp(self) -> None:
        """MCP servers start off the UI thread; until they are up, turns use the built-in tools."""
        self.mcp.start(report=lambda line: self.post_message(CoreEvent(Notice(line, "warning"))))
        self._mcp_ready = True

    def _on_theme_changed(self, theme: Theme) -> None:
        if self._remember_theme:
            save_setting("theme", theme.name)

    @property
    def sidebar(self) -> ReferenceSidebar:
        return self.query_one(ReferenceSidebar)

    @property
    def chat_log(self) -> ChatLog:
        return self.query_one(ChatLog)

    def watch_turn_running(self, running: bool) -> None:
        self.query_one(PromptInput).set_class(running, "-busy")
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_turn":
            return self.turn_running
        if action in ("copy_reply", "copy_code"):
            return True if self._last_reply is not None else None
        return True

    # ------------------------------------------------------------------ a turn

    async def on_prompt_input_submitted(self, event: PromptInput.Submitted) -> None:
        if self.turn_running:
            self.notify("A turn is running — wait for it, or press Esc to cancel it.", severity="warning")
            return
        self.query_one(PromptInput).accept(event.text)
        await self.start_turn(event.text)

    async def start_turn(self, text: str) -> None:
        log = self.chat_log
        await log.query(Welcome).remove()
        await log.mount(UserMessage(text))
        preset = self.preset
        error, warning = preflight(self.config, preset)
        if error:
            await log.mount(NoticeWidget(error, "error"))
            return
        if warning:
            self.notify(warning, severity="warning", timeout=6)
        self.messages.append({"role": "user", "content": text})
        self._reply = AssistantReply(preset.name, preset.aggregator.label, len(preset.references))
        await log.mount(self._reply)
        self.sidebar.start_turn()
        tools, warnings = tools_for(self.config, preset, self.workspace, self.mcp if self._mcp_ready else None)
        for line in warnings:
            if line not in self._tool_warnings_shown:
                self._tool_warnings_shown.add(line)
                await log.mount(NoticeWidget(line, "warning"))
        self._cancel = CancelToken()
        self._bridge = TurnBridge(self.post_message)
        self.turn_running = True
        self._run_turn(preset, list(self.messages), self._cancel, self._bridge, tools)

    @work(thread=True, exclusive=True, group="turn", exit_on_error=False)
    def _run_turn(
        self,
        preset: Preset,
        messages: list[dict[str, Any]],
        cancel: CancelToken,
        bridge: TurnBridge,
        tools: ToolRegistry,
    ) -> None:
        """Runs on a worker thread: everything it learns reaches the UI as posted messages."""
        turn = Turn(self.config, preset, observer=bridge, cancel=cancel, tools=tools, approver=self.approval)
        bridge.post_after_text(TurnDone(turn.run(messages)))

    def _ask_approval(self, request: ApprovalRequest) -> Decision:
        """Called on the turn's thread: show the modal on the UI thread and wait for the answer (or a cancel)."""
        answer: concurrent.futures.Future[Decision] = concurrent.futures.Future()
        cancel = self._cancel

        def show() -> None:
            self._approval_screen = ApprovalScreen(request)
            self.push_screen(self._approval_screen, answer.set_result)

        self.call_from_thread(show)
        while True:
            try:
                return answer.result(timeout=0.1)
            except concurrent.futures.TimeoutError:
                if cancel is not None and cancel.cancelled:
                    self.call_from_thread(self._close_approval)
                    return "deny"

    def _close_approval(self) -> None:
        screen, self._approval_screen = self._approval_screen, None
        if screen is not None and screen.is_active:
            screen.dismiss("deny")

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
                reply.set_status(f"consulting {len(cards)} references… {done}/{len(cards)} finished")
        elif isinstance(event, AggregatorStarted | AggregatorFinished):
            self.sidebar.aggregator_card.apply(event)
            if isinstance(event, AggregatorStarted) and reply is not None and not reply.text:
                reply.set_status(
                    f"{event.label} is writing… ({event.references_ok}/{event.references_total} references answered)"
                )
        elif isinstance(event, ToolCallEvent) and reply is not None:
            await reply.tool_event(event)
        elif isinstance(event, Notice):
            await self.chat_log.mount(NoticeWidget(event.text, event.level))

    async def on_reply_text(self, message: ReplyText) -> None:
        text = message.text
        if text is None:  # coalesced: collect whatever this segment's epoch has buffered
            text = self._bridge.take(message.epoch) if self._bridge else ""
        if text and self._reply is not None:
            await self._reply.append_text(text)

    async def on_turn_done(self, message: TurnDone) -> None:
        result: TurnResult = message.result
        reply = self._reply
        self.messages.extend(result.new_messages)
        self.session_tokens += result.usage.total_tokens
        if reply is not None:
            await reply.finish(result, tokens=result.usage.total_tokens)
            self._last_reply = reply
        # The card names its model already: show only the reason.
        reason = result.error.split(" failed: ", 1)[-1] if result.error else None
        self.sidebar.end_turn(result.status, reason)
        self.query_one(StatusHeader).show(tokens=self.session_tokens)
        self._reply = self._cancel = self._bridge = None
        self.turn_running = False
        if self._sidebar_stale:
            self._sidebar_stale = False
            await self.sidebar.show_preset(self.preset)
        if self._clear_after_turn:
            self._clear_after_turn = False
            await self._clear()

    def action_cancel_turn(self) -> None:
        if self._cancel is None:  # no turn running
            return
        # Closing HTTP streams can block for a moment; never on the UI's thread.
        threading.Thread(target=self._cancel.cancel, name="cancel-turn", daemon=True).start()
        if self._reply is not None:
            self._reply.set_status("cancelling…")

    def on_unmount(self) -> None:
        if self._cancel is not None:
            self._cancel.cancel()
        self.mcp.close()

    # ------------------------------------------------------------------ presets

    def switch_preset(self, name: str) -> None:
        preset = self.config.preset(name)
        self.preset = preset
        self.query_one(StatusHeader).show(preset)
        when = " from the next turn" if self.turn_running else ""
        self.notify(
            f"{preset.name}: {len(preset.references)} references → {preset.aggregator.label}{when}",
            title="Preset switched",
        )
        if self.turn_running:
            self._sidebar_stale = True
        else:
            self.call_later(self.sidebar.show_preset, preset)
        self.call_later(self._announce_preflight, preset)

    async def _announce_preflight(self, preset: Preset, in_log: bool = False) -> None:
        error, warning = preflight(self.config, preset)
        for text, level in ((error, "error"), (warning, "warning")):
            if not text:
                continue
            if in_log:
                await self.chat_log.mount(NoticeWidget(text, level))
            else:
                self.notify(text, severity="error" if level == "error" else "warning", timeout=8)

    def _cycle_preset(self, step: int) -> None:
        names = sorted(self.config.presets)
        position = names.index(self.preset.name) if self.preset.name in names else 0
        self.switch_preset(names[(position + step) % len(names)])

    def action_next_preset(self) -> None:
        self._cycle_preset(+1)

    def action_previous_preset(self) -> None:
        self._cycle_preset(-1)

    def action_preset_picker(self) -> None:
        def chosen(name: str | None) -> None:
            if name and name != self.preset.name:
                self.switch_preset(name)

        self.push_screen(PresetPicker(self.config, self.preset.name), chosen)

    # ------------------------------------------------------------------ the rest

    def on_reference_card_selected(self, event: ReferenceCard.Selected) -> None:
        self.push_screen(ReferenceDetail(event.card))

    def action_help(self) -> None:
        self.push_screen(HelpScreen([b.id for b in self.BINDINGS if isinstance(b, Binding) and b.id]))

    def action_toggle_sidebar(self) -> None:
        sidebar = self.sidebar
        sidebar.display = not sidebar.display

    def action_scroll_log(self, direction: int) -> None:
        # Scrolling up releases the log's anchor, so a streaming reply stops pulling the view down;
        # paging back to the bottom anchors it again.
        if direction < 0:
            self.chat_log.scroll_page_up(animate=False)
        else:
            self.chat_log.scroll_page_down(animate=False)

    def action_copy_reply(self) -> None:
        if self._last_reply is None or not self._last_reply.text:
            self.notify("No reply to copy yet.", severity="warning")
            return
        self.copy_to_clipboard(self._last_reply.text)
        self.notify(f"Copied the last reply ({len(self._last_reply.text):,} characters).")

    def action_copy_code(self) -> None:
        code = self._last_reply.last_code_block() if self._last_reply else None
        if code is None:
            self.notify("The last reply has no code block.", severity="warning")
            return
        self.copy_to_clipboard(code)
        self.notify(f"Copied the last code block ({code.count(chr(10)) or 1} lines).")

    async def action_new_conversation(self) -> None:
        if self.turn_running:
            self._clear_after_turn = True
            self.action_cancel_turn()
            return
        await self._clear()

    async def _clear(self) -> None:
        self.messages.clear()
        self._last_reply = None
        log = self.chat_log
        await log.remove_children()
        await log.mount(Welcome.for_preset(self.preset))
        await self.sidebar.show_preset(self.preset)
        self.refresh_bindings()
        self.notify("New conversation.")

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Pick preset", "Choose the MoA preset for the next turn (F2)", self.action_preset_picker)
        yield SystemCommand("Next preset", "Switch to the next preset (F3)", self.action_next_preset)
        yield SystemCommand("Previous preset", "Switch to the previous preset (Shift+F3)", self.action_previous_preset)
        if self.turn_running:
            yield SystemCommand(
                "Cancel turn", "Stop the running turn; the partial reply stays (Esc)", self.action_cancel_turn
            )
        yield SystemCommand("Toggle sidebar", "Show or hide the reference sidebar (F4)", self.action_toggle_sidebar)
        if self._last_reply is not None:
            yield SystemCommand("Copy reply", "Copy the last reply to the clipboard (F5)", self.action_copy_reply)
            yield SystemCommand(
                "Copy code block", "Copy the last code block of the last reply (F6)", self.action_copy_code
            )
        yield SystemCommand(
            "New conversation", "Clear the conversation and start again (Ctrl+N)", self.action_new_conversation
        )
        yield SystemCommand("Help", "Keys and where to find more (F1)", self.action_help)


def run_app(config: Config, preset: Preset, *, notice: str | None = None) -> int:
    app = MoAChatApp(config, preset, notice=notice)
    app.run()
    return app.return_code or 0
