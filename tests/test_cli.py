"""`moa-chat ask` and `moa-chat presets` as a user runs them: a real process, real stdout and stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import WIRE_CONFIG, write_config
from moa_chat.providers.loopback_server import Reply


def run(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "moa_chat", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )


def test_ask_demo_streams_only_the_reply_to_stdout(home):
    result = run("ask", "How do I profile a Python program?", "--preset", "demo")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("*Simulated reply")
    assert "```python" in result.stdout
    assert "demo:simulated-analyst" not in result.stdout  # progress stays on stderr
    assert "demo:simulated-analyst" in result.stderr and "✓" in result.stderr
    assert "done in" in result.stderr


def test_ask_without_a_key_falls_back_to_demo_and_says_so(home):
    result = run("ask", "hello")
    assert result.returncode == 0
    assert "offline demo preset" in result.stderr and "OPENROUTER_API_KEY" in result.stderr


def test_ask_reads_the_prompt_from_stdin(home, llm_server):
    write_config(home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra=""))
    result = run("ask", "-", "-q", stdin="the prompt from a pipe\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok from agg\n" and result.stderr == ""
    assert llm_server.requests_for("agg")[0].messages[0]["content"] == "the prompt from a pipe\n"


def test_ask_json_reports_reply_references_and_usage(home, llm_server):
    write_config(home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra=""))
    llm_server.script("ref-b", Reply(status=500, error="boom"))
    result = run("ask", "q", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["reply"] == "ok from agg" and data["status"] == "ok" and data["preset"] == "wire"
    assert [r["label"] for r in data["references"]] == ["wire:ref-a", "wire:ref-b", "wire:ref-c"]
    assert [r["status"] for r in data["references"]] == ["ok", "failed", "ok"]
    assert data["references"][0]["text"] == "ok from ref-a" and data["references"][0]["seconds"] >= 0
    assert data["references"][0]["usage"]["total_tokens"] > 0
    assert data["usage"]["total_tokens"] == (
        data["usage"]["references_total_tokens"] + data["usage"]["aggregator_total_tokens"]
    )


def test_ask_exits_1_when_the_turn_fails(home, llm_server):
    write_config(home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra=""))
    llm_server.script("agg", Reply(status=500, error="the model crashed"))
    result = run("ask", "q")
    assert result.returncode == 1
    assert "wire:agg failed: HTTP 500: the model crashed" in result.stderr


def test_usage_and_config_errors_exit_2_with_one_line(home):
    result = run("ask", "q", "--preset", "nope")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "unknown preset 'nope'" in result.stderr
    write_config(home, "moa: [unclosed\n")
    result = run("ask", "q")
    assert result.returncode == 2 and "invalid YAML at line" in result.stderr and "config.yaml" in result.stderr
    assert result.stdout == ""
    # The interactive app checks the same things before it takes over the terminal.
    result = run("--preset", "nope")
    assert result.returncode == 2 and "invalid YAML at line" in result.stderr and result.stdout == ""
    write_config(home, "")
    result = run("--preset", "nope")
    assert result.returncode == 2 and "unknown preset 'nope'" in result.stderr and result.stdout == ""


def test_missing_key_for_the_aggregator_names_the_variable(home):
    result = run("ask", "q", "--preset", "frontier")
    assert result.returncode == 2
    assert "OPENROUTER_API_KEY" in result.stderr


def test_presets_lists_models_and_marks_the_default(home):
    result = run("presets")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert any(line.startswith("* demo") and "(default)" in line for line in lines)
    assert "aggregator: demo:simulated-synthesizer" in result.stdout
    assert "cannot run: needs OPENROUTER_API_KEY" in result.stdout


def test_a_reader_that_stops_early_gets_no_traceback(home):
    """`moa-chat presets | head -3`: the pipe closes before moa-chat has written; it stops quietly, 141 as other
    tools do (128 + SIGPIPE)."""
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before the first write
    try:
        result = subprocess.run(
            [sys.executable, "-m", "moa_chat", "presets"], stdout=writer, stderr=subprocess.PIPE, text=True, timeout=60
        )
    finally:
        os.close(writer)
    assert result.returncode == 141 and result.stderr == ""


def _project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text("# Tiny\n\nA tiny project for the ask test.\n")
    (root / "app.py").write_text("print('hi')\n")
    return root


def run_in(cwd, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "moa_chat", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
        cwd=cwd,
    )


def test_ask_with_tools_lists_the_folder_and_reads_the_readme(home, tmp_path):
    root = _project(tmp_path)
    result = run_in(root, "ask", "What files are in this folder and what does README.md say?", "--preset", "demo")
    assert result.returncode == 0, result.stderr
    assert "`app.py`" in result.stdout and "“Tiny”" in result.stdout
    assert "holds 2 entries" in result.stdout
    # One blank line between the words before the tool calls and the reply after them, with or without
    # progress lines on stderr in between.
    assert "first.\n\n*Simulated reply" in result.stdout
    quiet = run_in(root, "ask", "What files are in this folder?", "--preset", "demo", "-q")
    assert "first.\n\n*Simulated reply" in quiet.stdout and quiet.stderr == ""
    assert "⚙ list_directory(path=.) done" in result.stderr
    assert "⚙ read_file(path=README.md, end_line=40) done" in result.stderr


def test_ask_denies_changing_tools_unless_yes(home, tmp_path):
    from moa_chat.providers.demo import DEMO_NOTE

    root = _project(tmp_path)
    denied = run_in(root, "ask", "Please write a note file about this", "--preset", "demo")
    assert denied.returncode == 0
    assert "⚙ write_file(" in denied.stderr and "denied (needs approval: run with --yes to allow)" in denied.stderr
    assert not (root / DEMO_NOTE).exists()
    allowed = run_in(root, "ask", "Please write a note file about this", "--preset", "demo", "--yes")
    assert allowed.returncode == 0 and (root / DEMO_NOTE).exists()
    assert "created moa-demo-note.md" in allowed.stdout
