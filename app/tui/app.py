"""The moa-chat Textual app: global keys, theme and keymap. The chat itself is a ChatScreen."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from functools import partial
from importlib.resources import files
from pathlib import Path, PurePath
from types import FrameType
from typing import Any, Protocol

from rich.console import RenderableType
from textual import events, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.driver import Driver
from textual.message import Message
from textual.screen import Screen
from textual.theme import Theme

from .. import clipboard
from ..config import Config, Preset, data_home
from ..config.settings import load_settings, save_setting
from ..llm import warm_up
from ..providers.ollama import installed_models
from ..session import ChatSession
from ..tools import Approver
from . import heap
from .approver import DialogApprover
from .bridge import TurnFinished
from .commands import ModelCommands, PresetCommands, chat_commands
from .keys import declared_bindings, help_rows, key_texts, use_key_parser
from .screens.chat import ChatScreen, find_chat
from .screens.preset_picker import PresetPicker
from .widgets.prompt_input import PromptInput

STYLESHEETS = ("app.tcss", "chat.tcss", "sidebar.tcss", "prompt.tcss", "modals.tcss")
# How long a thread may hold the GIL while another waits for it. The UI thread lays out and paints in long
# stretches of Python; a turn's threads need the GIL back after every socket write and read, and each wait can
# last the whole interval (CPython's default). A short one lets the fan-out's requests leave while the screen
# is laid out, at a small cost in throughput while both are busy (bench/fanout.py, docs/performance.md).
SWITCH_INTERVAL = 0.0005


# How the app gets its session: built with the approver the app hands it (the approval dialog, on this app).
class SessionFactory(Protocol):
    """Builds the chat's session (a stored one, a session reopened, a test's) with what the app gives every
    session: its approver, the approval dialog, and `restart_cut_reply`: the chat shows a reply cut off after
    text arrived as an earlier version, and the one asked again."""

    def __call__(self, approver: Approver, *, restart_cut_reply: bool) -> ChatSession: ...


def _plain_session(config: Config, preset: Preset) -> SessionFactory:
    """A session of `preset`, not stored."""

    def build(approver: Approver, *, restart_cut_reply: bool) -> ChatSession:
        return ChatSession(config, preset, approver=approver, restart_cut_reply=restart_cut_reply)

    return build


def stylesheet_paths() -> list[str | PurePath]:
    folder = files("moa_chat.styles")
    return [Path(str(folder / name)) for name in STYLESHEETS]


def screenshot_folder() -> Path:
    """Where screenshots go: the user's Downloads folder if it exists, else `screenshots/` in the data folder."""
    from platformdirs import user_downloads_path

    downloads = user_downloads_path()
    if downloads.is_dir():
        return downloads
    folder = data_home() / "screenshots"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


