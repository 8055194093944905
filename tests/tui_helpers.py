"""Driving the app in tests: build it deterministically, type into it, wait for it; in-process with Pilot, or
as a process of its own in a real terminal (tmux)."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable

import pytest
from moa_chat.config import Config
from moa_chat.session import ChatSession
from moa_chat.store import SessionStore
from moa_chat.tools import Approver
from moa_chat.tui.app import MoAChatApp, SessionFactory
from moa_chat.tui.screens.approval import ApprovalScreen
from moa_chat.tui.widgets.prompt_input import PromptInput
from moa_chat.tui.widgets.reply import AssistantReply
from textual.pilot import Pilot
from waiting import DEADLINE
from waiting import wait_until as wait_for_state


def make_app(config: Config, preset: str, **kwargs: object) -> MoAChatApp:
    app = MoAChatApp(config, config.preset(preset), theme="textual-dark", remember_theme=False, **kwargs)
    app.animation_level = "none"  # static spinners: snapshots must not depend on timer ticks
    return app


def stored_session(
    config: Config, store: SessionStore, session_id: str | None = None, preset: str = "wire"
) -> SessionFactory:
    """The app's session (MoAChatApp's `session`): saved in `store`, continuing `session_id` if given."""

    def build(approver: Approver, *, restart_cut_reply: bool) -> ChatSession:
        session = ChatSession(
            config, config.preset(preset), approver=approver, store=store, restart_cut_reply=restart_cut_reply
        )
        if session_id:
            session.open(session_id)
        return session

    return build


async def wait_until(
    pilot: Pilot, predicate: Callable[[], bool], timeout: float = 10.0, describe: Callable[[], str] | str | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            if callable(describe):
                describe = describe()
            raise AssertionError(f"timed out waiting for {describe or getattr(predicate, '__name__', 'a condition')}")
        await asyncio.sleep(0.02)
        await pilot.pause()


async def settle(pilot: Pilot) -> None:
    """Let pending messages and layout run, then stop the cursor blinking (snapshots)."""
    pilot.app.query_one(PromptInput).cursor_blink = False
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


async def send(pilot: Pilot, text: str) -> None:
    prompt = pilot.app.query_one(PromptInput)
    prompt.focus()
    prompt.load_text(text)
    await pilot.press("enter")


async def run_turn(pilot: Pilot, text: str, timeout: float = 15.0) -> None:
    """Send a prompt and wait until its reply has finished (whatever the outcome)."""
    app = pilot.app
    before = len(app.query(AssistantReply))
    await send(pilot, text)

    def finished() -> bool:
        replies = app.query(AssistantReply)
        return len(replies) > before and replies.last().finished and not app.chat.turn_running

    await wait_until(pilot, finished, timeout=timeout)
    await pilot.pause()


def record_statuses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every status the replies' headers show from now on, in order (a status can be gone before a poll sees it)."""
    shown: list[str] = []
    original = AssistantReply.set_status

    def set_status(self: AssistantReply, text: str | None) -> None:
        if text:
            shown.append(text)
        original(self, text)

    monkeypatch.setattr(AssistantReply, "set_status", set_status)
    return shown


class Tmux:
    """A tmux server of the test's own (`socket`) showing one session (`session`): keys go in with send-keys,
    the screen comes back with capture-pane."""

    def __init__(self, socket: str, session: str) -> None:
        self.socket, self.session = socket, session

    def __call__(self, *args: str, check: bool = True) -> str:
        result = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10, check=check
        )
        return result.stdout

    def display(self, fmt: str) -> str:
        """tmux's `display -p FMT` for the session's pane (#{pane_pid}, #{pane_dead}, #{alternate_on} ...)."""
        return self("display", "-p", "-t", self.session, fmt).strip()

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", self.session)

    def keys(self, *keys: str) -> None:
        """Keys by tmux's names (Enter, C-q, S-F3 ...)."""
        self("send-keys", "-t", self.session, *keys)

    def type(self, text: str, *, enter: bool = True) -> None:
        """`text` as typed, then Enter (unless told not to)."""
        self("send-keys", "-t", self.session, "-l", text)
        if enter:
            self.keys("Enter")

    def wait_until(self, shown: Callable[[str], bool], what: str, timeout: float = DEADLINE) -> str:
        """The screen, once `shown(screen)` holds."""

        def screen_if_shown() -> str:
            screen = self.screen()
            return screen if shown(screen) else ""

        return wait_for_state(screen_if_shown, what, timeout=timeout, interval=0.1, show=self.screen)

    def wait_for(self, text: str, timeout: float = DEADLINE) -> str:
        """The screen, once `text` is on it."""
        return self.wait_until(lambda screen: text in screen, f"{text!r} on the screen", timeout)

    def answer_approval(self, key: str) -> None:
        """Answer the approval dialog with letter `key` once letters decide there.

        A letter decides once the keyboard has been quiet for ApprovalScreen.QUIET_SECONDS since the dialog was
        mounted, by the app's monotonic clock. The dialog is mounted before it is drawn, and this process reads
        the same clock (CLOCK_MONOTONIC is the machine's), so a key sent that long after the dialog is seen is
        handled armed, however late the loaded app reads it. The pane shows nothing when it arms to wait for."""
        self.wait_for("Allow once")
        seen = time.monotonic()
        wait_for_state(
            lambda: time.monotonic() - seen >= ApprovalScreen.QUIET_SECONDS, "the approval dialog's quiet period"
        )
        self.keys(key)

    def session_ended(self) -> None:
        """Waits until the session is gone (its program exited and tmux closed its window)."""
        wait_for_state(
            lambda: self.session not in self("list-sessions", check=False), f"the tmux session {self.session!r} to end"
        )

    def kill_server(self) -> None:
        self("kill-server", check=False)
