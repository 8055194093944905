"""The chat offers the models a local Ollama has pulled: asked after the first paint, on a worker
thread; F2, the palette and "Models from ollama" list them, and a chosen one runs as a Self-MoA. When Ollama
is not running, nothing changes and nothing waits.

"Ollama" here is the scripted OpenAI-compatible server that also answers Ollama's own `GET /api/tags`, on
127.0.0.1: the ollama provider's base_url points at it, so the models chosen really answer over the wire.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator

import pytest
from conftest import write_config
from moa_chat.cli import main
from moa_chat.config import Preset, Slot, load_config
from moa_chat.providers import ollama
from moa_chat.tui.commands import ModelCommands
from moa_chat.tui.screens.model_picker import ModelPicker
from moa_chat.tui.screens.preset_picker import MODEL_OPTION, PresetPicker
from moa_chat.tui.widgets.prompt_input import PromptInput
from moa_chat.tui.widgets.sidebar import ReferenceSidebar
from scripted_server import ScriptedServer
from textual.widgets import OptionList
from tui_helpers import make_app, run_turn, wait_until

PULLED = ["qwen2.5:7b", "llama3.2:latest"]


class FakeOllama(ScriptedServer):
    """Chat completions as scripted, and `/api/tags` as Ollama lists its models; `up = False` answers 503
    (as good as not running), `hold` keeps the list back until it is set."""

    def __init__(self) -> None:
        super().__init__()
        self.models = list(PULLED)
        self.up = True
        self.hold: threading.Event | None = None
        self.asked = 0
        owner = self
        base = self.server._httpd.RequestHandlerClass

        class Handler(base):
            def do_GET(self) -> None:
                if self.path != "/api/tags":
                    super().do_GET()
                    return
                owner.asked += 1
                if owner.hold is not None:
                    owner.hold.wait(60)
                body = json.dumps({"models": [{"name": name, "size": 1} for name in owner.models]}).encode()
                self.send_response(200 if owner.up else 503)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server._httpd.RequestHandlerClass = Handler


@pytest.fixture
def fake_ollama(home) -> Iterator[FakeOllama]:
    server = FakeOllama()
    write_config(home, f"providers:\n  ollama:\n    base_url: {server.base_url}\n")
    yield server
    if server.hold is not None:
        server.hold.set()
    server.stop()


def option_ids(options: OptionList) -> list[str]:
    return [options.get_option_at_index(i).id or "" for i in range(options.option_count)]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_f2_offers_ollamas_models_and_one_runs_as_a_self_moa(fake_ollama):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.ollama_checked)
        assert app.ollama_models == ("llama3.2", "qwen2.5:7b")  # `:latest` is how nobody types it
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, PresetPicker))
        options = app.screen.query_one(OptionList)
        ids = option_ids(options)
        assert ids[-2:] == [MODEL_OPTION + "llama3.2", MODEL_OPTION + "qwen2.5:7b"]
        assert "3 samples → ollama:qwen2.5:7b" in options.get_option(MODEL_OPTION + "qwen2.5:7b").prompt.plain
        # The bundled ollama preset names models this Ollama has not pulled: the row says which.
        assert "Ollama has not pulled mistral, qwen2.5" in options.get_option("ollama").prompt.plain
        options.highlighted = options.get_option_index(MODEL_OPTION + "qwen2.5:7b")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.session.preset.name == "custom")
        preset = app.session.preset
        assert preset.aggregator.label == "ollama:qwen2.5:7b"
        assert [(s.label, s.samples) for s in preset.references] == [("ollama:qwen2.5:7b", 3)]
        assert preset.max_workers == 2  # the ollama preset's settings, made for models on this machine
        await run_turn(pilot, "hello")
        assert [c.status for c in app.query_one(ReferenceSidebar).cards()] == ["ok"] * 3
        assert len(fake_ollama.requests_for("qwen2.5:7b")) == 4  # three samples and the aggregator
        assert fake_ollama.asked == 2  # at start, and again as F2 opened


async def test_the_palette_and_models_from_ollama_list_what_it_has_pulled(fake_ollama):
    fake_ollama.server.models = []  # its OpenAI-style /v1/models says nothing: the list is Ollama's own
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.ollama_checked)
        commands = {c: callback for c, _, callback in ModelCommands(app.screen)._entries()}
        assert "Ollama model llama3.2: Self-MoA" in commands
        commands["Ollama model llama3.2: Self-MoA"]()
        await wait_until(pilot, lambda: app.session.preset.aggregator.label == "ollama:llama3.2")
        app.chat.choose_model("ollama", as_aggregator=False)
        await wait_until(pilot, lambda: isinstance(app.screen, ModelPicker) and app.screen.models)
        assert app.screen.models == ["llama3.2", "qwen2.5:7b"]
        await pilot.press(*"qwen", "enter")
        await wait_until(pilot, lambda: len(app.session.preset.references) == 2)
        assert [s.label for s in app.session.preset.references] == ["ollama:llama3.2", "ollama:qwen2.5:7b"]


async def test_asking_ollama_never_holds_up_the_chat_and_an_open_picker_fills_in(fake_ollama, monkeypatch):
    monkeypatch.setattr(ollama, "TIMEOUT", 60.0)  # an Ollama that takes its time (a busy machine)
    fake_ollama.hold = threading.Event()
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: fake_ollama.asked == 1)
        # Ollama has not answered: the chat is painted, takes keys, and F2 lists the presets alone.
        prompt = app.query_one(PromptInput)
        await pilot.press(*"hi")
        assert prompt.text == "hi"
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, PresetPicker))
        options = app.screen.query_one(OptionList)
        assert not any(i.startswith(MODEL_OPTION) for i in option_ids(options))
        options.highlighted = options.get_option_index("frontier")
        assert not app.ollama_checked
        fake_ollama.hold.set()
        await wait_until(pilot, lambda: MODEL_OPTION + "llama3.2" in option_ids(options))
        assert options.highlighted_option is not None and options.highlighted_option.id == "frontier"


async def test_ollama_started_after_the_chat_is_found_by_models_from_ollama(fake_ollama):
    fake_ollama.up = False
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.ollama_checked)
        assert app.ollama_models is None
        fake_ollama.up = True  # `ollama serve` in another terminal
        app.chat.choose_model("ollama", as_aggregator=True)
        await wait_until(pilot, lambda: isinstance(app.screen, ModelPicker) and app.screen.models)
        await wait_until(pilot, lambda: app.ollama_models == ("llama3.2", "qwen2.5:7b"))
        await pilot.press("escape")
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, PresetPicker))
        assert MODEL_OPTION + "qwen2.5:7b" in option_ids(app.screen.query_one(OptionList))


@pytest.mark.parametrize("where", ["closed port", "default address"])
async def test_without_ollama_nothing_changes(home, where):
    if where == "closed port":
        write_config(home, f"providers:\n  ollama:\n    base_url: http://127.0.0.1:{closed_port()}/v1\n")
    config = load_config()
    app = make_app(config, "demo")
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.ollama_checked)
        assert app.ollama_models is None
        assert not any(c.startswith("Ollama model") for c, _, _ in ModelCommands(app.screen)._entries())
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, PresetPicker))
        options = app.screen.query_one(OptionList)
        prompts = [options.get_option_at_index(i).prompt.plain for i in range(options.option_count)]
        assert not any(i.startswith(MODEL_OPTION) for i in option_ids(options))
        assert not any("Ollama's models" in p or "not pulled" in p for p in prompts)  # as if it did not exist
        await pilot.press("escape")
        app.chat.choose_model("ollama", as_aggregator=True)
        address = config.providers["ollama"].base_url.removesuffix("/v1")

        def status() -> str:
            found = app.screen.query("#model-status") if isinstance(app.screen, ModelPicker) else None
            return found.first().render().plain if found else ""

        await wait_until(pilot, lambda: "not answering" in status(), describe=status)
        assert status() == f"Ollama is not answering at {address}: start it with `ollama serve`"


def test_not_pulled_names_only_ollamas_own_models_by_short_name():
    preset = Preset(
        "mixed",
        reference_models=(
            Slot("ollama", "llama3.2:latest"),
            Slot("demo", "simulated-analyst"),  # another provider's model: not Ollama's to pull
            Slot("ollama", "phi3", enabled=False),  # takes no part in a turn
        ),
        aggregator=Slot("ollama", "qwen2.5"),
    )
    assert ollama.not_pulled(preset, ["llama3.2", "qwen2.5:7b"]) == ["qwen2.5"]  # a tag is another model
    assert ollama.not_pulled(preset, ["llama3.2:latest", "qwen2.5:latest"]) == []  # `:latest` on either side
    assert ollama.not_pulled(preset, []) == ["llama3.2", "qwen2.5"]  # as Ollama lets you call them, sorted
    twice = Preset("twice", (Slot("ollama", "llama3.2"), Slot("ollama", "llama3.2:latest")), Slot("ollama", "llama3.2"))
    assert ollama.not_pulled(twice, ()) == ["llama3.2"]


# The user's own `ollama` preset in place of the bundled one (`moa-chat presets` speaks of Ollama for that name):
# one Ollama reference by its tagged name, one on another provider.
MIXED_OLLAMA_PRESET = """\
moa:
  presets:
    ollama:
      reference_models:
        - {provider: ollama, model: "llama3.2:latest"}
        - {provider: demo, model: simulated-analyst}
      aggregator: {provider: ollama, model: qwen2.5}
