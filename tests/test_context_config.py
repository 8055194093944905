"""The config keys of context windows and compaction: parsed, checked with file, line and key, and defaulted."""

from __future__ import annotations

import pytest
from conftest import write_config
from moa_chat.config import ConfigError, load_config
from moa_chat.config.model import DEFAULT_COMPACT_AT, DEFAULT_OUTPUT_RESERVE

WINDOWS = """
providers:
  openrouter:
    models:
      "anthropic/claude-sonnet-4": {context_window: 200000}
  mine:
    base_url: http://127.0.0.1:9/v1
    models:
      small: {context_window: 4096}
moa:
  presets:
    long:
      compact_model: openrouter:openai/gpt-4o-mini
      compact_at: 0.6
      output_reserve: 1024
      reference_models:
        - {provider: mine, model: small}
        - {provider: mine, model: small, context_window: 2048, max_tokens: 300}
      aggregator: {provider: openrouter, model: anthropic/claude-sonnet-4}
    plain:
      reference_models: [{provider: mine, model: other}]
      aggregator: {provider: mine, model: other}
"""


def test_windows_stated_on_a_slot_win_over_the_providers_models(home):
    config = load_config(write_config(home, WINDOWS))
    preset = config.preset("long")
    first, second = preset.references
    assert config.stated_window(first) == (4096, "providers: mine: models: small: context_window")
    assert config.stated_window(second) == (2048, "context_window on the slot mine:small")
    assert config.stated_window(preset.aggregator) == (
        200000,
        "providers: openrouter: models: anthropic/claude-sonnet-4: context_window",
    )
    assert config.stated_window(config.preset("plain").aggregator) is None
    # A built-in provider keeps its address and key when the config only adds models to it.
    assert config.providers["openrouter"].base_url == "https://openrouter.ai/api/v1"
    assert config.providers["openrouter"].api_key_env == "OPENROUTER_API_KEY"


def test_compaction_settings_and_the_output_reserve(home):
    config = load_config(write_config(home, WINDOWS))
    preset = config.preset("long")
    assert preset.compactor.label == "openrouter:openai/gpt-4o-mini"
    assert preset.compact_at == 0.6
    first, second = preset.references
    assert preset.reserve_for(first) == 1024  # no max_tokens: the preset's output_reserve
    assert preset.reserve_for(second) == 300  # its own max_tokens
    plain = config.preset("plain")
    assert plain.compactor is plain.aggregator
    assert plain.compact_at == DEFAULT_COMPACT_AT == 0.8
    assert plain.reserve_for(plain.aggregator) == DEFAULT_OUTPUT_RESERVE == 2048


def test_a_compact_model_as_a_slot_mapping(home):
    config = load_config(
        write_config(
            home,
            """
moa:
  presets:
    p:
      compact_model: {provider: openai, model: gpt-4o-mini, max_tokens: 800, context_window: 128000}
      reference_models: [{provider: openai, model: a}]
      aggregator: {provider: openai, model: b}
""",
        )
    )
    compactor = config.preset("p").compactor
    assert (compactor.label, compactor.max_tokens, compactor.context_window) == ("openai:gpt-4o-mini", 800, 128000)


@pytest.mark.parametrize(
    ("yaml", "message", "line"),
    [
        (
            "providers: {openai: {models: {gpt-4o: {context_window: 0}}}}",
            "provider 'openai' model 'gpt-4o': context_window must be a whole number >= 1 (at most 100,000,000), not 0",
            1,
        ),
        (
            "providers:\n  openai:\n    models:\n      gpt-4o:\n        window: 5\n",
            "provider 'openai' model 'gpt-4o': unknown key 'window' (did you mean 'context_window'?)",
            5,
        ),
        (
            "providers:\n  openai:\n    models: [gpt-4o]\n",
            "provider 'openai': models must be a mapping (key: value lines), not a list",
            3,
        ),
        (
            "providers:\n  openai:\n    models:\n      gpt-4o: 128000\n",
            "provider 'openai' model 'gpt-4o' must be a mapping such as {context_window: 128000}",
            4,
        ),
        (
            "moa:\n  presets:\n    p:\n      reference_models:\n        - {provider: openai, model: a,"
            " context_window: 1.5}\n      aggregator: {provider: openai, model: b}\n",
            "preset 'p' reference 1: context_window must be a whole number >= 1 (at most 100,000,000), not 1.5",
            5,
        ),
        (
            "moa:\n  presets:\n    p:\n      compact_at: 0\n      reference_models: [{provider: openai, model: a}]\n"
            "      aggregator: {provider: openai, model: b}\n",
            "preset 'p': compact_at must be between 0.1 and 1.0, not 0",
            4,
        ),
        (
            "moa:\n  presets:\n    p:\n      reference_models: [{provider: openai, model: a}]\n"
            "      aggregator: {provider: openai, model: b}\n      output_reserve: many\n",
            "preset 'p': output_reserve must be a whole number >= 1 (at most 10,000,000), not 'many'",
            6,
        ),
        (
            "moa:\n  presets:\n    p:\n      reference_models: [{provider: openai, model: a}]\n"
            "      aggregator: {provider: openai, model: b}\n      compact_model: gpt-4o-mini\n",
            "preset 'p': compact_model must be provider:model (the model that summarises older exchanges), "
            "not 'gpt-4o-mini'",
            6,
        ),
    ],
)
def test_bad_values_name_the_file_the_line_and_the_key(home, yaml, message, line):
    path = write_config(home, yaml)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.message.startswith(message)
    assert (caught.value.path, caught.value.line) == (str(path), line)


def test_a_compact_model_on_an_unknown_provider_is_the_presets_problem(home):
    path = write_config(
        home,
        "moa:\n  presets:\n    p:\n      reference_models: [{provider: openai, model: a}]\n"
        "      aggregator: {provider: openai, model: b}\n      compact_model: opnai:gpt-4o-mini\n",
    )
    config = load_config(path)
    problem = config.problems["p"]
    assert problem.message.startswith("preset 'p' compact_model: unknown provider 'opnai' (did you mean 'openai'?)")
    assert problem.line == 6
