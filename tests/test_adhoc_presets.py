"""Models without editing YAML: --aggregator and --reference build a one-off preset, and a
provider's /models list is read over the wire."""

from __future__ import annotations

import pytest
from conftest import WIRE_CONFIG, write_config
from moa_chat.config import ConfigError, load_config
from moa_chat.config.adhoc import ADHOC_PRESET, adhoc_preset, parse_model, with_preset
from moa_chat.llm import LLMCallError, list_models


@pytest.fixture
def config(home, llm_server):
    return load_config(write_config(home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra="")))


def test_a_model_is_provider_colon_model_and_the_model_may_hold_colons(config):
    slot = parse_model("ollama:llama3:8b", config, "--reference")
    assert (slot.provider, slot.model) == ("ollama", "llama3:8b")
    with pytest.raises(ConfigError, match=r"--aggregator 'gpt-4o': expected provider:model"):
        parse_model("gpt-4o", config, "--aggregator")
    with pytest.raises(ConfigError, match=r"unknown provider 'opnai' \(did you mean 'openai'\?\)"):
        parse_model("opnai:gpt-4o", config, "--aggregator")


def test_an_adhoc_preset_replaces_only_what_was_given(config):
    base = config.preset("wire")
    only_aggregator = adhoc_preset(config, base, aggregator="wire:big")
    assert only_aggregator.name == ADHOC_PRESET
    assert only_aggregator.aggregator.label == "wire:big"
    assert only_aggregator.reference_models == base.reference_models
    only_refs = adhoc_preset(config, base, references=["wire:x", "wire:y"])
    assert [s.label for s in only_refs.references] == ["wire:x", "wire:y"]
    assert only_refs.aggregator == base.aggregator
    assert only_refs.description == "wire with references wire:x, wire:y"
    merged = with_preset(config, only_refs)
    assert merged.preset(ADHOC_PRESET) is only_refs and ADHOC_PRESET not in config.presets


def test_ask_with_aggregator_and_references_sends_to_those_models(config, llm_server, capsys):
    from moa_chat.cli import main

    code = main(
        ["ask", "--no-save", "--aggregator", "wire:judge", "--reference", "wire:r1", "--reference", "wire:r2", "q"]
    )
    assert code == 0
    assert {r.model for r in llm_server.requests} == {"judge", "r1", "r2"}
    assert "preset custom — 2 references → wire:judge" in capsys.readouterr().err


def test_ask_with_an_unknown_provider_exits_2_naming_it(config, capsys):
    from moa_chat.cli import main

    assert main(["ask", "--aggregator", "nowhere:model", "q"]) == 2
    assert "--aggregator 'nowhere:model': unknown provider 'nowhere'" in capsys.readouterr().err


def test_a_providers_models_are_listed_over_the_wire(config, llm_server):
    llm_server.server.models = ["b-model", "a-model"]
    assert list_models("wire", config) == ["a-model", "b-model"]


def test_a_provider_that_cannot_list_models_says_so(home):
    config = load_config(write_config(home, "providers:\n  gone:\n    base_url: http://127.0.0.1:9/v1\n"))
    with pytest.raises(LLMCallError, match=r"gone:\* failed: could not list its models: connection refused"):
        list_models("gone", config)


async def test_the_chat_lists_a_providers_models_and_swaps_the_aggregator_for_the_session(home):
    from moa_chat.tui.commands import ModelCommands
    from moa_chat.tui.screens.model_picker import ModelPicker
    from moa_chat.tui.widgets.sidebar import ReferenceSidebar
    from textual.widgets import OptionList
    from tui_helpers import make_app, run_turn, wait_until

    config = load_config()
    app = make_app(config, "demo")
    async with app.run_test(size=(120, 36)) as pilot:
        commands = [c for c, _, _ in ModelCommands(app.screen)._entries()]
        assert "Models from demo: use as aggregator" in commands
        assert not any("openrouter" in c for c in commands)  # no key: its /models would only refuse
        app.chat.choose_model("demo", as_aggregator=True)
        await wait_until(pilot, lambda: isinstance(app.screen, ModelPicker) and app.screen.models)
        await pilot.press(*"skep")
        options = app.screen.query_one(OptionList)
        assert [options.get_option_at_index(i).id for i in range(options.option_count)] == ["simulated-skeptic"]
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.session.preset.name == "custom")
        assert app.session.preset.aggregator.label == "demo:simulated-skeptic"
        await wait_until(
            pilot, lambda: app.query_one(ReferenceSidebar).aggregator_card.label == "demo:simulated-skeptic"
        )
        app.chat.choose_model("demo", as_aggregator=False)
        await wait_until(pilot, lambda: isinstance(app.screen, ModelPicker) and app.screen.models)
        await pilot.press(*"analyst", "enter")
        await wait_until(pilot, lambda: len(app.session.preset.references) == 4)
        await run_turn(pilot, "hello")
        assert [c.status for c in app.query_one(ReferenceSidebar).cards()] == ["ok"] * 4
