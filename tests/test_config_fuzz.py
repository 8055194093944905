"""Whatever config.yaml holds — any YAML document, any bytes — loading it gives a Config or moa-chat's
own ConfigError (file, line, what to fix), never a traceback of something else."""

from __future__ import annotations

import os
import uuid

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moa_chat.config import ConfigError, load_config

KEYS = [
    "moa",
    "providers",
    "keymap",
    "tools",
    "max_iterations",
    "mcp_servers",
    "tool_env",
    "tool_env_allow",
    "network",
    "connect_timeout",
    "first_token_timeout",
    "stall_timeout",
    "max_retry_wait",
    "presets",
    "default_preset",
    "reference_models",
    "aggregator",
    "provider",
    "model",
    "temperature",
    "max_tokens",
    "timeout",
    "extra_body",
    "enabled",
    "base_url",
    "api_key_env",
    "headers",
    "max_retries",
    "command",
    "args",
    "env",
    "fanout",
    "max_workers",
    "description",
    "openai",
    "demo",
    "review",
]
scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=True) | st.text(max_size=12)
keys = st.sampled_from(KEYS) | st.text(max_size=8)
documents = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=25,
)
FUZZ = settings(
    max_examples=int(os.environ.get("MOA_FUZZ_EXAMPLES", "300")),  # 3,000 also pass: see the issue note
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def fresh(home):
    """A new file each example: load_config caches by path and modification time."""
    return home / f"config-{uuid.uuid4().hex}.yaml"


def load(path):
    try:
        load_config(path)
    except ConfigError as exc:
        assert str(exc)  # it says something


@FUZZ
@given(document=st.dictionaries(keys, documents, max_size=6))
def test_any_yaml_document_loads_or_gives_a_config_error(home, document):
    path = fresh(home)
    path.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    load(path)


@FUZZ
@given(data=st.binary(max_size=300))
def test_any_bytes_load_or_give_a_config_error(home, data):
    path = fresh(home)
    path.write_bytes(data)
    load(path)


@FUZZ
@given(document=documents)
def test_any_top_level_value_loads_or_gives_a_config_error(home, document):
    path = fresh(home)
    path.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    load(path)
