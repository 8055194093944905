"""The moa-chat Textual app: global keys, theme and keymap. The chat itself is a ChatScreen."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterable
from importlib.resources import files
from pathlib import Path, PurePath
from typing import Any

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.theme import Theme

from ..config import Config, Preset
from ..config.settings import load_settings, save_setting
from ..session import ChatSession
from .commands import PresetCommands
from .keys import declared_bindings, help_rows, key_texts
from .screens.chat import ChatScreen
from .screens.help import HelpScreen

STYLESHEETS = ("app.tcss", "chat.tcss", "sidebar.tcss", "prompt.tcss", "modals.tcss")


def stylesheet_paths() -> list[str | PurePath]:
    folder = files("moa_chat.styles")
    return [Path(str(folder / name)) for name in STYLESHEETS]


class MoAChatApp(App[int]):
    TITLE = "moa-chat"
    CSS_PATH = stylesheet_paths()
    COMMANDS = App.COMMANDS | {PresetCommands}
    BINDINGS = [
        Binding("f1", "help", "Help", id="help", tooltip="keys and where to find more"),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True, tooltip="quit"),
    ]

    # Under 120 columns the screen gets -narrow and the sidebar slims down (sidebar.tcss).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]

    def __init__(
        self,
        config: Config,
        preset: Preset,
        *,
        notice: str | None = None,
        theme: str | None = None,
        remember_theme: bool = True,
        session: ChatSession | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.session = session or ChatSession(config, preset)
        self.notice = notice
        self._remember_theme = remember_theme
        if config.keymap:
            self.set_keymap(config.keymap)
        chosen = theme or load_settings().get("theme")
        if isinstance(chosen, str) and chosen in self.available_themes:
            self.theme = chosen

    @property
    def chat(self) -> ChatScreen:
        """The chat, wherever it sits in the screen stack (a modal may be on top of it)."""
        for screen in reversed(self.screen_stack):
            if isinstance(screen, ChatScreen):
                return screen
        raise LookupError("the chat screen is not mounted yet")

    def get_default_screen(self) -> ChatScreen:
        return ChatScreen(self.session, notice=self.notice)

    def on_mount(self) -> None:
        self.theme_changed_signal.subscribe(self, self._on_theme_changed)
        # A closed terminal (SIGHUP) or a kill (SIGTERM) ends the app the way Ctrl+Q does: the turn is
        # cancelled, commands and MCP servers stop, and the terminal gets its screen, mouse and cursor back.
        loop = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(number, self.exit)

    def _on_theme_changed(self, theme: Theme) -> None:
        if self._remember_theme:
            save_setting("theme", theme.name)

    def action_help(self) -> None:
        chat = self.chat
        ids = [b.id for b in declared_bindings(chat) if b.id]
        self.push_screen(HelpScreen(help_rows(chat), ids))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from self.chat.system_commands()
        keys = key_texts(self.chat)
        yield SystemCommand("Help", f"Keys and where to find more ({keys.get('help', 'F1')})", self.action_help)


def run_app(config: Config, session: ChatSession, *, notice: str | None = None) -> int:
    app = MoAChatApp(config, session.preset, notice=notice, session=session)
    app.run()
    return app.return_code or 0
