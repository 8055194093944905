"""Cut-off streams are asked again where nothing was shown: a reference (its text is never the answer), and an
aggregator's reply wherever a fresh one can be shown as one (`ask` into a pipe, held back until whole; `--json`;
a terminal, after a line on stderr). Exit 0 still promises a whole reply. Against the loopback server, through
the real openai SDK, as a user runs `moa-chat ask`."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import threading

from conftest import WIRE_CONFIG, write_config
from moa_chat.config import load_config
from moa_chat.engine import ReplyRestarted
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall
from moa_chat.session import ChatSession
from test_cli import run

FORTY_FIVE_WORDS = " ".join(f"w{n}" for n in range(45))
CUT = Reply(text=FORTY_FIVE_WORDS, end_after=4)  # "w0 w1 w2 w3", then the stream ends with no finish reason


def retrying_config(home, llm_server, retries: int = 2, extra: str = ""):
    """The wire preset with retries on (the shared wire config switches them off)."""
    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra=extra).replace(
        "max_retries: 0", f"max_retries: {retries}"
    )
    return load_config(write_config(home, text))


# --------------------------------------------------------------------------- references


def test_a_cut_off_reference_is_asked_again_and_its_whole_answer_reaches_the_aggregator(home, llm_server):
    retrying_config(home, llm_server)
    llm_server.script("ref-b", [Reply(text="a fragment that never ends properly", end_after=2), Reply(text="whole b")])
    result = run("ask", "q", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [r["status"] for r in data["references"]] == ["ok", "ok", "ok"]
    assert data["references"][1]["text"] == "whole b"
    assert len(llm_server.requests_for("ref-b")) == 2
    assert "↻ wire:ref-b: cut off" in result.stderr  # the retry is told, as any other
    guidance = llm_server.requests_for("agg")[0].messages[-1]["content"]
    assert "whole b" in guidance and "a fragment" not in guidance


def test_a_reference_cut_off_every_time_fails_after_max_retries(home, llm_server):
    retrying_config(home, llm_server, retries=1)
    llm_server.script("ref-b", Reply(text="a fragment that never ends properly", end_after=2))
    result = run("ask", "q", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [r["status"] for r in data["references"]] == ["ok", "failed", "ok"]
    assert len(llm_server.requests_for("ref-b")) == 2  # the first request and one retry
    guidance = llm_server.requests_for("agg")[0].messages[-1]["content"]
    assert "a fragment" not in guidance and "wire:ref-b (failed)" in guidance


def test_a_cut_off_reference_retrying_is_still_not_waited_for_past_the_quorum(home, llm_server):
    """The retry is the fan-out's like the first request: once the quorum has answered, a reference still on
    its second request is left (late), its stream closed, and the turn does not wait for it."""
    retrying_config(home, llm_server, extra="      quorum: 2")
    asked_again = threading.Event()
    b_replies = iter([Reply(text="a fragment that never ends properly", end_after=2), Reply(text="b", delay=30)])

    def ref_b(_body: object) -> Reply:
        reply = next(b_replies)
        if reply.delay:
            asked_again.set()
        return reply

    def after_b_is_asked_again(_body: object) -> Reply:
        asked_again.wait(20)  # the server's own thread: the quorum is reached only while b is on its retry
        return Reply(text="ok")

    llm_server.script("ref-b", ref_b)
    llm_server.script("ref-a", after_b_is_asked_again)
    llm_server.script("ref-c", after_b_is_asked_again)
    result = run("ask", "q", "--json", timeout=25)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [r["status"] for r in data["references"]] == ["ok", "late", "ok"]
    assert len(llm_server.requests_for("ref-b")) == 2


def test_a_reference_the_provider_stopped_early_reaches_the_aggregator_marked(wire_config, llm_server):
    wire_config()
    llm_server.script("ref-b", Reply(text="the start of b's answer", finish_reason="length"))
    llm_server.script("ref-c", Reply(text="the start of c's answer", finish_reason="content_filter"))
    result = run("ask", "q")
    assert result.returncode == 0, result.stderr
    guidance = llm_server.requests_for("agg")[0].messages[-1]["content"]
    assert "[Reference 1 — wire:ref-a]\n" in guidance
    assert "[Reference 2 — wire:ref-b (stopped early: max_tokens reached)]\n\nthe start of b's answer" in guidance
    assert "[Reference 3 — wire:ref-c (stopped early by the provider's content filter)]\n" in guidance


# --------------------------------------------------------------------------- the aggregator, in `ask`


def test_ask_into_a_pipe_asks_a_cut_off_reply_again_and_writes_only_the_whole_one(home, llm_server):
    retrying_config(home, llm_server)
    llm_server.script("agg", [CUT, Reply(text="the whole reply")])
    result = run("ask", "q")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "the whole reply\n"  # never the cut-off half before it
    assert len(llm_server.requests_for("agg")) == 2
    assert "↻ wire:agg: cut off: the stream ended without a finish reason after 11 characters — asking again\n" in (
        result.stderr
    )


def test_a_reply_cut_off_again_after_the_retry_exits_1_with_its_text(home, llm_server):
    retrying_config(home, llm_server)
    llm_server.script("agg", CUT)
    result = run("ask", "q")
    assert result.returncode == 1
    assert result.stdout == "w0 w1 w2 w3\n"  # once: the second attempt's text, not both
    assert len(llm_server.requests_for("agg")) == 2  # asked again once, not max_retries times
    assert "moa-chat: error: the reply from wire:agg was cut off" in result.stderr


def test_ask_json_asks_a_cut_off_reply_again_invisibly(home, llm_server):
    retrying_config(home, llm_server)
    llm_server.script("agg", [CUT, Reply(text="the whole reply")])
    result = run("ask", "q", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "ok" and data["reply"] == "the whole reply" and data["error"] is None


def test_ask_into_a_pipe_writes_the_reply_once_the_turn_has_ended(home, llm_server):
    """Held back until whole: when the first line reaches the reader, the provider had already finished."""
    retrying_config(home, llm_server)
    llm_server.script("agg", Reply(text="first line\n" + "more words " * 60, piece_delay=0.005))
    process = subprocess.Popen(
        [sys.executable, "-m", "moa_chat", "ask", "q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "first line\n"
        assert llm_server.requests_for("agg")[-1].finished_at is not None
        assert not llm_server.requests_for("agg")[-1].disconnected
        process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0


def test_ask_stream_into_a_pipe_streams_and_never_starts_a_second_reply(home, llm_server):
    """--stream writes as it arrives, so a reply cut off after text stays the only one (exit 1, as before)."""
    retrying_config(home, llm_server)
    llm_server.script("agg", [CUT, Reply(text="the whole reply")])
    result = run("ask", "q", "--stream")
    assert result.returncode == 1
    assert result.stdout == "w0 w1 w2 w3\n"
    assert len(llm_server.requests_for("agg")) == 1


def test_ask_at_a_terminal_starts_a_fresh_reply_after_a_line_on_stderr(home, llm_server):
    retrying_config(home, llm_server)
    llm_server.script("agg", [CUT, Reply(text="the whole reply")])
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "moa_chat", "ask", "q"], stdout=follower, stderr=subprocess.PIPE, text=True
    )
    os.close(follower)
    out = b""
    try:
        while True:  # until the terminal's other end closes (the process has exited)
            select.select([leader], [], [], 60)
            try:
                piece = os.read(leader, 4096)
            except OSError:  # EIO: no process holds the terminal any more
                break
            if not piece:
                break
            out += piece
        err = process.stderr.read() if process.stderr else ""
        process.wait(timeout=60)
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert out.decode().replace("\r\n", "\n") == "w0 w1 w2 w3\nthe whole reply\n"
    assert "asking again; the reply below starts afresh" in err


# --------------------------------------------------------------------------- the core, for the chat


def test_the_session_asks_a_cut_off_reply_again_only_when_the_front_end_opts_in(home, llm_server):
    config = retrying_config(home, llm_server)
    llm_server.script("agg", [CUT, CUT, Reply(text="the whole reply")])
    session = ChatSession(config, config.presets["wire"])
    assert session.send("q").status == "cut_off"  # a front end that cannot show a fresh reply: as before
    assert len(llm_server.requests_for("agg")) == 1

    events: list[object] = []
    session = ChatSession(config, config.presets["wire"], restart_cut_reply=True)
    result = session.send("again", observer=events.append)
    assert result.status == "ok" and result.text == "the whole reply"
    (restarted,) = [e for e in events if isinstance(e, ReplyRestarted)]
    assert restarted.text == "w0 w1 w2 w3" and restarted.label == "wire:agg" and "cut off" in restarted.reason
    assert session.messages[-1] == {"role": "assistant", "content": "the whole reply"}


# --------------------------------------------------------------------------- the aggregator, before any text


def test_a_stream_cut_inside_a_tool_call_is_asked_again_and_the_tool_runs_once(home, llm_server, tmp_path):
    """A clean end of stream half-way through the aggregator's tool call: nothing was shown and no tool has run,
    so the same request goes again, and the whole call then runs once."""
    retrying_config(home, llm_server)
    listing = ScriptedToolCall("list_directory", json.dumps({"path": "."}), id="c1")
    llm_server.script(
        "agg",
        [
            Reply(tool_calls=[listing], cut_tool_calls=True),
            Reply(tool_calls=[listing]),
            Reply(text="The folder is listed."),
        ],
    )
    result = run("ask", "what is in this folder?")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "The folder is listed."
    first, again, last = llm_server.requests_for("agg")
    assert again.messages == first.messages  # the cut call left nothing behind
    assert [m["tool_call_id"] for m in last.messages if m["role"] == "tool"] == ["c1"]
    assert "↻ wire:agg: cut off" in result.stderr


def test_a_malformed_chunk_before_any_text_is_asked_again(home, llm_server):
    retrying_config(home, llm_server)
    llm_server.script("agg", [Reply(text=FORTY_FIVE_WORDS, garble_after=0), Reply(text="the whole reply")])
    result = run("ask", "q")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "the whole reply"
    assert "↻ wire:agg: the provider sent a malformed chunk" in result.stderr
    assert "JSONDecodeError" not in result.stderr


def test_a_malformed_chunk_that_persists_fails_saying_so(home, llm_server):
    retrying_config(home, llm_server, retries=1)
    llm_server.script("agg", Reply(text=FORTY_FIVE_WORDS, garble_after=0))
    result = run("ask", "q")
    assert result.returncode == 1
    assert "wire:agg failed: the provider sent a malformed chunk" in result.stderr
    assert "JSONDecodeError" not in result.stderr and "Expecting" not in result.stderr
    assert len(llm_server.requests_for("agg")) == 2


def test_a_malformed_chunk_after_text_is_asked_again_as_a_fresh_reply(home, llm_server):
    """Into a pipe the reply is written once whole, so a garbled stream after text is asked again, as a cut is."""
    retrying_config(home, llm_server)
    llm_server.script("agg", [Reply(text=FORTY_FIVE_WORDS, garble_after=4), Reply(text="the whole reply")])
    result = run("ask", "q")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "the whole reply\n"
