"""A stored reply decoded into the typed parts the chat draws: text runs, tool calls with their results, each
round's thought before what it wrote, the panel's answers, and how the turn ended."""

from __future__ import annotations

from moa_chat.engine import CallRecord
from moa_chat.llm import Usage
from moa_chat.session import ToolCallEvent
from moa_chat.session.reply_parts import PanelAnswer, ReplyEnding, Thought, stored_reply
from moa_chat.store import StoredCall, StoredTurn

CALL = {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}
LOST = {"id": "call_2", "type": "function", "function": {"name": "run_command", "arguments": "{}"}}


def turn(**changes: object) -> StoredTurn:
    calls = (
        StoredCall(CallRecord("reference", "wire:ref-a", 0, 1, "ok", Usage(10, 20, 30)), "alpha"),
        StoredCall(CallRecord("reference", "wire:ref-b", 1, 1, "failed", None, error="HTTP 500"), ""),
        StoredCall(CallRecord("aggregator", "wire:agg", 0, 1, "ok", Usage(40, 5, 45)), "", "look at the file"),
        StoredCall(CallRecord("aggregator", "wire:agg", 0, 2, "ok", Usage(60, 7, 67))),
    )
    fields: dict[str, object] = {
        "id": 1,
        "session_id": "s",
        "user_message_id": 1,
        "kind": "send",
        "preset": "wire",
        "preset_json": {
            "aggregator": {"provider": "wire", "model": "agg"},
            "reference_models": [
                {"provider": "wire", "model": "ref-a"},
                {"provider": "wire", "model": "ref-b"},
                {"provider": "wire", "model": "off", "enabled": False},
            ],
        },
        "status": "ok",
        "error": None,
        "started": 0.0,
        "seconds": 2.5,
        "calls": calls,
        **changes,
    }
    return StoredTurn(**fields)  # type: ignore[arg-type]


def test_a_stored_reply_with_a_tool_round_becomes_its_parts_in_order():
    messages = [
        {"role": "assistant", "content": "Let me look.", "tool_calls": [CALL, LOST]},
        {"role": "tool", "tool_call_id": "call_1", "content": "the file's text"},
        {"role": "assistant", "content": "It says hello."},
    ]
    parts = stored_reply(messages, turn())
    assert (parts.preset, parts.aggregator, parts.references) == ("wire", "wire:agg", 2)
    assert parts.parts == (
        Thought("look at the file", None),  # round 1's thought, above what round 1 wrote
        "Let me look.",
        ToolCallEvent("call_1", "read_file", '{"path": "a.txt"}', "done", "the file's text", iteration=1),
        ToolCallEvent("call_2", "run_command", "{}", "cancelled", None, iteration=1),  # no result was stored
        "It says hello.",
    )
    assert parts.text == "Let me look.\n\nIt says hello."
    assert parts.ending == ReplyEnding("ok", None, None, tokens=30 + 45 + 67, seconds=2.5)
    assert parts.panel == (
        PanelAnswer("wire:ref-a", "ok", "alpha", None),
        PanelAnswer("wire:ref-b", "failed", "", "HTTP 500"),
    )


def test_a_failed_turn_ends_failed_and_model_text_is_made_inert():
    messages = [{"role": "assistant", "content": "half \x1b[2Ja reply"}]
    parts = stored_reply(messages, turn(status="failed", error="wire:agg failed: HTTP 500", calls=()))
    assert parts.ending.status == "failed" and parts.ending.error == "wire:agg failed: HTTP 500"
    (text,) = parts.parts
    assert "\x1b" not in text and "2Ja reply" in text
    assert parts.text == "half \x1b[2Ja reply"  # as the conversation keeps it (what F5 copies)


def test_a_reply_stored_without_its_turn_is_shown_as_finished():
    parts = stored_reply([{"role": "assistant", "content": "hi"}], None)
    assert (parts.preset, parts.aggregator, parts.references) == ("", "?", 0)
    assert parts.parts == ("hi",) and parts.ending == ReplyEnding("ok") and parts.panel == ()