class MoAChatApp(App[int]):
    TITLE = "moa-chat"
    CSS_PATH = stylesheet_paths()
    COMMANDS = App.COMMANDS | {PresetCommands, ModelCommands}
    BINDINGS = [
        Binding("f1", "help", "Help", id="help", tooltip="keys and where to find more"),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True, tooltip="quit"),
    ]

    # Under 120 columns the screen gets -narrow and the sidebar slims down (sidebar.tcss).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    # Seconds between two questions to Ollama (None: only at start and when F2 opens), so that an Ollama started
    # or stopped while the chat runs is found: F3, F2, the palette and the header follow it.
    OLLAMA_RECHECK: float | None = 5.0

    def __init__(
        self,
        config: Config,
        preset: Preset,
        *,
        notice: str | None = None,
        theme: str | None = None,
        remember_theme: bool = True,
        session: SessionFactory | None = None,
        freeze_heap: bool = False,
        approval_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`session`: builds the chat's session with the approver given (a stored one, a session reopened...);
        by default a session of `preset`, not stored. `freeze_heap`: for a process that is the app's alone
        (run_app): the garbage collector as heap.py tells. `approval_clock`: the approval dialog's quiet period
        runs on it (real time; a test's own)."""
        super().__init__()
        self._quitting = False
        self.config = config
        # Tool calls that need a yes ask it in a dialog on this app.
        self.approver = DialogApprover(self, approval_clock)
        make_session = session or _plain_session(config, preset)
        self.session = make_session(self.approver, restart_cut_reply=True)
        self.notice = notice
        self._remember_theme = remember_theme
        self._freeze_heap = freeze_heap
        if config.keymap:
            self.set_keymap(config.keymap)
        # What a local Ollama has pulled, once it has answered (asked after the first paint); None until then,
        # and for good when it is not running. The preset picker and the palette offer these models.
        self.ollama_models: tuple[str, ...] | None = None
        self.ollama_checked = False
        chosen = theme or load_settings().get("theme")
        if isinstance(chosen, str) and chosen in self.available_themes:
            self.theme = chosen

    @property
    def chat(self) -> ChatScreen:
        """The chat, wherever it sits in the screen stack (a modal may be on top of it)."""
        return find_chat(self)

    def get_default_screen(self) -> ChatScreen:
        return ChatScreen(self.session, self, notice=self.notice)

    def get_driver_class(self) -> type[Driver]:
        use_key_parser()  # Alt+Enter, Shift+F3 and modifyOtherKeys' Shift+Enter read as those keys
        return super().get_driver_class()

    async def on_event(self, event: events.Event) -> None:
        # Before Textual hands a key to the focused widget: a letter typed on a card goes to the prompt, in order.
        if isinstance(event, events.Key) and not event.is_forwarded and isinstance(self.screen, ChatScreen):
            _steer_typing(self.screen, event)
        await super().on_event(event)

    def copy_to_clipboard(self, text: str) -> None:
        """Every copy (a selection in the prompt too): OSC 52, what Ctrl+V pastes here, and the system
        clipboard through its tool where there is one (clipboard.py)."""
        super().copy_to_clipboard(text)
        self._copy_with_tool(text, None)

    def copy_text(self, text: str, what: str) -> None:
        """Copy, then say what became of it: `what` names the text ("the last reply (1,234 characters)")."""
        super().copy_to_clipboard(text)
        self._copy_with_tool(text, what)

    @work(thread=True, group="clipboard", exit_on_error=False)
    def _copy_with_tool(self, text: str, what: str | None) -> None:
        outcome = clipboard.copy(text)  # up to a couple of seconds for a tool: never on the UI's thread
        if what is not None:
            message, severity = outcome.message(what)
            # Long enough to read, short enough not to sit over what is opened next (a warning says what to do).
            timeout = 8 if severity == "warning" else 4
            self.call_from_thread(self.notify, message, severity=severity, timeout=timeout, markup=False)

    def on_mount(self) -> None:
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_interval, SWITCH_INTERVAL))
        self.theme_changed_signal.subscribe(self, self._on_theme_changed)
        # A closed terminal (SIGHUP) or a kill (SIGTERM) ends the app the way Ctrl+Q does: the turn is
        # cancelled, commands and MCP servers stop, and the terminal gets its screen, mouse and cursor back.
        loop = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(number, self.exit)
        self._guard_resume()

    def _guard_resume(self) -> None:
        """Textual takes any SIGCONT for a return from Ctrl+Z and restarts its terminal mode. A closed
        terminal sends one with its SIGHUP, and the restart then starts a second input thread on it that
        spins forever and keeps the process from exiting: resume only while the app runs on a terminal."""
        resume = signal.getsignal(signal.SIGCONT)
        if not callable(resume):
            return

        def on_sigcont(number: int, frame: FrameType | None) -> None:
            if not self._quitting and _terminal_open():
                resume(number, frame)

        with contextlib.suppress(ValueError):  # not the main thread: nothing to guard there
            signal.signal(signal.SIGCONT, on_sigcont)

    def exit(self, result: int | None = None, return_code: int = 0, message: RenderableType | None = None) -> None:
        # Every way out (Ctrl+Q, the palette, SIGTERM, SIGHUP) comes here. MCP servers take a moment to wind
        # down: ask them now, so they do it while the terminal is restored; the chat's unmount waits.
        self._quitting = True
        self.session.begin_close()
        super().exit(result, return_code, message)

    def on_unmount(self) -> None:
        sys.setswitchinterval(self._switch_interval)

    def _on_theme_changed(self, theme: Theme) -> None:
        if self._remember_theme:
            save_setting("theme", theme.name)

    def action_help(self) -> None:
        chat = self.chat
        from .screens.help import HelpScreen  # imported when first needed: see DEFERRED

        ids = [b.id for b in declared_bindings(chat) if b.id]
        self.push_screen(HelpScreen(help_rows(chat), ids))

    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str | None:
        """The palette's "Save screenshot": to the Downloads folder where there is one, else to the data folder
        (Textual's own default fails where ~/Downloads does not exist); the notice names the file either way."""
        return super().deliver_screenshot(filename, path or str(screenshot_folder()), time_format)

    def on_ready(self) -> None:
        """A `keymap:` typo would otherwise do nothing, silently, or leave its action with no key at all: say
        so at start, and keep only the entries that can work. Then, the first frame painted, ask Ollama."""
        from .keys import check_keymap, keymap_notice, known_binding_ids

        if self._freeze_heap:
            heap.first_frame()
        self.recheck_ollama()
        if self.OLLAMA_RECHECK is not None:
            self.set_interval(self.OLLAMA_RECHECK, self.recheck_ollama)
        warm_up(then=partial(_import_deferred, self, freeze=self._freeze_heap))

        usable, problems = check_keymap(self.config.keymap or {}, known_binding_ids())
        if problems:
            self.set_keymap(usable)
            notice = keymap_notice(self.config.path, problems, key_texts(self.chat).get("help", "F1"))
            self.notify(notice, title="Keymap problems", severity="warning", timeout=20, markup=False)

    def on_warmed_up(self, message: WarmedUp) -> None:
        from .widgets.markdown import learn_reply_styles  # loaded by the warm-up thread

        learn_reply_styles(self)  # the stylesheet is the app's: on its thread
        if message.freeze:
            heap.freeze_loaded()

    def on_turn_finished(self, message: TurnFinished) -> None:
        """A turn's end, after the chat has shown it (the message comes up from the chat screen): its cycles are
        collected once its reply is painted. The message comes twice for a drained reply; the first finds the
        turn still on."""
        if self._freeze_heap and not self.chat.turn_running:
            heap.collect_after_turn(self.set_timer, lambda: self.chat.turn_running)

    @work(thread=True, group="ollama", exit_on_error=False)
    def recheck_ollama(self) -> None:
        """Which models a local Ollama has, asked afresh (half a second at most, usually a refused connection at
        once): on a worker thread, so the chat never waits for it."""
        models = installed_models(self.session.config, fresh=True)
        self.call_from_thread(self.ollama_answered, models)

    def ollama_answered(self, models: tuple[str, ...] | None) -> None:
        """What Ollama has now (None: it did not answer). A change shows at once: an open preset picker offers
        its models and says which presets can run, and the header says whether the current one can."""
        first, self.ollama_checked = not self.ollama_checked, True
        if models == self.ollama_models and not first:
            return
        self.ollama_models = models
        if isinstance(self.screen, PresetPicker):
            self.screen.offer_ollama(models)
        self.chat.ollama_changed()

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from chat_commands(self.chat)
        keys = key_texts(self.chat)
        yield SystemCommand("Help", f"Keys and where to find more ({keys.get('help', 'F1')})", self.action_help)


