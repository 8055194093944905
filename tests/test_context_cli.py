"""`moa-chat presets` and `moa-chat doctor` show each slot's context window and where it came from."""

from __future__ import annotations

import json

import pytest
from conftest import write_config
from moa_chat.cli import main
from moa_chat.llm.windows import LearnedWindow
from moa_chat.providers.loopback_windows import ModelWindow
from moa_chat.store import SessionStore
from scripted_server import ScriptedServer


@pytest.fixture
def served(home):
    server = ScriptedServer(windows={"served": ModelWindow(32768, "vllm"), "gpt": ModelWindow(128000, "openai")})
    write_config(
        home,
        f"""
providers:
  wire:
    base_url: {server.base_url}
    models:
      stated: {{context_window: 16000}}
moa:
  default_preset: wire
  presets:
    wire:
      compact_model: wire:stated
      reference_models:
        - {{provider: wire, model: served}}
        - {{provider: wire, model: gpt}}
      aggregator: {{provider: wire, model: served, context_window: 8000}}
""",
    )
    yield server
    server.stop()


def test_presets_shows_each_models_window_and_where_it_came_from(served, capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    assert "windows: wire:served 32,768 tokens (provider: /models max_model_len (vLLM))" in out
    assert "wire:gpt unknown (/models does not say)" in out
    assert "wire:stated 16,000 tokens (config: providers: wire: models: stated: context_window)" in out
    # A model in several seats is listed once, by its first seat's window.
    assert out.count("wire:served ") == 1
    assert "windows: unknown (not asked: OPENROUTER_API_KEY is not set)" in out  # frontier: one line for all
    assert "windows: 8,192 tokens (provider: the local server's n_ctx (the default))" in out

    assert main(["presets", "--json"]) == 0
    wire = next(p for p in json.loads(capsys.readouterr().out) if p["name"] == "wire")
    assert wire["windows"] == [
        {
            "slot": "reference 1",
            "model": "wire:served",
            "context_window": 32768,
            "origin": "provider",
            "source": "provider: /models max_model_len (vLLM)",
        },
        {
            "slot": "reference 2",
            "model": "wire:gpt",
            "context_window": None,
            "origin": "unknown",
            "source": "unknown: /models does not say",
        },
        {
            "slot": "aggregator",
            "model": "wire:served",
            "context_window": 8000,
            "origin": "config",
            "source": "config: context_window on the slot wire:served",
        },
        {
            "slot": "compaction",
            "model": "wire:stated",
            "context_window": 16000,
            "origin": "config",
            "source": "config: providers: wire: models: stated: context_window",
        },
    ]
    assert served.server.windows.asked == ["/v1/models"]  # once, for both listings


def test_a_window_learned_in_an_earlier_session_is_shown_without_asking(served, capsys):
    store = SessionStore()
    store.model_facts.learn_window("wire", "gpt", LearnedWindow(128000, 130412, None, 1_700_000_000.0))
    store.close()
    assert main(["presets"]) == 0
    assert "wire:gpt 128,000 tokens (learned from an overflow error on 2023-11-1" in capsys.readouterr().out


def test_doctor_shows_the_windows_of_your_presets_as_information(served, capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "· windows of wire: wire:served 32,768 tokens (provider: /models max_model_len (vLLM))" in out
    assert "· windows of wire: wire:gpt unknown (/models does not say); context_window: in the config states one" in out
    assert "all is well" in out
