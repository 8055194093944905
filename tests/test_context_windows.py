"""Each slot's context window: from the config, from the provider's own metadata (asked on the real wire,
once per process), or learned from an overflow error and kept in the store; never guessed."""

from __future__ import annotations

import time

import pytest
from moa_chat.config import Slot, load_config_text
from moa_chat.llm import ContextOverflow
from moa_chat.llm.overflow import Overflow
from moa_chat.llm.windows import AskedWindows, LearnedWindow, Window, WindowFinder
from moa_chat.providers.local import DEFAULT_N_CTX, N_CTX_ENV, LocalProviderError, context_size
from moa_chat.providers.loopback_windows import ModelWindow
from moa_chat.store import SessionStore
from scripted_server import ScriptedServer

SERVED = {
    "served": ModelWindow(32768, "vllm"),
    "routed": ModelWindow(200000, "openrouter"),
    "fast": ModelWindow(131072, "groq"),
    "llama": ModelWindow(4096, "llama.cpp", trained=131072),
    "smol": ModelWindow(2048, "llama-cpp-python"),
    "gpt": ModelWindow(128000, "openai"),
}


@pytest.fixture
def server():
    served = ScriptedServer(windows=SERVED)
    yield served
    served.stop()


def config_for(server: ScriptedServer, extra: str = ""):
    """`wire` and `ollama` on the server; `extra` adds to wire's settings."""
    return load_config_text(
        f"providers:\n  ollama:\n    base_url: {server.base_url}\n"
        f"  wire:\n    base_url: {server.base_url}\n    max_retries: 0\n{extra}"
    )


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("served", Window(32768, "provider", "provider: /models max_model_len (vLLM)")),
        ("routed", Window(200000, "provider", "provider: /models context_length")),
        ("fast", Window(131072, "provider", "provider: /models context_window")),
        # llama.cpp's /models says n_ctx_train (131072): the length it was trained on, not its window.
        ("llama", Window(4096, "provider", "provider: llama.cpp /props n_ctx")),
        ("smol", Window(None, "unknown", "unknown: /models does not say")),
        ("gpt", Window(None, "unknown", "unknown: /models does not say")),
        ("missing", Window(None, "unknown", "unknown: /models does not list missing")),
    ],
)
def test_the_provider_tells_its_window_in_its_own_metadata(server, model, window):
    finder = WindowFinder(config_for(server))
    assert finder.window(Slot("wire", model)) == window


def test_the_config_wins_over_the_provider(server):
    config = config_for(server, "    models:\n      served: {context_window: 16000}\n")
    finder = WindowFinder(config)
    stated = finder.window(Slot("wire", "served"))
    assert stated == Window(16000, "config", "config: providers: wire: models: served: context_window")
    on_slot = finder.window(Slot("wire", "served", context_window=8000))
    assert on_slot == Window(8000, "config", "config: context_window on the slot wire:served")
    assert server.server.windows.asked == []  # a window the config states needs no question
    assert str(on_slot) == "8,000 tokens (config: context_window on the slot wire:served)"


def test_each_provider_and_model_is_asked_once_per_process(server):
    config = config_for(server)
    for _ in range(3):
        finder = WindowFinder(config)
        assert finder.window(Slot("wire", "served")).tokens == 32768
        assert finder.window(Slot("wire", "routed", temperature=0.2)).tokens == 200000
        assert finder.window(Slot("wire", "llama")).tokens == 4096
    assert server.server.windows.asked == ["/v1/models", "/props"]  # one model list for the whole server


def test_known_never_asks(server):
    config = config_for(server)
    finder = WindowFinder(config)
    slot = Slot("wire", "served")
    assert finder.known(slot) == Window(None, "unknown", "unknown: the provider has not been asked")
    assert server.server.windows.asked == []
    finder.window(slot)
    assert WindowFinder(config).known(slot).tokens == 32768  # what another finder of this process was told


def test_a_provider_that_cannot_be_asked_leaves_the_window_unknown_saying_why(server):
    server.stop()
    finder = WindowFinder(config_for(server))
    window = finder.window(Slot("wire", "served"))
    assert window.tokens is None and window.origin == "unknown"
    assert window.source.startswith("unknown: could not ask /models: cannot reach the endpoint")


