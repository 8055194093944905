"""The commands at their edges: a config typo never locks anyone out of their sessions, `doctor` runs every check
and finds a damaged session database, `export` says why it cannot write, `ask` stops cleanly on a signal or a
reader that leaves, the chat refuses to run without a terminal, and the local preset names what it needs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_config
from moa_chat.cli import main
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall
from moa_chat.store import SessionStore, default_path
from waiting import alive, wait_until

BROKEN = "moa:\n  presets:\n    x: [oops\n"


def stored_session(text: str = "How do I cache API responses?") -> str:
    store = SessionStore()
    sid = store.create_session("demo", text)
    parent = None
    for n in range(60):  # several pages: the damage below lands inside the file, not past its end
        parent = store.add_message(sid, {"role": "user", "content": f"{text} {n} " + "x" * 200}, parent_id=parent)
    store.close()
    return sid


def damage(path: Path) -> None:
    """The fault probe's damage: bytes 4096-8191 (the second page) overwritten."""
    with path.open("r+b") as file:
        file.seek(4096)
        file.write(b"\xa5" * 4096)


@pytest.mark.parametrize("command", [["sessions"], ["export", "ID"]])
def test_a_config_typo_does_not_lock_anyone_out_of_their_sessions(home, capsys, command):
    sid = stored_session()
    write_config(home, BROKEN)
    code = main([sid if part == "ID" else part for part in command])
    out = capsys.readouterr().out
    assert code == 0
    assert "How do I cache API responses?" in out


def test_doctor_runs_every_check_after_a_config_error(home, capsys):
    write_config(home, BROKEN)
    code = main(["doctor"])
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("✗ config: ") and "config.yaml:4" in out
    assert "built-in presets" in out
    assert "data folder:" in out and "local model:" in out and "session database:" in out


def test_doctor_finds_a_damaged_session_database_and_says_how_to_recover(home, capsys):
    stored_session()
    path = default_path()
    assert path.stat().st_size > 8192
    main(["doctor"])
    assert "✓ session database: " in capsys.readouterr().out
    damage(path)
    before = path.read_bytes()
    code = main(["doctor"])
    out = capsys.readouterr().out
    assert code == 1
    assert f"✗ session database: {path} is damaged" in out
    assert ".recover" in out and "sessions-recovered.db" in out
    assert path.read_bytes() == before  # looked at, never written