"""


def not_pulled_in(text: str, pattern: str) -> list[str]:
    found = re.search(pattern, text)
    assert found, text
    return found.group(1).split(", ")


@pytest.mark.parametrize(
    ("user_presets", "expected"),
    [("", ["mistral", "qwen2.5"]), (MIXED_OLLAMA_PRESET, ["qwen2.5"])],
    ids=["bundled", "mixed providers"],
)
async def test_moa_chat_presets_and_f2_name_the_same_models_not_pulled(
    fake_ollama, home, capsys, user_presets, expected
):
    write_config(home, f"providers:\n  ollama:\n    base_url: {fake_ollama.base_url}\n{user_presets}")
    assert main(["presets"]) == 0
    listed = not_pulled_in(capsys.readouterr().out, r"Ollama has: llama3\.2, qwen2\.5:7b; not pulled: (.*) \(use any")
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.ollama_checked)
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, PresetPicker))
        row = app.screen.query_one(OptionList).get_option("ollama").prompt.plain
    assert listed == not_pulled_in(row, r"Ollama has not pulled (.*)$") == expected


async def test_models_offered_to_an_open_picker_leave_its_hint_in_the_panel(home):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(160, 40)) as pilot:  # room for the presets alone, not for 25 models more
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, PresetPicker))
        await pilot.pause()
        picker = app.screen
        assert isinstance(picker, PresetPicker)
        panel, hint = picker.query_one("#picker"), picker.query_one(".modal-hint")
        options = picker.query_one(OptionList)
        assert panel.content_region.contains_region(hint.region) and options.max_scroll_y == 0
        models = tuple(f"model{n}" for n in range(25))
        picker.offer_ollama(models)
        await wait_until(pilot, lambda: MODEL_OPTION + "model24" in option_ids(options))
        await pilot.pause()
        await pilot.pause()
        assert panel.content_region.contains_region(hint.region), (hint.region, panel.content_region)
        assert options.max_scroll_y > 0  # the rest of the list is a scroll away