def test_a_provider_without_its_key_is_not_asked():
    config = load_config_text("")
    window = WindowFinder(config).window(Slot("openrouter", "anthropic/claude-sonnet-4"))
    assert window == Window(None, "unknown", "unknown: not asked: OPENROUTER_API_KEY is not set")


def test_ollama_says_the_window_it_loaded_the_model_with_and_before_that_only_a_modelfiles_num_ctx(server):
    loaded = ScriptedServer(
        windows={
            "llama3.2": ModelWindow(4096, "ollama", loaded=True, trained=131072),
            "qwen": ModelWindow(8192, "ollama", loaded=False, num_ctx=16384, trained=32768),
            "big": ModelWindow(4096, "ollama", loaded=False, num_ctx=65536, trained=32768),
            "plain": ModelWindow(4096, "ollama", loaded=False, trained=131072),
        }
    )
    try:
        finder = WindowFinder(config_for(loaded))
        assert finder.window(Slot("ollama", "llama3.2:latest")) == Window(
            4096, "provider", "provider: Ollama /api/ps context_length (the loaded model)"
        )
        qwen = finder.window(Slot("ollama", "qwen"))
        assert qwen == Window(16384, "provider", "provider: Ollama /api/show num_ctx (the model's Modelfile)")
        assert finder.window(Slot("ollama", "big")).tokens == 32768  # never more than it was trained on
        # Not loaded and no num_ctx: Ollama picks a window when it loads the model (its memory, its settings).
        plain = finder.window(Slot("ollama", "plain"))
        assert plain == Window(None, "unknown", "unknown: Ollama chooses it when it loads the model; not loaded yet")
    finally:
        loaded.stop()


def test_an_unsettled_answer_is_asked_again_after_a_while(server):
    now = [0.0]
    asked: list[str] = []

    def ask(config, provider, model):
        from moa_chat.llm.discovery import ProviderWindow

        asked.append(model)
        if len(asked) == 1:
            return ProviderWindow(None, "Ollama chooses it when it loads the model; not loaded yet", settled=False)
        return ProviderWindow(8192, "Ollama /api/ps context_length (the loaded model)")

    answers = AskedWindows(ask, clock=lambda: now[0], retry_after=30)
    finder = WindowFinder(config_for(server), asked=answers)
    slot = Slot("ollama", "llama3.2")
    assert finder.window(slot).tokens is None
    now[0] = 29.0
    assert finder.window(slot).tokens is None and asked == ["llama3.2"]
    now[0] = 31.0
    assert finder.window(slot).tokens == 8192 and asked == ["llama3.2", "llama3.2"]
    now[0] = 1000.0
    assert finder.window(slot).tokens == 8192 and len(asked) == 2  # settled: never asked again


def test_the_local_provider_knows_its_own_window_without_asking(monkeypatch):
    finder = WindowFinder(load_config_text(""))
    local = Slot("local", "smollm2")
    assert finder.known(local) == Window(DEFAULT_N_CTX, "provider", "provider: the local server's n_ctx (the default)")
    monkeypatch.setenv(N_CTX_ENV, "4096")
    assert context_size() == 4096
    assert finder.window(local) == Window(4096, "provider", f"provider: the local server's n_ctx ({N_CTX_ENV}=4096)")
    monkeypatch.setenv(N_CTX_ENV, "lots")
    with pytest.raises(LocalProviderError, match=f"{N_CTX_ENV}=lots: the local model's context window must be a whole"):
        context_size()
    assert finder.known(local).tokens is None and N_CTX_ENV in finder.known(local).source
    assert WindowFinder(load_config_text("")).window(Slot("demo", "any")).tokens is None


