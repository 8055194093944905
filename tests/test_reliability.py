"""Half answers are never presented as whole: streams cut without a finish reason, replies the provider
stopped early, bodies that are not chat at all, empty answers, tool loops that never finish. Each against
the loopback server, through the real openai SDK, as a user runs `moa-chat ask`."""

from __future__ import annotations

import json
import os
import sys

import pytest
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall
from moa_chat.session import ChatSession
from moa_chat.store import SessionStore
from moa_chat.tui.widgets.reply import AssistantReply
from moa_chat.tui.widgets.sidebar import ReferenceSidebar
from test_cli import run
from tui_helpers import make_app, run_turn
from waiting import DEADLINE, alive, wait_until

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


# --------------------------------------------------------------------------- terminal escape injection

ESCAPES = {
    "osc52-clipboard": "\x1b]52;c;ZWNobyBwd25lZA==\x07",
    "osc0-title": "\x1b]0;pwned title\x07",
    "osc2-title": "\x1b]2;pwned title\x1b\\",
    "csi-clear-screen": "\x1b[2J\x1b[H",
    "c1-csi-clear": "\x9b2J",
    "bell-and-backspace": "\x07\x08\x08",
}


def _acts(text: str) -> bool:
    """Whether `text` holds a byte a terminal would act on (tab and newline are fine)."""
    return any(ch in text for ch in "\x1b\x9b\x07\x08\r") or any(0x80 <= ord(ch) <= 0x9F for ch in text)


@pytest.mark.parametrize("name", list(ESCAPES))
def test_ask_never_writes_an_escape_sequence_from_a_model_tool_or_provider(wire_config, llm_server, home, name):
    wire_config()
    sequence = ESCAPES[name]
    llm_server.script("agg", Reply(text=f"before {sequence} after\ttabbed\nnext line"))
    llm_server.script("ref-b", Reply(status=500, error=f"upstream said {sequence}"))
    result = run("ask", "q")
    assert result.returncode == 0, result.stderr
    assert not _acts(result.stdout) and not _acts(result.stderr)
    assert "before " in result.stdout and " after\ttabbed\nnext line" in result.stdout  # tab, newline kept
    assert "␛" in result.stdout or "<U+009B>" in result.stdout or "␇" in result.stdout  # visible, not dropped
    as_json = run("ask", "q", "--json")
    assert not _acts(as_json.stdout)
    assert json.loads(as_json.stdout)["reply"] == f"before {sequence} after\ttabbed\nnext line"  # lossless


def test_a_failing_provider_cannot_write_escapes_to_stderr(wire_config, llm_server, home):
    wire_config()
    llm_server.script("agg", Reply(status=400, error="bad request \x1b]52;c;cHduZWQ=\x07 \x9b2J"))
    result = run("ask", "q")
    assert result.returncode == 1 and "bad request" in result.stderr
    assert not _acts(result.stderr)


async def test_the_chat_shows_escape_sequences_as_visible_text(wire_config, llm_server, home, tmp_path, monkeypatch):
    from moa_chat.tui.widgets.chat_log import NoticeLine
    from moa_chat.tui.widgets.tool_block import ToolBlock

    monkeypatch.chdir(tmp_path)
    (tmp_path / "evil.txt").write_text("file text \x1b]0;owned\x07 \x9b2J end")
    config = wire_config()
    everything = "".join(ESCAPES.values())
    llm_server.script(
        "agg",
        [
            Reply(
                text=f"reading {everything}",
                tool_calls=[ScriptedToolCall("read_file", json.dumps({"path": "evil.txt"}))],
            ),
            Reply(text=f"done {everything}"),
        ],
    )
    llm_server.script("ref-a", Reply(text=f"advice {everything}"))
    app = make_app(config, "wire")
    async with app.run_test(size=(110, 40)) as pilot:
        await run_turn(pilot, f"question {everything}")
        shown = [str(widget.render()) for widget in app.screen.query("*") if hasattr(widget, "render")]
        markdown = [m.source for m in app.query("ReplyMarkdown")]
        block = app.query_one(ToolBlock)
        card = app.query_one(ReferenceSidebar).card(0)
        for text in (*markdown, block.event.result or "", card.text, *(str(n.render()) for n in app.query(NoticeLine))):
            assert not _acts(text), repr(text)
        assert "␛]0;owned" in (block.event.result or "")
        assert any("done ␛]52;c;" in text for text in markdown)
        assert all(not _acts(text) for text in shown)


# --------------------------------------------------------------------------- secrets

FAKE_KEY = "sk-moa-test-7c1e5b9a3d2f4e6a8b0c1d2e3f4a5b6c"