@pytest.mark.parametrize("where", ["missing/out.md", "."], ids=["missing folder", "a directory"])
def test_export_to_a_path_it_cannot_write_is_one_line_and_exit_2(home, tmp_path, capsys, where):
    sid = stored_session()
    code = main(["export", sid, "-o", str(tmp_path / where)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("moa-chat: error: cannot write ") and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("command", [["sessions"], ["export", "abc"]])
def test_session_is_refused_by_sessions_and_export(home, capsys, command):
    code = main([*command, "--session", "abc"])
    err = capsys.readouterr().err
    assert code == 2 and "--session is for the chat and `ask`" in err


def test_ask_solo_does_not_count_an_empty_panel(home, capsys):
    code = main(["ask", "--preset", "demo", "--solo", "hello"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "writing (solo)" in err and "0/0" not in err


def test_the_demo_summarises_an_attached_file_instead_of_acting_on_its_words(home, tmp_path, capsys, monkeypatch):
    """`Summarise @README.md` attaches a README that itself says "write … file": the demo reads the attached
    text and calls no tool, where it used to answer by asking to write a note."""
    monkeypatch.chdir(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text("# Tiny project\n\n## Install\n\nWrite the config file first.\n\n## Use\n\nRun it.\n")
    code = main(["ask", "--preset", "demo", "--yes", "-a", str(readme), "Summarise this"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "⚙" not in captured.err  # no tool call at all
    assert "What the attached file says:" in captured.out
    assert "opens with “Tiny project”" in captured.out and "*Install*, *Use*" in captured.out


HIDE_LLAMA = """
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "llama_cpp" or name.startswith("llama_cpp."):
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, Hide())
from importlib import util
_find = util.find_spec
util.find_spec = lambda name, package=None: None if name == "llama_cpp" else _find(name, package)
from moa_chat.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def run_without_llama(*args: str) -> subprocess.CompletedProcess[str]:
    """moa-chat in a process where llama-cpp-python is not importable, as on a machine without the extra."""
    return subprocess.run(
        [sys.executable, "-c", HIDE_LLAMA, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_local_preset_is_not_runnable_without_its_extra_and_says_the_real_command(home):
    listed = run_without_llama("presets", "--json")
    assert listed.returncode == 0, listed.stderr
    local = next(p for p in json.loads(listed.stdout) if p["name"] == "local")
    assert local["runnable"] is False
    assert "pip install 'moa-chat[local]'" in local["problem"] and "shared" not in local["problem"]
    text = run_without_llama("presets").stdout
    needs = "cannot run: needs the local extra (llama-cpp-python): pip install 'moa-chat[local]'"
    assert needs in text
    asked = run_without_llama("ask", "--preset", "local", "hi")
    assert asked.returncode == 2 and "pip install 'moa-chat[local]'" in asked.stderr and "shared" not in asked.stderr


def test_what_the_local_preset_needs_is_the_command_not_a_fix(monkeypatch):
    """F2's row and the header say "needs …" from Readiness.needs: for the local preset without its extra that
    is the command to run (no key is missing), not a bare "needs a fix"."""
    from moa_chat.config import load_config_text
    from moa_chat.providers import lifecycle
    from moa_chat.providers.local import INSTALL_HINT
    from moa_chat.providers.readiness import readiness

    why = f"needs the local extra (llama-cpp-python): {INSTALL_HINT}"
    monkeypatch.setitem(lifecycle.PREREQUISITES, "local", lambda: why)
    config = load_config_text("")
    state = readiness(config, config.presets["local"])
    assert not state.runnable
    assert state.needs == f"the local extra (llama-cpp-python): {INSTALL_HINT}"
    assert readiness(config, config.presets["frontier"]).needs.endswith("_API_KEY")  # a key still comes first


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_to_ask_stops_its_command_and_ends_the_stored_turn_interrupted(
    wire_config, llm_server, home, tmp_path, number
):
    """Closing the terminal during `ask` (SIGHUP) or `kill` (SIGTERM): the command the model started dies with
    it (it used to stay running with ppid 1) and the stored turn ends as after Ctrl-C, not `running`."""
    wire_config()
    marker = tmp_path / "child.pid"
    record = f"import os, time; open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    run_it = Reply(
        text="Running it.",
        tool_calls=[ScriptedToolCall("run_command", json.dumps({"command": [sys.executable, "-c", record]}))],
    )
    llm_server.script(
        "agg", lambda body: Reply(text="done") if any(m["role"] == "tool" for m in body["messages"]) else run_it
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "moa_chat", "ask", "run it", "--yes"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )
    try:
        wait_until(
            lambda: (marker.exists() and marker.read_text()) or process.poll() is not None, "the command to start"
        )
        child = int(marker.read_text())
        process.send_signal(number)
        _out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + number, err
    assert "Traceback" not in err
    wait_until(lambda: not alive(child), "the command to end with ask")
    store = SessionStore()
    (turn,) = store.turns(store.latest().id)
    assert turn.status == "cancelled", turn.status  # as Ctrl-C leaves it


def test_the_first_line_of_ask_prints_a_configured_model_name_inert(home, llm_server):
    """A model name is the config's, and a config can be shared: an OSC 52 in it must not reach the terminal."""
    write_config(
        home,
        f"""
        providers:
          wire: {{base_url: "{llm_server.base_url}", max_retries: 0}}
        moa:
          default_preset: wire
          presets:
            wire:
              reference_models: [{{provider: wire, model: ref-a}}]
              aggregator: {{provider: wire, model: "agg\\u001b]52;c;aGk=\\u0007"}}
        """,
    )
    result = subprocess.run([sys.executable, "-m", "moa_chat", "ask", "hi"], capture_output=True, text=True, timeout=60)
    first = result.stderr.splitlines()[0]
    assert first.startswith("moa-chat: preset wire") and "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "␛]52;c;aGk=" in first


def test_ask_into_a_reader_that_leaves_cancels_the_turn_and_exits_141_quietly(wire_config, llm_server, home):
    """`moa-chat ask --stream … | head -1`: once the reader has gone nobody reads the rest, so the turn is
    cancelled (the aggregator's stream is closed mid-way) and ask ends as other tools do in a pipe: 141, no
    traceback. (Without --stream a pipe gets the reply once whole, so there is no turn left to cancel.)"""
    wire_config()
    llm_server.script("agg", Reply(text="first line\n" + "more words " * 400, piece_delay=0.01))
    process = subprocess.Popen(
        [sys.executable, "-m", "moa_chat", "ask", "hi", "--stream"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "first line\n"
        process.stdout.close()  # the reader leaves, as `head -1` does
        err = process.stderr.read() if process.stderr else ""
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 141, err
    assert "Traceback" not in err and "error" not in err
    assert llm_server.requests_for("agg")[-1].disconnected  # the stream was closed, not read to its end


def test_the_chat_without_a_terminal_says_so_instead_of_running_unreachable(home):
    """`moa-chat < /dev/null > log` (a cron job, a CI step): no keyboard to quit it and SIGTERM went unheard,
    so it ran until killed. It refuses at once, naming what to use instead."""
    result = subprocess.run(
        [sys.executable, "-m", "moa_chat", "--preset", "demo"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "TEXTUAL_DRIVER"},
    )
    assert result.returncode == 2
    assert result.stderr == (
        "moa-chat: error: the chat needs a terminal: stdin and stdout must be one; in a script, use `moa-chat ask`\n"
    )


@pytest.mark.parametrize("command", [["sessions"], ["ask", "-c", "and then?"], ["export", "ID"]])
def test_a_damaged_database_is_one_clear_line_everywhere_and_is_never_written(home, capsys, command):
    sid = stored_session()
    path = default_path()
    damage(path)
    before = path.read_bytes()
    code = main([sid if part == "ID" else part for part in command])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"moa-chat: error: the session database {path} is damaged") and err.count("\n") == 1
    assert "moa-chat doctor" in err
    assert path.read_bytes() == before


LOCAL_ON_THE_TEST_SERVER = """
providers:
  local: {{base_url: "{base_url}", max_retries: 0}}
moa:
  default_preset: mine
  presets:
    mine:
      reference_models: [{{provider: local, model: smollm2, samples: 2}}]
      aggregator: {{provider: local, model: smollm2}}
"""


def test_a_turn_on_this_machine_shows_tokens_n_a_and_costs_0_in_sessions_and_the_export(home, llm_server, capsys):
    """llama.cpp's server reports no usage: the turn's tokens are unknown ("n/a", never 0) and, the model being
    this machine's, its cost is $0 rather than unknown."""
    write_config(home, LOCAL_ON_THE_TEST_SERVER.format(base_url=llm_server.base_url))
    llm_server.script("smollm2", Reply(text="Hello from this machine.", usage_chunk=False))
    assert main(["ask", "hi"]) == 0
    err = capsys.readouterr().err
    assert "tokens n/a · $0" in err
    assert main(["sessions"]) == 0
    (row,) = capsys.readouterr().out.splitlines()
    assert " $0 " in row
    sid = row.split()[0]
    assert main(["export", sid]) == 0
    exported = capsys.readouterr().out
    assert "· 1 turn · tokens n/a · $0 ·" in exported
    assert "*local:smollm2 ·" in exported and "tokens n/a · $0*" in exported


def test_the_export_shows_a_failed_turn_under_its_prompt(wire_config, llm_server, home, capsys):
    wire_config()
    llm_server.script("agg", Reply(status=500, error="the model crashed"))
    assert main(["ask", "a question that fails"]) == 1
    capsys.readouterr()
    sid = SessionStore().latest().id
    assert main(["export", sid]) == 0
    exported = capsys.readouterr().out
    prompt_at = exported.index("a question that fails")
    failure_at = exported.index("*The turn failed: wire:agg failed: HTTP 500: the model crashed*")
    assert failure_at > prompt_at


async def test_save_screenshot_works_without_a_downloads_folder(wire_config, home, tmp_path, monkeypatch):
    """Textual saves to ~/Downloads and fails where there is none (a server, a container): the data folder then."""
    from moa_chat.config import data_home
    from tui_helpers import make_app, wait_until

    monkeypatch.setenv("HOME", str(tmp_path / "nobody"))
    monkeypatch.delenv("XDG_DOWNLOAD_DIR", raising=False)
    app = make_app(wire_config(), "wire")
    notices: list[str] = []
    monkeypatch.setattr(app, "notify", lambda message, **kwargs: notices.append(str(message)))
    async with app.run_test(size=(100, 30)) as pilot:
        app.deliver_screenshot()
        await wait_until(pilot, lambda: notices)
    saved = list((data_home() / "screenshots").glob("*.svg"))
    assert len(saved) == 1 and saved[0].read_text().startswith("<svg")
    assert str(saved[0]) in notices[0]
