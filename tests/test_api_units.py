"""The parts of `moa-chat api` that need no server: the request's checks, the token, the guidance cache."""

from __future__ import annotations

import os
import stat

import pytest
from moa_chat.api.auth import TOKEN_ENV, authorized, load_token, origin_refusal
from moa_chat.api.guidance_cache import GuidanceCache
from moa_chat.api.wire import ApiError, parse_request
from moa_chat.engine import CallRecord, ReferenceFinished
from moa_chat.engine.guidance import turn_hash

USER = {"role": "user", "content": "hi"}


def answers(text: str) -> tuple[ReferenceFinished, ...]:
    return (ReferenceFinished(CallRecord("reference", "p:m", 1, 1, "ok"), text),)


def test_the_cache_forgets_the_oldest_turn_past_its_capacity():
    cache = GuidanceCache(capacity=2)
    for key in "abc":
        cache.put(key, answers(key))
    assert cache.get("a") is None and cache.get("b") is not None and cache.get("c") is not None
    assert len(cache) == 2


def test_the_cache_forgets_a_turn_past_its_age():
    now = [0.0]
    cache = GuidanceCache(max_age=60, clock=lambda: now[0])
    cache.put("a", answers("a"))
    now[0] = 59
    assert cache.get("a") is not None
    now[0] = 121
    assert cache.get("a") is None and len(cache) == 0


def test_the_turn_key_is_the_conversation_up_to_its_last_user_message_and_the_preset():
    call = {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f"}}]}
    later = [USER, call, {"role": "tool", "tool_call_id": "c", "content": "x"}]
    assert turn_hash("p", [USER]) == turn_hash("p", later)
    assert turn_hash("p", [USER]) != turn_hash("q", [USER])
    assert turn_hash("p", [USER]) != turn_hash("p", [{"role": "user", "content": "hello"}])
    assert turn_hash("p", [{"role": "system", "content": "s"}]) is None


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": "hi"}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": [USER], "temperature": "hot"}, "temperature"),
        ({"messages": [USER], "temperature": True}, "temperature"),
        ({"messages": [USER], "max_tokens": 1.5}, "max_tokens"),
        ({"messages": [USER], "stream": "yes"}, "stream"),
        ({"messages": [USER], "stream_options": {"include_usage": 1}}, "stream_options.include_usage"),
        ({"messages": [USER], "stop": [1]}, "stop"),
        ({"messages": [USER], "tools": [{"type": "function"}]}, "tools[0]"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        ({"messages": [USER], "n": 2}, "n"),
        ({"messages": [USER], "model": 3}, "model"),
    ],
)
def test_a_wrong_field_is_a_400_naming_it(body, param):
    with pytest.raises(ApiError) as caught:
        parse_request(body, "default")
    assert caught.value.status == 400 and caught.value.param == param


def test_sampling_and_passed_fields_are_read_and_unknown_ones_ignored():
    parsed = parse_request(
        {
            "messages": [{"role": "user", "content": "hi", "cache_control": {"x": 1}}],
            "temperature": 0,
            "max_completion_tokens": 9,
            "stop": "END",
            "seed": 3,
            "tool_choice": "auto",
            "whatever": [1, 2],
        },
        "default",
    )
    assert parsed.model == "default" and parsed.messages == [{"role": "user", "content": "hi"}]
    assert parsed.sampling == {"temperature": 0.0, "max_tokens": 9, "stop": "END"}
    assert parsed.passed == {"seed": 3, "tool_choice": "auto"}


def test_the_token_is_compared_as_a_bearer_token_only():
    assert authorized("Bearer secret-token", "secret-token")
    assert authorized("bearer  secret-token", "secret-token")
    assert not authorized("Bearer secret-tokeN", "secret-token")
    assert not authorized("secret-token", "secret-token")
    assert not authorized(None, "secret-token")


def test_a_token_is_made_once_and_kept_private(tmp_path, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    first = load_token(tmp_path)
    assert first.generated and stat.S_IMODE(os.stat(tmp_path / "api-token").st_mode) == 0o600
    again = load_token(tmp_path)
    assert again.value == first.value and not again.generated
    monkeypatch.setenv(TOKEN_ENV, "from-the-environment")
    assert load_token(tmp_path).value == "from-the-environment"


def test_only_the_named_origin_passes():
    assert origin_refusal(None, None) is None
    assert origin_refusal("http://localhost:3000", "http://localhost:3000/") is None
    assert origin_refusal("http://localhost:3000", None) is not None
    assert origin_refusal("https://evil.example", "http://localhost:3000") is not None
