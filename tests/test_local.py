"""The `local` provider end to end: a real Mixture-of-Agents turn on llama.cpp and SmolLM2-135M, and a
server that never outlives moa-chat (issue 14). Skipped only when the `local` extra is not installed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from moa_chat.providers.local import INSTALL_HINT, extra_installed

pytestmark = pytest.mark.skipif(not extra_installed(), reason=f"the local extra is not installed: {INSTALL_HINT}")


def servers() -> set[int]:
    """Running llama.cpp servers serving moa-chat's model alias."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"llama_cpp.server" in command and b"smollm2" in command:
            found.add(int(entry.name))
    return found


def wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def env(home: Path) -> dict[str, str]:
    return {**os.environ, "MOA_CHAT_HOME": str(home)}


def test_a_real_moa_turn_on_the_local_model_and_the_server_is_gone_after(home):
    before = servers()
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
    assert wait_for(lambda: servers() <= before, 10), "the llama.cpp server outlived moa-chat"


def test_the_server_dies_with_moa_chat_even_when_it_is_killed(home):
    before = servers()
    process = subprocess.Popen(
        [sys.executable, "-m", "moa_chat", "ask", "--preset", "local", "--no-save", "Write a long story."],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env(home),
    )
    try:
        assert wait_for(lambda: servers() - before, 120), "the local server never started"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert wait_for(lambda: servers() <= before, 15), "the llama.cpp server was orphaned"


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
