"""Loading config.yaml: tolerant where the seed's is, strict (file, line, key) where a user needs to know."""

from __future__ import annotations

import pytest
from conftest import write_config
from moa_chat.config import BUILTIN_PROVIDERS, ConfigError, UnknownPresetError, bundled_presets, load_config
from moa_chat.providers import choose_start

SEED_CONFIG = """
moa:
  default_preset: review
  presets:
    review:
      reference_models:
        - provider: openai-codex
          model: gpt-5.5
      aggregator:
        provider: openrouter
        model: anthropic/claude-opus-4.8
"""


def test_seed_config_loads_with_unknown_provider(home):
    config = load_config(write_config(home, SEED_CONFIG))
    preset = config.preset("review")
    assert config.default_preset == "review"
    assert [s.label for s in preset.references] == ["openai-codex:gpt-5.5"]
    assert preset.aggregator.label == "openrouter:anthropic/claude-opus-4.8"
    assert preset.max_workers == 8


def test_moa_chat_home_locates_config(home, tmp_path, monkeypatch):
    other = tmp_path / "elsewhere"
    other.mkdir()
    write_config(other, SEED_CONFIG)
    monkeypatch.setenv("MOA_CHAT_HOME", str(other))
    assert load_config().path == other / "config.yaml"
    assert "review" in load_config().presets


def test_missing_default_config_is_fine_but_explicit_missing_file_is_an_error(home, tmp_path):
    assert "demo" in load_config().presets
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_bundled_presets_are_complete_and_named_after_their_files():
    presets = bundled_presets()
    assert {"demo", "frontier", "groq-fast", "local", "openai"} <= set(presets)
    for name, preset in presets.items():
        assert preset.name == name
        assert preset.description
        assert preset.references
        assert preset.source == f"presets/{name}.yaml"
        assert preset.providers <= set(BUILTIN_PROVIDERS)


def test_user_presets_add_to_bundled_and_win_on_a_clash(home):
    config = load_config(
        write_config(
            home,
            """
        moa:
          presets:
            demo:
              description: my own demo
              reference_models:
                - {provider: ollama, model: llama3.2}
              aggregator: {provider: ollama, model: qwen2.5}
            mine:
              reference_models:
                - {provider: groq, model: llama-3.3-70b-versatile}
              aggregator: {provider: groq, model: openai/gpt-oss-120b}
    """,
        )
    )
    assert config.preset("demo").description == "my own demo"
    assert "frontier" in config.presets and "mine" in config.presets


def test_slot_options_parse_and_unset_ones_stay_none(home):
    config = load_config(
        write_config(
            home,
            """
        moa:
          presets:
            tuned:
              reference_temperature: 0.4
              reference_timeout: 20
              max_workers: 2
              reference_models:
                - provider: openai
                  model: gpt-4.1-mini
                  temperature: 0.9
                  max_tokens: 400
                  reasoning_effort: low
                  timeout: 15
                  extra_body: {top_k: 20}
                - provider: openai
                  model: gpt-4o-mini
                  enabled: false
              aggregator:
                provider: openai
                model: gpt-4.1
    """,
        )
    )
    preset = config.preset("tuned")
    first = preset.reference_models[0]
    assert (first.temperature, first.max_tokens, first.reasoning_effort, first.timeout) == (0.9, 400, "low", 15)
    assert first.extra_body == {"top_k": 20} and type(first.extra_body) is dict
    assert [s.model for s in preset.references] == ["gpt-4.1-mini"]  # the disabled one sits out
    assert preset.aggregator.temperature is None and preset.aggregator.max_tokens is None
    assert (preset.reference_temperature, preset.reference_timeout, preset.max_workers) == (0.4, 20, 2)


