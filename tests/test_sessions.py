"""Sessions as a user meets them: every turn is stored, and can be listed, continued, exported and resumed;
a kill mid-stream loses at most the last second; no key ever reaches the database."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading

from moa_chat.providers.loopback_server import Reply
from moa_chat.store import SessionStore
from test_cli import run

FAKE_KEY = "sk-moa-test-4f1d9a7c2b8e6d5a3f0e1c9b7a6d5e4f"


def test_ask_stores_its_turn_and_sessions_lists_it(home, wire_config):
    wire_config()
    result = run("ask", "What is a CRDT?")
    assert result.returncode == 0, result.stderr
    listed = run("sessions", "--json")
    (session,) = json.loads(listed.stdout)
    assert {"id", "title", "updated", "preset", "turns"} <= set(session)
    assert session["title"] == "What is a CRDT?" and session["preset"] == "wire" and session["turns"] == 1
    assert f"session {session['id']}" in result.stderr
    text = run("sessions").stdout
    assert session["id"] in text and "What is a CRDT?" in text


def test_continue_sends_the_whole_conversation(home, wire_config, llm_server):
    wire_config()
    llm_server.script("agg", [Reply(text="Alice is 30."), Reply(text="You asked about Alice.")])
    assert run("ask", "Remember: Alice is 30.").returncode == 0
    second = run("ask", "-c", "What did I ask about?")
    assert second.returncode == 0, second.stderr
    sent = llm_server.requests_for("agg")[-1].messages
    assert [m["content"] for m in sent[:3]] == ["Remember: Alice is 30.", "Alice is 30.", "What did I ask about?"]
    (session,) = json.loads(run("sessions", "--json").stdout)
    assert session["turns"] == 2
    # --session by a prefix of the id, and global options before the subcommand.
    third = run("--session", session["id"][:6], "ask", "And then?")
    assert third.returncode == 0, third.stderr
    assert len(llm_server.requests_for("agg")[-1].messages) == 6  # 5 before + guidance
    assert json.loads(run("sessions", "--json").stdout)[0]["turns"] == 3


def test_global_options_work_before_and_after_the_subcommand(home, wire_config):
    wire_config()
    before = run("--preset", "demo", "ask", "hi", "--no-save")
    after = run("ask", "hi", "--preset", "demo", "--no-save")
    assert before.returncode == after.returncode == 0
    assert "preset demo" in before.stderr and "preset demo" in after.stderr
    assert json.loads(run("sessions", "--json").stdout) == []  # --no-save stored nothing
    missing = run("--config", str(home / "nope.yaml"), "presets")
    assert missing.returncode == 2 and "nope.yaml" in missing.stderr


def test_export_markdown_and_json(home, wire_config, tmp_path):
    wire_config()
    assert run("ask", "Explain CRDTs").returncode == 0
    (session,) = json.loads(run("sessions", "--json").stdout)
    markdown = run("export", session["id"]).stdout
    assert markdown.startswith("# Explain CRDTs")
    assert "## You\n\nExplain CRDTs" in markdown and "ok from agg" in markdown
    assert "<details>" in markdown and "### wire:ref-a (ok)" in markdown and "ok from ref-b" in markdown
    out = tmp_path / "session.json"
    assert run("export", session["id"], "--format", "json", "-o", str(out)).returncode == 0
    data = json.loads(out.read_text())
    assert data["session"]["id"] == session["id"]
    assert [m["role"] for m in data["messages"]] == ["user", "assistant"]
    (turn,) = data["turns"]
    assert turn["status"] == "ok" and turn["preset"]["name"] == "wire"
    roles = sorted(c["role"] for c in turn["calls"])
    assert roles == ["aggregator", "reference", "reference", "reference"]
    assert {c["text"] for c in turn["calls"] if c["role"] == "reference"} == {
        "ok from ref-a",
        "ok from ref-b",
        "ok from ref-c",
    }
    unknown = run("export", "ffffffff")
    assert unknown.returncode == 2 and "no session 'ffffffff'" in unknown.stderr


def test_a_kill_mid_stream_keeps_the_prompt_and_the_partial_reply(home, wire_config, llm_server):
    wire_config()
    words = " ".join(f"word{n}" for n in range(400))
    llm_server.script("agg", Reply(text=words, piece_delay=0.01))
    process = subprocess.Popen(
        [sys.executable, "-m", "moa_chat", "ask", "Tell me a long story", "--stream"],  # into the pipe as it comes
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    assert process.stdout is not None
    received = b""
    while received.count(b"word") < 200:  # about two seconds of streamed text
        chunk = os.read(process.stdout.fileno(), 4096)
        assert chunk, "the reply stopped before the kill"
        received += chunk
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    path = home / "sessions.db"
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store = SessionStore(path)
    (session,) = store.sessions()
    messages = store.path(session.id)
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[0].content == "Tell me a long story"
    partial = messages[1]
    assert partial.partial and partial.content.startswith("word0 word1")
    assert partial.content.count("word") >= 50  # saved while streaming: at most the last second is missing
    assert words.startswith(partial.content)
    (turn,) = store.turns(session.id)
    assert turn.status == "running" and not turn.complete  # nobody finished it
    # Continuing it: the turn is marked interrupted, and the partial reply is part of the context.
    resumed = run("ask", "-c", "go on")
    assert resumed.returncode == 0, resumed.stderr
    assert store.turns(session.id)[0].status == "interrupted"
    sent = llm_server.requests_for("agg")[-1].messages
    assert sent[1]["role"] == "assistant" and sent[1]["content"].startswith("word0")


def test_no_key_reaches_the_database_or_an_export(home, llm_server, tmp_path, monkeypatch):
    monkeypatch.setenv("WIRE_API_KEY", FAKE_KEY)
    from conftest import WIRE_CONFIG, write_config

    config = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="").replace(
        "    max_retries: 0", "    max_retries: 0\n    api_key_env: WIRE_API_KEY"
    )
    write_config(home, config)
    assert run("ask", "a turn that works").returncode == 0
    llm_server.script("agg", Reply(status=401, error="invalid key"))
    assert run("ask", "-c", "a turn that fails").returncode == 1
    llm_server.script("agg", Reply(status=200, text="fine again"))
    (session,) = json.loads(run("sessions", "--json").stdout)
    exported = run("export", session["id"], "--format", "json").stdout + run("export", session["id"]).stdout
    assert llm_server.requests and all(r.authorization for r in llm_server.requests)  # the key was used
    files = [p for p in home.rglob("*") if p.is_file()]
    assert any(p.name == "sessions.db" for p in files)
    for path in files:
        assert FAKE_KEY.encode() not in path.read_bytes(), path
    assert FAKE_KEY not in exported


def stored_session(home, config):
    from moa_chat.session import ChatSession

    return ChatSession(config, config.preset("wire"), store=SessionStore(home / "sessions.db"))


def test_regenerate_asks_only_the_aggregator_and_keeps_both_versions(home, wire_config, llm_server):
    config = wire_config()
    llm_server.script("agg", [Reply(text="first answer"), Reply(text="second answer")])
    session = stored_session(home, config)
    assert session.send("the question").status == "ok"
    references_before = [r for r in llm_server.requests if r.model.startswith("ref-")]
    result = session.rerun(aggregator_only=True)
    assert result.status == "ok" and result.text == "second answer"
    assert [r for r in llm_server.requests if r.model.startswith("ref-")] == references_before  # none asked again
    guidance = llm_server.requests_for("agg")[-1].messages[-1]["content"]
    assert "ok from ref-a" in guidance and "ok from ref-c" in guidance  # the stored answers were used
    assert [m["content"] for m in session.messages] == ["the question", "second answer"]
    assert session.versions() == (2, 2)
    assert result.usage.total_tokens == llm_server.requests_for("agg")[-1].usage_sent["total_tokens"]
    session.switch_version(-1)
    assert session.versions() == (1, 2)
    assert [m["content"] for m in session.messages] == ["the question", "first answer"]
    turns = session.store.turns(session.id)
    assert [t.kind for t in turns] == ["ask", "regenerate"]
    assert session.store.session(session.id).turns == 1  # one exchange, in two versions
    assert {c.text for c in turns[1].references} == {"ok from ref-a", "ok from ref-b", "ok from ref-c"}


def test_reask_runs_the_whole_turn_again(home, wire_config, llm_server):
    config = wire_config()
    llm_server.script("agg", [Reply(status=500, error="flaky"), Reply(text="it worked")])
    session = stored_session(home, config)
    assert session.send("try this").status == "failed"
    result = session.rerun(aggregator_only=False)
    assert result.status == "ok" and result.text == "it worked"
    assert len(llm_server.requests_for("ref-a")) == 2
    assert [m["content"] for m in session.messages] == ["try this", "it worked"]
    assert session.versions() == (1, 1)  # the failed attempt wrote no reply to keep as a version
    assert [t.status for t in session.store.turns(session.id)] == ["failed", "ok"]


def test_edit_creates_a_branch_and_keeps_the_old_one(home, wire_config, llm_server):
    config = wire_config()
    llm_server.script("agg", [Reply(text="about cats"), Reply(text="about dogs"), Reply(text="dogs again")])
    session = stored_session(home, config)
    session.send("tell me about cats")
    session.send("more")
    session.switch_version(0)
    before = [m["content"] for m in session.messages]
    assert before == ["tell me about cats", "about cats", "more", "about dogs"]
    result = session.edit("more about dogs")
    assert result.text == "dogs again"
    assert [m["content"] for m in session.messages] == [
        "tell me about cats",
        "about cats",
        "more about dogs",
        "dogs again",
    ]
    # The model saw the edited prompt in place of the old one.
    sent = [m["content"] for m in llm_server.requests_for("agg")[-1].messages if m["role"] == "user"]
    assert sent[:2] == ["tell me about cats", "more about dogs"]
    assert session.versions() == (2, 2)
    session.switch_version(-1)
    assert [m["content"] for m in session.messages] == before  # the old branch is intact
    store = session.store
    prompts = [m for m in store.children(store.path(session.id)[1].id, session.id)]
    assert [m.content for m in prompts] == ["more", "more about dogs"]


def test_a_reply_with_a_split_surrogate_is_saved_and_send_does_not_raise(home, wire_config, llm_server):
    config = wire_config()
    llm_server.script("agg", Reply(text="smile \ud83d\ude00 here", pieces=["smile \ud83d", "\ude00 here"]))
    session = stored_session(home, config)
    result = session.send("q")
    assert result.status == "ok"
    assert session.store.path(session.id)[-1].content == "smile 😀 here"


def test_a_turn_that_cannot_be_saved_does_not_cut_the_stored_conversation(home, wire_config, llm_server, monkeypatch):
    import sqlite3

    config = wire_config()
    session = stored_session(home, config)
    session.send("first")
    real = session.store.finish_turn
    calls = {"n": 0}

    def locked_once(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise sqlite3.OperationalError("database is locked")
        return real(*args, **kwargs)

    monkeypatch.setattr(session.store, "finish_turn", locked_once)
    session.send("second")
    session.send("third")
    prompts = [m.content for m in session.store.path(session.id) if m.role == "user"]
    assert prompts == ["first", "second", "third"]  # before: a new root, the history cut off


def test_a_second_ask_c_waits_for_the_first_and_answers_with_its_exchange_in_context(home, wire_config, llm_server):
    """Two `ask -c` on one session at once: the second says on stderr that it waits for the first (a lock on the
    session), then answers with the first's exchange in its context; both exchanges stored whole, in order.
    Before, both were answered at once, the second without having seen the first."""
    wire_config()
    asked = {"A": threading.Event(), "B": threading.Event()}
    release = threading.Event()
    seen_by_b: list[list[str]] = []

    def aggregator(body):
        prompts = [m["content"] for m in body["messages"] if m["content"] in ("prompt A", "prompt B")]
        if not prompts:
            return Reply(text="answer first")
        which = prompts[-1][-1]
        asked[which].set()
        if which == "A":
            release.wait(60)  # held until B has said that it waits
        else:
            seen_by_b.append([m["content"] for m in body["messages"]])
        return Reply(text=f"answer {which}")

    llm_server.script("agg", aggregator)
    assert run("ask", "first").returncode == 0

    def ask_c(prompt: str) -> subprocess.Popen[str]:
        command = [sys.executable, "-m", "moa_chat", "ask", "-c", prompt]
        return subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
        )

    processes = {"A": ask_c("prompt A")}
    assert asked["A"].wait(60), "ask -c 'prompt A' never reached the aggregator"
    processes["B"] = ask_c("prompt B")
    said = ""
    assert processes["B"].stderr is not None
    while "waiting for it to end" not in said:
        line = processes["B"].stderr.readline()
        assert line, f"ask -c 'prompt B' ended without waiting: {said}"
        said += line
    assert f"(process {processes['A'].pid})" in said and "up to 10 minutes" in said
    assert not asked["B"].is_set()
    release.set()
    for which in ("A", "B"):
        out, err = processes[which].communicate(timeout=60)
        assert processes[which].returncode == 0, err
        assert out.strip() == f"answer {which}"
    assert "this turn sees what it added" in err  # B's stderr: the first exchange joined its context
    (context,) = seen_by_b
    assert context.index("prompt A") < context.index("answer A") < context.index("prompt B")
    (session,) = json.loads(run("sessions", "--json").stdout)
    exported = json.loads(run("export", session["id"], "--format", "json").stdout)
    assert [(m["role"], m["content"]) for m in exported["messages"]] == [
        ("user", "first"),
        ("assistant", "answer first"),
        ("user", "prompt A"),
        ("assistant", "answer A"),
        ("user", "prompt B"),
        ("assistant", "answer B"),
    ]
    assert [t["status"] for t in exported["turns"]] == ["ok", "ok", "ok"]
