"""What the chat does with a reply: copy it, or its last code block, and open the views of the panel behind
it (what each reference answered; their answers side by side). Each says so when there is no reply yet."""

from __future__ import annotations

from typing import Any

from textual.screen import Screen

from ..text.wording import plural
from .host import Copier
from .widgets.reply import AssistantReply


def copy_reply(screen: Screen[Any], clipboard: Copier, reply: AssistantReply | None) -> None:
    if reply is None or not reply.text:
        screen.notify("No reply to copy yet.", severity="warning")
        return
    clipboard.copy_text(reply.text, f"the last reply ({len(reply.text):,} characters)")


def copy_code(screen: Screen[Any], clipboard: Copier, reply: AssistantReply | None) -> None:
    code = reply.last_code_block() if reply else None
    if code is None:
        screen.notify("The last reply has no code block.", severity="warning")
        return
    lines = code.count("\n") + (not code.endswith("\n"))
    clipboard.copy_text(code, f"the last code block ({plural(lines, 'line')})")


def show_panel(screen: Screen[Any], reply: AssistantReply | None) -> None:
    """What each reference answered for `reply`."""
    if reply is None:
        screen.notify("No reply yet.", severity="warning")
        return
    from .screens.panel import PanelAnswers  # imported when first needed: see DEFERRED in tui/app.py

    screen.app.clear_notifications()  # what was said about the chat (a copy) would cover the answers
    screen.app.push_screen(PanelAnswers(reply.panel, reply.aggregator))


def show_side_by_side(screen: Screen[Any], reply: AssistantReply | None) -> None:
    """The references' answers to `reply`, side by side."""
    if reply is None:
        screen.notify("No reply yet: the references' answers show here after a turn.", severity="warning")
        return
    from .screens.side_by_side import SideBySide

    screen.app.clear_notifications()  # what was said about the chat (a copy) would cover the columns
    screen.app.push_screen(SideBySide(reply.panel, reply.aggregator))
