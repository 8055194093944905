"""Driving the app in tests: build it deterministically, type into it, wait for it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from moa_chat.config import Config
from moa_chat.session import ChatSession
from moa_chat.store import SessionStore
from moa_chat.tools import Approver
from moa_chat.tui.app import MoAChatApp, SessionFactory
from moa_chat.tui.widgets.prompt_input import PromptInput
from moa_chat.tui.widgets.reply import AssistantReply
from textual.pilot import Pilot


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
