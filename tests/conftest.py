from __future__ import annotations

import os

# Before Textual is imported anywhere: no animations, so spinners and scrolling are deterministic.
os.environ["TEXTUAL_ANIMATIONS"] = "none"

import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from scripted_server import ScriptedServer

_KEY_VARS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENROUTER_API_KEY",
    "TOGETHER_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "MISTRAL_API_KEY",
)


@pytest.fixture(autouse=True)
def hermetic_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No real keys, no user config: every test gets its own MOA_CHAT_HOME and an instant demo."""
    for var in _KEY_VARS:
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "moa-home"
    home.mkdir()
    monkeypatch.setenv("MOA_CHAT_HOME", str(home))
    monkeypatch.setenv("MOA_CHAT_DEMO_PACE", "0")
    # No real clipboard tool or tmux server is reached from a test (F5 would copy to the desktop's).
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "TMUX"):
        monkeypatch.delenv(var, raising=False)
    # Keyless starts land on the deterministic demo even where the local model is installed.
    monkeypatch.setenv("MOA_CHAT_OFFLINE_PRESET", "demo")
    # Whether the local extra is installed changes no in-process test (the preset picker's snapshot, the `local`
    # preset with a stand-in server): it counts as installed. A moa-chat process of its own checks for real.
    from moa_chat.providers import lifecycle

    monkeypatch.setitem(lifecycle.PREREQUISITES, "local", lambda: None)
    # An Ollama that happens to run on this machine is never asked: its default address reads as absent (the
    # chat asks it at start). Tests that want one point the ollama provider at a server of their own.
    from moa_chat.providers import ollama

    probe = ollama._probe
    ollama.forget()

    def hermetic(base_url: str) -> tuple[str, ...] | None:
        return None if base_url.rstrip("/").endswith(":11434/v1") else probe(base_url)

    monkeypatch.setattr(ollama, "_probe", hermetic)
    # The chat asks Ollama again every few seconds: a test asks when it wants to (MoAChatApp.recheck_ollama).
    from moa_chat.tui.app import MoAChatApp

    monkeypatch.setattr(MoAChatApp, "OLLAMA_RECHECK", None)
    # Context windows a provider told an earlier test are not this one's (a port is reused); Ollama's default
    # address is never asked, as above.
    from moa_chat.llm import discovery, windows

    def ask(config, provider, model):
        spec = config.providers.get(provider)
        if spec is not None and (spec.base_url or "").rstrip("/").endswith(":11434/v1"):
            return discovery.ProviderWindow(None, "could not ask Ollama /api/ps: no Ollama in tests", settled=False)
        return discovery.ask_provider(config, provider, model, timeout=discovery.DISCOVERY_TIMEOUT)

    monkeypatch.setattr(windows, "ASKED", windows.AskedWindows(ask))
    discovery.forget_model_lists()
    return home


@pytest.fixture
def home(hermetic_env: Path) -> Path:
    return hermetic_env


@pytest.fixture
def llm_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    yield server
    server.stop()


WIRE_CONFIG = """
providers:
  wire:
    base_url: {base_url}
    max_retries: 0
moa:
  default_preset: wire
  presets:
    wire:
      description: Three references and an aggregator on the test server
      reference_models:
        - provider: wire
          model: ref-a
        - provider: wire
          model: ref-b
        - provider: wire
          model: ref-c
      aggregator:
        provider: wire
        model: agg
{extra}
"""


def run_moa(
    *args: str, cwd: Path | None = None, before: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[str]:
    """`moa-chat ARGS` as a process of its own (in `cwd`; `before` runs in the child before it starts)."""
    return subprocess.run(
        [sys.executable, "-m", "moa_chat", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
        cwd=cwd,
        preexec_fn=before,
    )


def write_config(home: Path, text: str) -> Path:
    path = home / "config.yaml"
    path.write_text(textwrap.dedent(text).strip() + "\n", encoding="utf-8")
    return path


@pytest.fixture
def wire_config(home: Path, llm_server: ScriptedServer):
    """Writes a config whose `wire` preset talks to the test server; returns a loader taking extra YAML."""
    from moa_chat.config import load_config

    def make(extra: str = ""):
        path = write_config(
            home,
            WIRE_CONFIG.format(
                base_url=llm_server.base_url,
                extra=textwrap.indent(textwrap.dedent(extra).strip(), "      ") if extra else "",
            ),
        )
        return load_config(path)

    return make


@pytest.fixture
def api(home: Path, llm_server: ScriptedServer):
    """`moa-chat api` as a real process on a free port, its `wire` presets on the scripted server."""
    from api_helpers import configure, start_api

    configure(home, llm_server)
    server = start_api(home)
    yield server
    server.stop()


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every duration moa-chat shows comes from moa_chat.engine.clock: frozen, they all read 0.0s."""
    monkeypatch.setattr("moa_chat.engine.clock.monotonic", lambda: 1000.0)