def _environment_seen(llm_server, home, extra: str = "") -> str:
    from conftest import WIRE_CONFIG, write_config
    from moa_chat.config import load_config

    write_config(
        home,
        WIRE_CONFIG.format(base_url=llm_server.base_url, extra="").replace(
            "    max_retries: 0", "    max_retries: 0\n    api_key_env: WIRE_API_KEY"
        )
        + "tool_env_allow: [GITHUB_TOKEN]\n"
        + extra,
    )
    config = load_config()
    command = ScriptedToolCall("run_command", json.dumps({"command": [sys.executable, "-c", DUMP_ENV]}))
    llm_server.script("agg", [Reply(tool_calls=[command]), Reply(text="done")])
    session = ChatSession(config, config.preset("wire"), allow_all=True)
    result = session.send("show me the environment")
    assert result.status == "ok", result.error
    return next(m["content"] for m in result.new_messages if m["role"] == "tool")


SECRETS = {
    "WIRE_API_KEY": FAKE_KEY,
    "MY_SERVICE_TOKEN": "token-value-123456",
    "DEPLOY_SECRET": "secret-value-123456",
    "PGPASSWORD": "pg-value-123456",
    "OPENAI_KEY": "openai-value-123456",
    "DATABASE_URL": "postgres://u:pw-value-123456@db/x",
    "SLACK_WEBHOOK_URL": "https://hooks.example/slack-value-123456",
    "AUTH": "auth-value-123456",
}


def test_commands_run_by_tools_get_an_allowlisted_environment(wire_config, llm_server, home, tmp_path, monkeypatch):
    """The default `tool_env: core`: the core set and what tool_env_allow names, nothing else. The names a
    blocklist of secret-looking names let through (PGPASSWORD, DATABASE_URL, …) are withheld like the rest;
    this test said PLAIN_SETTING passed when the environment was a blocklist."""
    monkeypatch.chdir(tmp_path)
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GITHUB_TOKEN", "allowed-value-123456")
    monkeypatch.setenv("PLAIN_SETTING", "plain-value")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    output = _environment_seen(llm_server, home)
    assert "GITHUB_TOKEN=allowed-value-123456" in output and "LC_ALL=C.UTF-8" in output
    assert f"PATH={os.environ['PATH']}" in output and f"HOME={os.environ['HOME']}" in output
    assert "PLAIN_SETTING" not in output
    for name, value in SECRETS.items():
        assert name not in output and value not in output


def test_tool_env_all_passes_everything_but_the_providers_keys(wire_config, llm_server, home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PLAIN_SETTING", "plain-value")
    output = _environment_seen(llm_server, home, "tool_env: all\n")
    assert "PLAIN_SETTING=plain-value" in output and "PGPASSWORD=pg-value-123456" in output
    assert FAKE_KEY not in output and "WIRE_API_KEY" not in output


DUMP_ENV = "import os; print('\\n'.join(f'{k}={v}' for k, v in sorted(os.environ.items())))"


def test_a_provider_echoing_the_key_in_its_error_is_redacted(wire_config, llm_server, home, monkeypatch):
    monkeypatch.setenv("WIRE_API_KEY", FAKE_KEY)
    from conftest import WIRE_CONFIG, write_config

    write_config(
        home,
        WIRE_CONFIG.format(base_url=llm_server.base_url, extra="").replace(
            "    max_retries: 0", "    max_retries: 0\n    api_key_env: WIRE_API_KEY"
        ),
    )
    llm_server.script("agg", Reply(status=401, error=f"Invalid key: Bearer {FAKE_KEY}"))
    llm_server.script("ref-a", Reply(status=403, error=f"key {FAKE_KEY} may not use this model"))
    result = run("ask", "q", "--json")
    assert result.returncode == 1
    assert FAKE_KEY not in result.stdout and FAKE_KEY not in result.stderr
    assert "Invalid key: Bearer [redacted]" in result.stderr
    assert json.loads(result.stdout)["references"][0]["error"].startswith("HTTP 403: key [redacted] may not")
    for path in home.rglob("*"):
        if path.is_file():
            assert FAKE_KEY.encode() not in path.read_bytes(), path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Invalid key: Bearer abcdefghijklmnop1234", "Invalid key: [redacted]"),
        ("key sk-proj-AbCdEfGhIjKlMnOp rejected", "key [redacted] rejected"),
        ("use AIzaSyA1234567890abcdefghijklmnop here", "use [redacted] here"),
        ("gsk_0123456789abcdefABCDEF is not valid", "[redacted] is not valid"),
        # Nothing else is touched: code, dates, hashes, addresses, line numbers, model names.
        ("def task_sk(x): return x", "def task_sk(x): return x"),
        ("2026-12-01T00:07:34Z at 10.0.0.1:8080, line 42", "2026-12-01T00:07:34Z at 10.0.0.1:8080, line 42"),
        ("commit 3f2a9c1b7e4d5f6a7b8c9d0e1f2a3b4c5d6e7f8a", "commit 3f2a9c1b7e4d5f6a7b8c9d0e1f2a3b4c5d6e7f8a"),
        ("model gpt-4.1-mini not found; try task-force-2026", "model gpt-4.1-mini not found; try task-force-2026"),
    ],
)
def test_redaction_takes_keys_and_nothing_else(text, expected):
    from moa_chat.llm.errors import redact

    assert redact(text) == expected