def test_invalid_yaml_names_file_line_and_column(home):
    path = write_config(
        home,
        """
        moa:
          presets:
            broken:
              reference_models: [
              aggregator: {provider: openai
    """,
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message
    assert "invalid YAML at line" in message and "column" in message
    assert info.value.line is not None and info.value.line >= 4


def test_yaml_errors_keep_the_clearer_words_of_the_pure_python_parser(tmp_path):
    """YAML is parsed with libyaml (fast) and, only when that fails, again in pure Python for its message."""
    from moa_chat.config.yaml_positions import YamlSyntaxError, load_yaml

    assert load_yaml("a:\n  - 1\n  - {b: 2}\n", "ok.yaml").line_of("a") == 1
    with pytest.raises(YamlSyntaxError) as info:
        load_yaml("moa:\n\tpresets: {}\n", tmp_path / "config.yaml")
    assert (info.value.line, info.value.column) == (2, 1)
    assert "found character '\\t' that cannot start any token" in str(info.value)  # libyaml omits the '\t'
    with pytest.raises(YamlSyntaxError, match="found undefined alias 'nope'"):
        load_yaml("k: *nope\n", "aliases.yaml")


def test_reference_without_model_names_preset_slot_and_line(home):
    path = write_config(
        home,
        """
        moa:
          presets:
            review:
              reference_models:
                - provider: openai
                  model: gpt-4.1-mini
                - provider: openrouter
              aggregator:
                provider: openai
                model: gpt-4.1
    """,
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "preset 'review' reference 2 is incomplete" in str(info.value)
    assert "model" in str(info.value)
    assert f"{path}:7:" in str(info.value)


def test_preset_without_aggregator_is_named(home):
    path = write_config(
        home,
        """
        moa:
          presets:
            lonely:
              reference_models:
                - {provider: openai, model: gpt-4.1-mini}
    """,
    )
    with pytest.raises(ConfigError, match=r"preset 'lonely' needs an aggregator"):
        load_config(path)


def test_aggregator_without_provider_is_named(home):
    path = write_config(
        home,
        """
        moa:
          presets:
            half:
              reference_models:
                - {provider: openai, model: gpt-4.1-mini}
              aggregator:
                model: gpt-4.1
    """,
    )
    with pytest.raises(ConfigError, match=r"preset 'half' aggregator is incomplete: it needs provider"):
        load_config(path)


def test_misspelt_key_is_named_with_a_suggestion_and_line(home):
    path = write_config(
        home,
        """
        moa:
          presets:
            review:
              reference_models:
                - provider: openai
                  model: gpt-4.1-mini
                  temprature: 0.2
              aggregator: {provider: openai, model: gpt-4.1}
    """,
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "unknown key 'temprature'" in str(info.value)
    assert "did you mean 'temperature'" in str(info.value)
    assert f"{path}:7:" in str(info.value)


def test_out_of_range_value_names_the_key(home):
    path = write_config(
        home,
        """
        moa:
          presets:
            hot:
              reference_models:
                - {provider: openai, model: gpt-4.1-mini, temperature: 7}
              aggregator: {provider: openai, model: gpt-4.1}
    """,
    )
    with pytest.raises(ConfigError, match=r"temperature must be between 0.0 and 2.0, not 7"):
        load_config(path)


def test_unknown_preset_lists_available_ones_and_never_switches(home):
    config = load_config(write_config(home, SEED_CONFIG))
    with pytest.raises(UnknownPresetError) as info:
        config.preset("reveiw")
    message = str(info.value)
    assert "unknown preset 'reveiw'" in message and "did you mean 'review'" in message
    assert "review" in message and "demo" in message
    with pytest.raises(UnknownPresetError):
        choose_start(config, "reveiw")


def test_unknown_default_preset_is_an_error_with_its_line(home):
    path = write_config(home, "moa:\n  default_preset: fronteir\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}:2: moa.default_preset: unknown preset 'fronteir'")
    assert "did you mean 'frontier'" in message and "available presets" in message


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        ("moa:\n  defualt_preset: demo\n", 2, "moa: unknown key 'defualt_preset' (did you mean 'default_preset'?)"),
        ("system_promt: be brief\n", 1, "config.yaml: unknown key 'system_promt' (did you mean 'system_prompt'?)"),
        ("modles: []\n", 1, "config.yaml: unknown key 'modles'; known keys: moa, providers"),
        ("max_iteration: 3\n", 1, "(did you mean 'max_iterations'?)"),
    ],
)
def test_unknown_keys_at_every_level_name_file_line_and_a_guess(home, text, line, expected):
    path = write_config(home, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}:{line}: ") and expected in str(info.value)


def test_an_unknown_provider_stops_the_preset_before_any_request_with_its_line(home):
    from moa_chat.providers import preflight

    path = write_config(
        home,
        """
        moa:
          presets:
            mine:
              reference_models:
                - provider: openai
                  model: gpt-4.1-mini
                - provider: antropic
                  model: claude
              aggregator: {provider: openai, model: gpt-4.1}
        """,
    )
    config = load_config(path)  # a config shared with another tool still loads...
    error, _warning = preflight(config, config.preset("mine"))  # ...but this preset cannot run
    assert error is not None and error.startswith(f"{path}:7: preset 'mine' reference 2: unknown provider 'antropic'")
    assert preflight(config, config.preset("demo"))[0] is None


@pytest.mark.parametrize("provider", ["review", "moa"])
def test_a_preset_cannot_use_a_preset_as_a_provider(home, provider):
    path = write_config(
        home,
        f"""
        moa:
          presets:
            review:
              reference_models:
                - {{provider: openai, model: gpt-4.1-mini}}
              aggregator: {{provider: openai, model: gpt-4.1}}
            nested:
              reference_models:
                - {{provider: openai, model: gpt-4.1-mini}}
              aggregator: {{provider: {provider}, model: anything}}
    """,
    )
    with pytest.raises(ConfigError, match=r"preset 'nested' aggregator: provider '\w+' is a MoA preset"):
        load_config(path)


def test_custom_provider_needs_base_url_and_keys_never_live_in_the_file(home):
    with pytest.raises(ConfigError, match=r"provider 'mine' needs base_url"):
        load_config(write_config(home, "providers:\n  mine:\n    api_key_env: MINE_KEY\n"))
    with pytest.raises(ConfigError, match=r"keys never go in the config file"):
        load_config(write_config(home, "providers:\n  mine:\n    base_url: http://x/v1\n    api_key: sk-123\n"))


def test_builtin_providers_can_be_overridden_by_name(home):
    config = load_config(
        write_config(
            home,
            """
        providers:
          ollama:
            base_url: http://gpu-box:11434/v1
          vllm:
            base_url: http://localhost:8000/v1
            api_key_env: VLLM_KEY
            headers: {X-Team: research}
    """,
        )
    )
    assert config.providers["ollama"].base_url == "http://gpu-box:11434/v1"
    assert config.providers["vllm"].headers == {"X-Team": "research"}
    assert config.providers["openrouter"].api_key_env == "OPENROUTER_API_KEY"


def test_start_preset_is_demo_with_a_notice_when_no_key_is_set(home):
    choice = choose_start(load_config())
    assert choice.preset.name == "demo"
    assert choice.notice and "demo" in choice.notice and "OPENROUTER_API_KEY" in choice.notice


def test_start_preset_uses_a_hosted_preset_when_its_key_is_set(home, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-test")
    choice = choose_start(load_config())
    assert choice.preset.name == "frontier" and choice.notice is None


def test_explicit_preset_wins_over_everything(home, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-test")
    assert choose_start(load_config(), "local").preset.name == "local"


def test_tool_env_takes_core_or_all_and_names_its_line(home):
    from conftest import write_config
    from moa_chat.config import ConfigError, load_config

    assert load_config(write_config(home, "tool_env: all\n")).tool_env == "all"
    assert load_config(write_config(home, "tools: [read_file]\n")).tool_env == "core"
    with pytest.raises(ConfigError, match=r"config.yaml:2.*tool_env must be `core`"):
        load_config(write_config(home, "tools: [read_file]\ntool_env: everything\n"))


# --------------------------------------------------------------------------- values that cannot work

_BOUNDED_PRESET = """
moa:
  presets:
    big:
      reference_models:
        - provider: openai
          model: gpt-4.1-mini
{slot}
      aggregator: {{provider: openai, model: gpt-4.1}}
{preset}
"""


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ("network:\n  first_token_timeout: 10000000000\n", 2, "first_token_timeout"),
        ("network:\n  stall_timeout: 1000000000000\n", 2, "stall_timeout"),
        ("network:\n  connect_timeout: 1.0e+12\n", 2, "connect_timeout"),
        ("network:\n  max_retry_wait: 1.0e+12\n", 2, "max_retry_wait"),
        ("network:\n  max_retries: 1000000000\n", 2, "max_retries"),
        ("providers:\n  openai:\n    first_token_timeout: 1.0e+12\n", 3, "first_token_timeout"),
        ("providers:\n  openai:\n    max_retries: 1000000000\n", 3, "max_retries"),
        ("max_iterations: 1000000000\n", 1, "max_iterations"),
        ("pricing:\n  openai:gpt-4.1:\n    input: 1.0e+12\n    output: 1\n", 3, "input"),
        (_BOUNDED_PRESET.format(slot="          timeout: 1.0e+12", preset=""), 7, "timeout"),
        (_BOUNDED_PRESET.format(slot="          max_tokens: 1000000000000", preset=""), 7, "max_tokens"),
        (_BOUNDED_PRESET.format(slot="          samples: 1000000", preset=""), 7, "samples"),
        (_BOUNDED_PRESET.format(slot="", preset="      reference_timeout: 1.0e+12"), 9, "reference_timeout"),
        (_BOUNDED_PRESET.format(slot="", preset="      max_workers: 1000000"), 9, "max_workers"),
        (_BOUNDED_PRESET.format(slot="", preset="      max_iterations: 1000000000"), 9, "max_iterations"),
        (_BOUNDED_PRESET.format(slot="", preset="      layers: 1000"), 9, "layers"),
        (_BOUNDED_PRESET.format(slot="", preset="      quorum: 1000000000"), 9, "quorum"),
        (_BOUNDED_PRESET.format(slot="", preset="      deadline: 1.0e+12"), 9, "deadline"),
        (_BOUNDED_PRESET.format(slot="", preset="      max_cost_per_turn: 1.0e+12"), 9, "max_cost_per_turn"),
    ],
)
def test_a_number_too_large_to_work_is_refused_at_load_with_its_line(home, text, line, key):
    # A time limit of 1e10 s once loaded, then failed every turn: "timestamp out of range for platform time_t".
    path = write_config(home, text.strip("\n"))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: ") and f"{key} must be" in message and "at most" in message


def test_large_but_sensible_numbers_still_load(home):
    text = _BOUNDED_PRESET.format(
        slot="          max_tokens: 200000\n          timeout: 3600",
        preset="      deadline: 600\n      max_workers: 32\n      max_iterations: 200\n      max_cost_per_turn: 50",
    )
    text += "network:\n  first_token_timeout: 3600\n  stall_timeout: 600\n  max_retries: 10\n"
    config = load_config(write_config(home, text.strip("\n")))
    assert config.network.first_token_timeout == 3600 and config.preset("big").aggregator.model == "gpt-4.1"


def test_every_mistake_of_a_config_is_reported_at_once_each_with_its_line(home):
    path = write_config(
        home,
        """
        network:
          first_token_timeout: 10000000000
          stall_timeout: -1
        providers:
          mine:
            base_url: ftp://nowhere
        moa:
          default_preset: big
          presets:
            big:
              reference_models: [{provider: openai, model: a, temprature: 0.5}]
              aggregator: {provider: openai, model: b}
        save_traces: sometimes
        """,
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    lines = str(info.value).splitlines()
    # The first line is the first mistake in the file, as a single mistake is reported.
    assert lines[0] == (
        f"{path}:2: network: first_token_timeout must be a number >= 0.001 (at most 86,400 seconds), not 10000000000"
    )
    assert lines[1] == "4 more problems in the configuration:"
    assert lines[2].strip().startswith(f"{path}:3: network: stall_timeout must be")
    assert lines[3].strip().startswith(f"{path}:6: provider 'mine' needs base_url")
    assert lines[4].strip().startswith(f"{path}:11: preset 'big' reference 1: unknown key 'temprature'")
    assert lines[5].strip().startswith(f"{path}:13: save_traces must be true or false")
    assert len(lines) == 6  # the preset with a mistake is not reported again as an unknown default_preset
    assert [e.line for e in info.value.errors] == [2, 3, 6, 11, 13]


def test_an_unclosed_quote_is_reported_where_it_opens_not_at_the_end_of_the_file(home):
    path = write_config(
        home,
        """
        providers:
          mine:
            base_url: "http://localhost:8000/v1
            api_key_env: MINE_KEY
        moa:
          default_preset: demo
        """,
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.line == 3
    assert str(info.value) == (
        f'{path}:3: invalid YAML at line 3, column 15: the quoted string opened here (") is never closed: '
        "the file ends inside it"
    )
