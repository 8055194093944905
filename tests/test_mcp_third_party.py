"""MCP servers someone else wrote, installed from PyPI by the test extra: `mcp-server-time` answers a read-only
call with no network, and `mcp-server-git`'s `git_add` changes a scratch repository, so it needs approval.
Both run through a real `moa-chat ask` process against the scripted provider, and `git_add` through the
chat too, where its approval dialog decides."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import WIRE_CONFIG, write_config
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mcp_server_time") is None or importlib.util.find_spec("mcp_server_git") is None,
    reason="the test extra's third-party MCP servers are not installed: pip install -e '.[test]'",
)

SERVERS = f"""
mcp_servers:
  time:
    command: {sys.executable}
    args: ["-m", "mcp_server_time", "--local-timezone", "UTC"]
  git:
    command: {sys.executable}
    args: ["-m", "mcp_server_git"]
"""


def ask(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "moa_chat", "ask", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=dict(os.environ),
        check=False,
    )


def act_then_answer(body: dict, call: ScriptedToolCall) -> Reply:
    """The aggregator calls the tool once per run of `ask` (each a fresh conversation), then answers."""
    return Reply(text="Done.") if any(m["role"] == "tool" for m in body["messages"]) else Reply(tool_calls=[call])


def tool_results(llm_server) -> dict[str, str]:
    last = llm_server.requests_for("agg")[-1].body["messages"]
    return {m["tool_call_id"]: m["content"] for m in last if m["role"] == "tool"}


@pytest.fixture
def scratch_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "notes.txt").write_text("a change to stage\n")
    return repo


def staged(repo: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True, check=True)
    return [line[3:] for line in out.stdout.splitlines() if line[0] == "A"]


def test_mcp_server_time_answers_a_read_only_call(home, llm_server, tmp_path):
    write_config(home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra="") + SERVERS)
    call = ScriptedToolCall("time__get_current_time", json.dumps({"timezone": "UTC"}), id="t1")
    llm_server.script("agg", [Reply(tool_calls=[call]), Reply(text="It is now.")])
    result = ask(tmp_path, "what time is it in UTC?")  # no --yes: a read-only tool needs none
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("It is now.")
    answer = json.loads(tool_results(llm_server)["t1"])
    assert answer["timezone"] == "UTC" and answer["datetime"][:2] == "20"


def test_mcp_server_git_add_needs_approval_and_runs_once_given(home, llm_server, scratch_repo):
    write_config(home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra="") + SERVERS)
    arguments = json.dumps({"repo_path": str(scratch_repo), "files": ["notes.txt"]})
    llm_server.script("agg", lambda body: act_then_answer(body, ScriptedToolCall("git__git_add", arguments, id="g1")))
    denied = ask(scratch_repo, "stage notes.txt")
    assert denied.returncode == 0, denied.stderr
    assert "git__git_add" in denied.stderr and "denied" in denied.stderr and "--yes" in denied.stderr
    assert staged(scratch_repo) == []
    # No one was asked: the model is told so, not that a user said no.
    assert tool_results(llm_server)["g1"] == "not allowed in this non-interactive run: run with --yes to allow"

    allowed = ask(scratch_repo, "--yes", "stage notes.txt")
    assert allowed.returncode == 0, allowed.stderr
    assert staged(scratch_repo) == ["notes.txt"]
    assert tool_results(llm_server)["g1"] == "Files staged successfully"


@pytest.mark.parametrize(
    ("key", "staged_files", "told"),
    [("y", ["notes.txt"], "Files staged successfully"), ("n", [], "denied by the user")],
    ids=["allowed", "denied"],
)
async def test_mcp_server_git_add_in_the_chat_asks_in_the_approval_dialog(
    home, llm_server, scratch_repo, monkeypatch, key, staged_files, told
):
    """The same `git_add` through the chat: the dialog shows the call, y stages the file, n changes nothing."""
    from moa_chat.config import load_config
    from moa_chat.tui.screens.approval import ApprovalScreen
    from moa_chat.tui.widgets.reply import AssistantReply
    from moa_chat.tui.widgets.tool_block import ToolBlock
    from tui_helpers import make_app, send, wait_until

    monkeypatch.chdir(scratch_repo)
    config = load_config(write_config(home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra="") + SERVERS))
    arguments = json.dumps({"repo_path": str(scratch_repo), "files": ["notes.txt"]})
    llm_server.script("agg", lambda body: act_then_answer(body, ScriptedToolCall("git__git_add", arguments, id="g1")))
    app = make_app(config, "wire")
    async with app.run_test(size=(120, 36)) as pilot:
        # The chat starts its MCP servers off the UI thread; a turn before they are up has only the built-ins.
        await wait_until(pilot, lambda: "git__git_add" in {tool.name for tool in app.session.mcp.tools()}, timeout=60)
        await send(pilot, "stage notes.txt")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen.armed, timeout=30)
        dialog = app.screen
        assert isinstance(dialog, ApprovalScreen) and dialog.request.tool == "git__git_add"
        assert staged(scratch_repo) == []  # nothing happens before the answer
        await pilot.press(key)
        await wait_until(
            pilot, lambda: not app.chat.turn_running and app.query(AssistantReply).last().finished, timeout=60
        )
        assert staged(scratch_repo) == staged_files
        assert tool_results(llm_server)["g1"] == told
        assert app.query_one(ToolBlock).event.status == ("done" if key == "y" else "denied")