def test_a_window_learned_from_an_overflow_is_kept_so_a_later_process_starts_knowing_it(home, server):
    config = config_for(server)
    store = SessionStore()
    finder = WindowFinder(config, store.model_facts)
    slot = Slot("wire", "gpt")
    assert finder.window(slot).tokens is None
    overflow = ContextOverflow(provider="wire", model="gpt", window=128000, prompt_tokens=130412)
    learned = finder.learn(slot, overflow)
    assert learned.tokens == 128000 and learned.origin == "learned"
    assert learned.source.startswith("learned from an overflow error on ")
    store.close()

    later_store = SessionStore()
    kept = later_store.model_facts.learned_window("wire", "gpt")
    assert kept is not None and (kept.tokens, kept.prompt_tokens, kept.provider_said) == (128000, 130412, None)
    later = WindowFinder(config, later_store.model_facts, asked=AskedWindows())
    assert later.known(slot).tokens == 128000  # before asking anything
    assert later.window(slot).tokens == 128000  # the provider still says nothing
    assert later.learn(slot, Overflow(None, 5000)).tokens == 128000  # an error naming no window teaches nothing


def test_a_providers_number_wins_unless_the_overflow_came_while_it_said_that_very_number(home, server):
    config = config_for(server)
    store = SessionStore()
    finder = WindowFinder(config, store.model_facts)
    slot = Slot("wire", "routed")
    assert finder.window(slot).tokens == 200000
    # OpenRouter routed to an upstream with a smaller window: its error is what it enforces.
    learned = finder.learn(slot, Overflow(window=163840, prompt_tokens=170000))
    assert learned.tokens == 163840 and learned.origin == "learned"
    assert "(the provider's metadata says 200,000: /models context_length)" in learned.source
    assert store.model_facts.learned_window("wire", "routed").provider_said == 200000
    # The same server, later telling another number (it was reconfigured): the provider's number again.
    store.model_facts.learn_window("wire", "routed", LearnedWindow(163840, None, 100000, time.time()))
    assert WindowFinder(config, store.model_facts).window(slot).tokens == 200000


def test_a_learned_window_smaller_than_the_configs_is_shown_beside_it(home, server):
    config = config_for(server, "    models:\n      gpt: {context_window: 200000}\n")
    store = SessionStore()
    finder = WindowFinder(config, store.model_facts)
    window = finder.learn(Slot("wire", "gpt"), Overflow(window=128000))
    assert window.tokens == 200000 and window.origin == "config"
    assert window.source.endswith(" said 128,000)")


def test_the_store_keeps_windows_and_calibrations_side_by_side(home):
    from moa_chat.llm.tokens import Calibration

    store = SessionStore()
    facts = store.model_facts
    assert facts.learned_window("p", "m") is None and facts.calibration("p", "m") is None
    facts.calibrate("p", "m", Calibration(0.9, 3, 10.0))
    facts.learn_window("p", "m", LearnedWindow(4096, 5000, None, 20.0))
    facts.calibrate("p", "m", Calibration(0.8, 4, 30.0))
    assert facts.learned_window("p", "m") == LearnedWindow(4096, 5000, None, 20.0)
    assert facts.calibration("p", "m") == Calibration(0.8, 4, 30.0)
    store.close()
    from moa_chat.store import default_path
    from moa_chat.store.model_facts import ModelFacts

    reader = ModelFacts.reader(default_path())
    assert reader.learned_window("p", "m") == LearnedWindow(4096, 5000, None, 20.0)
    assert ModelFacts.reader(default_path().with_name("none.db")).learned_window("p", "m") is None


def test_a_database_from_before_model_facts_gains_them(tmp_path):
    import shutil
    from pathlib import Path

    from moa_chat.store.migrations import SCHEMA_VERSION

    path = tmp_path / "sessions.db"
    shutil.copy(Path(__file__).parent / "fixtures" / "sessions-v1.db", path)
    store = SessionStore(path)
    assert SCHEMA_VERSION >= 8  # model_facts came in 8; later steps keep it
    store.model_facts.learn_window("local", "smollm2", LearnedWindow(2048, 2100, None, 1.0))
    assert store.model_facts.learned_window("local", "smollm2") == LearnedWindow(2048, 2100, None, 1.0)
    assert len(store.sessions()) == 1  # the conversations it held are all there


def test_an_ollama_that_does_not_answer_leaves_the_window_unknown_saying_so(server):
    config = config_for(server)
    server.stop()
    window = WindowFinder(config).window(Slot("ollama", "llama3.2"))
    assert window == Window(
        None, "unknown", f"unknown: Ollama does not answer at {server.base_url.removesuffix('/v1')}"
    )
