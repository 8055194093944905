"""call_llm against a real loopback server through the real openai SDK."""

from __future__ import annotations

from types import SimpleNamespace

import openai
import pytest
from moa_chat import llm
from moa_chat.providers import MissingApiKeyError, UnknownProviderError
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall


def test_non_stream_returns_the_validated_response(wire_config, llm_server):
    config = wire_config()
    llm_server.script("m", Reply(text="hello there"))
    response = llm.call_llm(
        task="t", provider="wire", model="m", config=config, messages=[{"role": "user", "content": "hi"}]
    )
    assert response.choices[0].message.content == "hello there"
    body = llm_server.requests_for("m")[0].body
    # Keys that were not given stay off the wire, so provider defaults apply.
    for key in ("stream", "stream_options", "temperature", "max_tokens", "tools", "reasoning_effort"):
        assert key not in body


def test_stream_returns_the_sdk_stream_with_stream_keys_on_the_request(wire_config, llm_server):
    config = wire_config()
    llm_server.script("m", Reply(text="one two three"))
    stream = llm.call_llm(
        provider="wire",
        model="m",
        config=config,
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
        temperature=0.3,
        max_tokens=50,
    )
    assert isinstance(stream, openai.Stream)
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    body = llm_server.requests_for("m")[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.3 and body["max_tokens"] == 50


def test_stream_chunks_are_the_sdks_own_objects_even_when_a_server_bends_the_schema(wire_config, llm_server):
    """Chunks are validated by pydantic (fast) rather than built by the SDK's construct_type (slow); one that
    fails validation is still taken, the SDK's lenient way, and both are the SDK's chunk type."""
    from openai._models import construct_type
    from openai.types.chat import ChatCompletionChunk

    config = wire_config()
    llm_server.script("strict", Reply(text="one two three", tool_calls=[ScriptedToolCall("f", '{"a": 1}')]))
    llm_server.script("bare", Reply(text="one two three", bare_chunks=True))
    streams = {
        model: list(
            llm.call_llm(
                provider="wire",
                model=model,
                config=config,
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        for model in ("strict", "bare")
    }
    for chunks in streams.values():
        assert all(isinstance(chunk, ChatCompletionChunk) for chunk in chunks)
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "one two three"
    strict = streams["strict"]
    assert any(c.choices and c.choices[0].delta.tool_calls for c in strict)
    for chunk in strict:  # the same object the SDK itself would have built
        assert chunk == construct_type(type_=ChatCompletionChunk, value=chunk.model_dump(exclude_unset=True))
    assert all(chunk.created is None and "created" not in chunk.model_fields_set for chunk in streams["bare"])


def test_stream_without_stream_options_sends_none(wire_config, llm_server):
    config = wire_config()
    list(
        llm.call_llm(
            provider="wire", model="m", config=config, stream=True, messages=[{"role": "user", "content": "hi"}]
        )
    )
    body = llm_server.requests_for("m")[0].body
    assert body["stream"] is True and "stream_options" not in body


def test_http_error_names_provider_model_status_and_reason(wire_config, llm_server):
    config = wire_config()
    llm_server.script("m", Reply(status=401, error="Invalid API key provided"))
    with pytest.raises(llm.LLMCallError) as info:
        llm.call_llm(
            task="moa_reference",
            provider="wire",
            model="m",
            config=config,
            messages=[{"role": "user", "content": "hi"}],
        )
    assert info.value.status == 401
    assert str(info.value) == "wire:m failed: HTTP 401: Invalid API key provided (check the API key)"


def test_unreachable_endpoint_is_a_clear_error(home):
    from conftest import write_config
    from moa_chat.config import load_config

    config = load_config(
        write_config(
            home,
            """
        providers:
          dead:
            base_url: http://127.0.0.1:9/v1
            max_retries: 0
    """,
        )
    )
    with pytest.raises(
        llm.LLMCallError,
        match=r"dead:m failed: connection refused by http://127.0.0.1:9/v1 — is the dead server running on this "
        r"machine\?",
    ):
        llm.call_llm(provider="dead", model="m", config=config, messages=[{"role": "user", "content": "hi"}])


def test_missing_key_names_the_environment_variable(home):
    from moa_chat.config import load_config

    with pytest.raises(MissingApiKeyError) as info:
        llm.call_llm(
            provider="openrouter", model="x", config=load_config(), messages=[{"role": "user", "content": "hi"}]
        )
    assert "OPENROUTER_API_KEY" in str(info.value) and "'openrouter'" in str(info.value)


def test_unknown_provider_fails_at_call_time_with_guidance(home):
    from moa_chat.config import load_config

    with pytest.raises(UnknownProviderError, match=r"unknown provider 'openai-codex'.*providers:"):
        llm.call_llm(
            provider="openai-codex", model="x", config=load_config(), messages=[{"role": "user", "content": "hi"}]
        )


def test_openai_honours_openai_base_url(home, monkeypatch, llm_server):
    from moa_chat.config import load_config

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.base_url)
    provider, model, base_url, api_key, mode = llm._resolve_task_provider_model(
        "t", "openai", "gpt-4.1", config=load_config()
    )
    assert (provider, model, base_url, api_key, mode) == (
        "openai",
        "gpt-4.1",
        llm_server.base_url,
        "sk-test",
        "chat_completions",
    )


def test_clients_are_cached_per_endpoint_and_key(wire_config, llm_server):
    config = wire_config()
    a, _ = llm._get_cached_client("wire", "m1", llm_server.base_url, "k1", config=config)
    b, model = llm._get_cached_client("wire", "m2", llm_server.base_url, "k1", config=config)
    c, _ = llm._get_cached_client("wire", "m1", llm_server.base_url, "k2", config=config)
    assert a is b and model == "m2"
    assert a is not c


def test_validation_names_task_provider_and_model():
    empty = SimpleNamespace(choices=[], usage=None)
    with pytest.raises(RuntimeError, match=r"moa_aggregator call to p:m returned a response without"):
        llm._validate_llm_response(empty, task="moa_aggregator", provider="p", model="m")


def test_demo_provider_needs_no_key_and_uses_the_same_sdk_path(home):
    from moa_chat.config import load_config

    response = llm.call_llm(
        provider="demo",
        model="simulated-analyst",
        config=load_config(),
        messages=[{"role": "user", "content": "How should I cache HTTP responses?"}],
    )
    assert "cache" in response.choices[0].message.content.lower()
    assert response.usage.total_tokens > 0