# --------------------------------------------------------------------------- processes and signals


def _sigint_as_in_a_terminal() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_in_ask_kills_a_running_command_and_says_nothing_false(
    wire_config, llm_server, home, tmp_path, monkeypatch
):
    import os
    import signal
    import subprocess

    monkeypatch.chdir(tmp_path)
    wire_config()
    marker = tmp_path / "child.pid"
    record = f"import os, time; open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    command = json.dumps({"command": [sys.executable, "-c", record]})
    run_it = Reply(text="Running it.", tool_calls=[ScriptedToolCall("run_command", command)])
    llm_server.script("agg", lambda body: Reply(text="done") if body["messages"][-2]["role"] == "tool" else run_it)
    for _attempt in range(3):  # the same outcome each time (observed before: 6 of 6 left the child running)
        marker.unlink(missing_ok=True)
        process = subprocess.Popen(
            [sys.executable, "-m", "moa_chat", "ask", "run it", "--yes", "--no-save"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # A hang shows where each thread was: SIGABRT below makes faulthandler print their stacks.
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},
            # Ctrl-C as a terminal delivers it: a run started in the background (`.ci/run &`) inherits
            # SIGINT ignored, and Python then never raises KeyboardInterrupt (CI hung this way, twice).
            preexec_fn=_sigint_as_in_a_terminal,
        )
        child = int(wait_until(lambda: marker.exists() and marker.read_text(), "the command to start"))
        process.send_signal(signal.SIGINT)
        try:
            out, err = process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            out, err = process.communicate(timeout=20)
            pytest.fail(f"ask did not exit 20 s after Ctrl-C; its threads:\n{err}")
        assert process.returncode == 130, err
        assert out == "Running it.\n"  # the partial reply ends its line
        assert "did not stop in time" not in err and "cancelled" in err
        wait_until(lambda child=child: not alive(child), "the command to die")  # its process group was killed


def test_a_dropped_reference_stays_dropped_and_never_holds_up_the_exit(llm_server, home):
    import time

    from conftest import write_config

    # The SDK's own retries left on (the default): before, they asked the hung reference again in the
    # background, and the process waited for them to give up.
    write_config(
        home,
        f"""
        providers:
          wire:
            base_url: {llm_server.base_url}
        moa:
          default_preset: wire
          presets:
            wire:
              reference_timeout: 1
              reference_models:
                - {{provider: wire, model: ref-a}}
                - {{provider: wire, model: ref-b}}
              aggregator: {{provider: wire, model: agg}}
        """,
    )
    llm_server.script("ref-b", Reply(text="too late", delay=30))  # never answers in time
    started = time.monotonic()
    result = run("ask", "q", "--json", "--no-save")
    took = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert [r["status"] for r in json.loads(result.stdout)["references"]] == ["ok", "timeout"]
    assert took < 6  # the process ends with the turn, not when the hung request and its retries give up
    # The process has ended, so nothing more leaves it; the server has seen the hung request's client go.
    assert llm_server.wait_for_request("ref-b").finished.wait(DEADLINE), "the hung request's connection stayed open"
    assert len(llm_server.requests_for("ref-b")) == 1  # not retried behind the fan-out's back


def test_an_error_described_while_another_thread_imports_the_sdk_waits_for_that_import(tmp_path, monkeypatch):
    # The chat's warm-up thread imports the SDK while a first turn may already have failed: the error's
    # description looks at the SDK's classes, which a half-imported module does not have yet.
    import sys
    import threading
    import types

    from moa_chat.llm.errors import loaded_module

    gate = types.SimpleNamespace(started=threading.Event(), release=threading.Event())
    monkeypatch.setitem(sys.modules, "moa_test_import_gate", gate)
    (tmp_path / "moa_test_slow_sdk.py").write_text(
        "import moa_test_import_gate as gate\ngate.started.set()\ngate.release.wait(30)\nREADY = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "moa_test_slow_sdk", raising=False)
    importer = threading.Thread(target=__import__, args=("moa_test_slow_sdk",))
    importer.start()
    assert gate.started.wait(30)
    seen: list[bool] = []
    asker = threading.Thread(target=lambda: seen.append(hasattr(loaded_module("moa_test_slow_sdk"), "READY")))
    asker.start()
    asker.join(0.5)  # a half-loaded module handed back at once would be seen here, before the import ends
    gate.release.set()
    importer.join(30)
    asker.join(30)
    assert seen == [True]
    assert loaded_module("moa_test_never_imported") is None
