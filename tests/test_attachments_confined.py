"""Attachments come from the working folder (an eval task's, from its task file's folder): a path outside it,
through an absolute path, `..` or a symlink, is refused and nothing is sent, unless `--allow-path` names it.
Real `moa-chat ask` and `moa-chat eval` processes, the chat through Pilot, the scripted provider behind."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import WIRE_CONFIG, run_moa, write_config
from moa_chat.config import load_config
from tui_helpers import make_app, send, wait_until

SECRET = "root:x:0:0:the secret outside"


@pytest.fixture
def project(home: Path, llm_server, tmp_path: Path) -> Path:
    """A working folder with a file of its own, beside a secret file outside it and a link to the secret."""
    write_config(home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra=""))
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("notes inside\n")
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    (folder / "innocent.txt").symlink_to(tmp_path / "secret.txt")
    return folder


def moa(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_moa(*args, cwd=cwd)


def sent_anything(llm_server) -> bool:
    return any(SECRET in json.dumps(request.body) for request in llm_server.requests)


@pytest.mark.parametrize("path", ["{secret}", "../secret.txt", "innocent.txt", "./sub/../../secret.txt"])
def test_ask_refuses_an_attachment_outside_the_working_folder(project, llm_server, path):
    result = moa(project, "ask", "--no-save", "-a", path.format(secret=project.parent / "secret.txt"), "summarise")
    assert result.returncode == 2, result.stderr
    assert "is outside the working folder" in result.stderr and str(project) in result.stderr
    assert "--allow-path PATH" in result.stderr
    assert llm_server.requests == [] and not sent_anything(llm_server)


def test_ask_attaches_a_file_inside_and_one_outside_that_allow_path_names(project, llm_server):
    result = moa(project, "ask", "--no-save", "-q", "-a", "notes.txt", "summarise")
    assert result.returncode == 0, result.stderr
    secret = project.parent / "secret.txt"
    for allowed in (secret, project.parent):  # the file itself, or the folder it is in
        result = moa(project, "ask", "--no-save", "-q", "-a", str(secret), "--allow-path", str(allowed), "summarise")
        assert result.returncode == 0, result.stderr
        assert SECRET in llm_server.requests_for("agg")[-1].body["messages"][-2]["content"]
    # A link inside to a file outside is refused however it is named, unless its target is allowed.
    linked = moa(project, "ask", "--no-save", "-q", "-a", "innocent.txt", "--allow-path", str(secret), "summarise")
    assert linked.returncode == 0, linked.stderr


def test_an_eval_task_cannot_attach_a_file_outside_its_folder(project, llm_server, tmp_path):
    tasks = project / "tasks.jsonl"
    tasks.write_text(
        json.dumps({"id": "inside", "prompt": "p", "contains": "ok", "attachments": ["notes.txt"]})
        + "\n"
        + json.dumps({"id": "escape", "prompt": "p", "contains": "ok", "attachments": ["../../../../" + "etc/passwd"]})
        + "\n"
        + json.dumps({"id": "linked", "prompt": "p", "contains": "ok", "attachments": ["innocent.txt"]})
        + "\n"
    )
    result = moa(tmp_path, "eval", str(tasks), "--preset", "wire", "--json", "-q")
    assert not sent_anything(llm_server) and not any(
        "root:" in json.dumps(request.body) for request in llm_server.requests
    )
    out = json.loads(result.stdout)
    assert out["status"] == "done"
    assert {failure["task"] for failure in out["failed"]} == {"escape", "linked"}
    assert all("outside the working folder" in failure["error"] for failure in out["failed"])
    assert result.returncode == 1, result.stderr  # some tasks failed


async def test_the_chat_refuses_an_at_path_outside_the_working_folder(project, llm_server, home, monkeypatch):
    monkeypatch.chdir(project)
    config = load_config(home / "config.yaml")
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await send(pilot, f"what is in @{project.parent / 'secret.txt'} and @innocent.txt?")

        def refused() -> bool:
            return any("is outside the working folder" in str(t.render()) for t in app.screen.query("Toast"))

        await wait_until(pilot, refused)
        assert llm_server.requests == []
