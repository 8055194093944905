"""Half answers are never presented as whole: streams cut without a finish reason, replies the provider
stopped early, bodies that are not chat at all, empty answers, tool loops that never finish. Each against
the loopback server, through the real openai SDK, as a user runs `moa-chat ask`."""

from __future__ import annotations

import json

import pytest
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall
from moa_chat.session import ChatSession
from moa_chat.store import SessionStore
from moa_chat.tui.widgets.reply import AssistantReply
from moa_chat.tui.widgets.sidebar import ReferenceSidebar
from test_cli import run
from tui_helpers import make_app, run_turn

FORTY_FIVE_WORDS = " ".join(f"w{n}" for n in range(45))


def test_an_aggregator_stream_cut_without_a_finish_reason_exits_1_and_keeps_the_text(wire_config, llm_server, home):
    wire_config()
    llm_server.script("agg", Reply(text=FORTY_FIVE_WORDS, end_after=4))
    result = run("ask", "q")
    assert result.returncode == 1
    assert result.stdout == "w0 w1 w2 w3\n"  # the text that arrived stays, ended with a newline
    assert (
        "the reply from wire:agg was cut off: the stream ended without a finish reason after 11 characters"
        in result.stderr
    )
    (turn,) = SessionStore(home / "sessions.db").turns(json.loads(run("sessions", "--json").stdout)[0]["id"])
    assert turn.status == "cut_off" and not turn.complete
    (aggregator,) = [c.record for c in turn.calls if c.record.role == "aggregator"]
    assert aggregator.status == "cut_off" and aggregator.finish_reason is None


def test_a_reference_cut_off_is_a_failed_reference_and_its_fragment_stays_out(wire_config, llm_server, home):
    wire_config()
    llm_server.script("ref-b", Reply(text="a fragment that never ends properly", end_after=2))
    result = run("ask", "q", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [r["status"] for r in data["references"]] == ["ok", "failed", "ok"]
    assert "cut off" in data["references"][1]["error"]
    guidance = llm_server.requests_for("agg")[0].messages[-1]["content"]
    assert "a fragment" not in guidance and "wire:ref-b (failed)" in guidance


def test_a_truncated_tool_call_never_runs(wire_config, llm_server, home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    wire_config()
    note = tmp_path / "note.md"
    call = ScriptedToolCall("write_file", json.dumps({"path": "note.md", "content": "x" * 200}), id="call_1")
    llm_server.script("agg", Reply(tool_calls=[call], cut_tool_calls=True))
    result = run("ask", "write a note", "--yes")
    assert result.returncode == 1
    assert "no answer" in result.stderr or "cut off" in result.stderr
    assert "write_file" not in result.stderr  # no tool line: it never ran
    assert not note.exists()
    assert len(llm_server.requests_for("agg")) == 1


@pytest.mark.parametrize(
    ("finish", "words"),
    [("length", "stopped: max_tokens reached"), ("content_filter", "stopped by the provider's content filter")],
)
def test_a_reply_the_provider_stopped_early_is_whole_but_says_so(wire_config, llm_server, home, finish, words):
    wire_config()
    llm_server.script("agg", Reply(text="the start of a long answer", finish_reason=finish))
    result = run("ask", "q")
    assert result.returncode == 0
    assert result.stdout == "the start of a long answer\n"
    assert f"moa-chat: warning: the reply is whole but {words}" in result.stderr


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(raw_body="<html><body>502 Bad Gateway</body></html>"), "no answer: the stream ended before any reply"),
        (Reply(text=FORTY_FIVE_WORDS, end_after=0), "no answer: the stream ended before any reply"),
        (Reply(text=""), "returned an empty answer (finish reason: stop)"),
        (
            Reply(text="one two three", end_after=1),
            "cut off: the stream ended without a finish reason after 3 characters",
        ),
    ],
    ids=["html-body", "no-chunks", "empty-content", "cut-after-one-chunk"],
)
def test_no_empty_or_partial_reply_exits_0(wire_config, llm_server, home, reply, reason):
    wire_config()
    llm_server.script("agg", reply)
    result = run("ask", "q")
    assert result.returncode == 1, result.stdout
    assert reason in result.stderr


async def test_the_chat_marks_a_cut_off_reply_on_the_reply_and_the_card(wire_config, llm_server, home):
    config = wire_config()
    llm_server.script("agg", Reply(text=FORTY_FIVE_WORDS, end_after=4))
    app = make_app(config, "wire")
    async with app.run_test(size=(110, 36)) as pilot:
        await run_turn(pilot, "q")
        reply = app.query_one(AssistantReply)
        assert reply.text == "w0 w1 w2 w3" and reply.has_class("-cut_off")
        assert "cut off: the stream ended without a finish reason" in str(reply.query_one(".reply-warning").render())
        assert str(reply.query_one(".reply-meta").render()).startswith("cut off · wire")
        assert app.query_one(ReferenceSidebar).aggregator_card.status == "cut_off"


def test_a_cut_off_reply_stays_in_the_conversation_marked_incomplete(wire_config, llm_server, home):
    config = wire_config()
    llm_server.script("agg", [Reply(text=FORTY_FIVE_WORDS, end_after=4), Reply(text="whole this time")])
    session = ChatSession(config, config.preset("wire"), store=SessionStore(home / "sessions.db"))
    assert session.send("q").status == "cut_off"
    assert session.messages[-1] == {"role": "assistant", "content": "w0 w1 w2 w3"}
    assert session.rerun(aggregator_only=True).text == "whole this time"  # retry on the stored references
    assert [t.status for t in session.store.turns(session.id)] == ["cut_off", "ok"]


def test_snapshot_a_cut_off_reply(snap_compare, wire_config, llm_server, home, frozen_clock):
    from tui_helpers import settle

    config = wire_config()
    llm_server.script("agg", Reply(text="Start with a **profile**: run cProfile on the slow path and", end_after=9))
    app = make_app(config, "wire")

    async def run_before(pilot):
        await run_turn(pilot, "Why is my script slow?")
        await settle(pilot)

    assert snap_compare(app, terminal_size=(110, 24), run_before=run_before)