# What the first screen does not show, imported after it on the SDK's warm-up thread (or by the first action
# that needs it, if that comes sooner): Textual's Markdown (markdown-it, Pygments' lexer map) and DataTable
# are a large share of the imports, which the first screen need not wait for (bench/startup.py).
DEFERRED = (
    "moa_chat.tui.widgets.markdown",
    "moa_chat.tui.screens.help",
    "moa_chat.tui.screens.panel",
    "moa_chat.tui.screens.reference_detail",
    "moa_chat.tui.screens.side_by_side",
    "moa_chat.tui.screens.trace",
)


class WarmedUp(Message):
    """The warm-up thread is done: what is left of it is the UI thread's (MoAChatApp.on_warmed_up)."""

    def __init__(self, freeze: bool) -> None:
        super().__init__()
        self.freeze = freeze


def _import_deferred(app: MoAChatApp, *, freeze: bool) -> None:
    """On the warm-up thread: the imports and the first parse (warm_up_markdown), then the app's part, posted
    to it rather than waited for (an app that has ended meanwhile would never answer)."""
    for name in DEFERRED:
        importlib.import_module(name)
    from .widgets.markdown import warm_up_markdown

    warm_up_markdown()
    app.post_message(WarmedUp(freeze))


def _steer_typing(chat: ChatScreen, event: events.Key) -> None:
    """A printable key typed while the focus is elsewhere on the chat (a card, a tool call, nowhere) goes to
    the prompt, unless something focused takes it (a binding, or a widget that reads text)."""
    if not event.is_printable or not event.character:
        return
    focused = chat.focused
    if isinstance(focused, PromptInput):
        return
    if focused is not None and focused.check_consume_key(event.key, event.character):
        return
    if any(key in chat.active_bindings for key in event.aliases):
        return
    chat.focus_prompt()


def _terminal_open() -> bool:
    stdin = sys.__stdin__
    try:
        return stdin is not None and os.isatty(stdin.fileno())
    except (OSError, ValueError):
        return False


def run_app(app: MoAChatApp) -> int:
    """Run the chat until it ends, then close its store; the exit code."""
    app.run()
    session = app.session
    # The worker threads have been joined by now: nothing writes to the store any more.
    if session.store is not None:
        with contextlib.suppress(Exception):
            session.store.close()
    # At exit Python collects every object the UI ever made, which takes seconds on a loaded machine
    # while the shell waits for its prompt; the process is ending, so let the OS reclaim them instead.
    gc.freeze()
    return app.return_code or 0
