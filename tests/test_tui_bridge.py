"""The thread → UI bridge keeps reply text and events in order, whatever the UI's pace."""

from __future__ import annotations

from moa_chat.engine import ReplyDelta
from moa_chat.session import ToolCallEvent
from moa_chat.tui.bridge import CoreEvent, ReplyText, TurnBridge


def _render(bridge: TurnBridge, posted: list, upto: int | None = None) -> list:
    """Play posted messages the way the app does; returns what the log would show, in order."""
    shown = []
    for message in posted[:upto]:
        if isinstance(message, ReplyText):
            text = message.text if message.text is not None else bridge.take(message.epoch)
            if text:
                shown.append(text)
        elif isinstance(message, CoreEvent):
            shown.append(f"<{message.event.name}>")
    return shown


def test_text_after_a_tool_never_jumps_ahead_of_it():
    posted: list = []
    bridge = TurnBridge(posted.append)
    bridge(ReplyDelta("Let me "))
    # The UI drains the first wake-up now: it sees "Let me ".
    assert bridge.take(posted[0].epoch) == "Let me "
    bridge(ReplyDelta("check."))  # wakes again; the UI is busy and does not get to it yet
    bridge(ToolCallEvent("c1", "read_file", "{}", "requested"))
    bridge(ReplyDelta("After the tool."))  # a new epoch: its own wake-up
    shown = _render(bridge, posted[1:])
    assert shown == ["check.", "<read_file>", "After the tool."]


def test_a_fast_stream_wakes_the_ui_once_per_drain():
    posted: list = []
    bridge = TurnBridge(posted.append)
    for i in range(1000):
        bridge(ReplyDelta(f"t{i} "))
    assert len(posted) == 1  # one wake-up for a thousand tokens the UI had not drained yet
    assert bridge.take(posted[0].epoch) == "".join(f"t{i} " for i in range(1000))
