"""`/v1/messages` on `moa-chat api`, through Anthropic's own Python SDK against the real process: a whole
message, a streamed one, a tool round trip, an image, thinking as the panel's progress, count_tokens, and
Anthropic's errors (529 when the panel is full)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest
from api_helpers import ApiProcess, client, configure, start_api, wire_presets
from conftest import write_config
from image_helpers import b64, png
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall
from scripted_server import ScriptedServer

QUESTION = [{"role": "user", "content": "How do I reverse a list?"}]
WEATHER = [
    {
        "name": "get_weather",
        "description": "The weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]
BLIND_REFERENCE = """
    blind:
      description: One reference that cannot see, one that can
      reference_models:
        - provider: wire
          model: sees
        - provider: wire
          model: blind-ref
          vision: false
      aggregator:
        provider: wire
        model: agg
"""


@pytest.fixture
def api(home: Path, llm_server: ScriptedServer) -> Iterator[ApiProcess]:
    write_config(home, wire_presets(llm_server.base_url, BLIND_REFERENCE))
    server = start_api(home)
    yield server
    server.stop()


def post(url: str, body: object, headers: dict[str, str]) -> tuple[int, dict[str, object]]:
    """A raw POST, for what an SDK would not send (a missing field) or sends its own way (Claude Code's headers)."""
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def claude(api: ApiProcess, **kwargs: object) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=api.root, api_key=api.token, max_retries=0, **kwargs)  # type: ignore[arg-type]


def test_a_whole_message_is_the_aggregators_reply_with_the_panels_usage(api, llm_server):
    llm_server.script(
        "agg",
        Reply(
            text="Use reversed() or slicing.", usage={"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57}
        ),
    )
    message = claude(api).messages.create(
        model="wire",
        max_tokens=300,
        system=[{"type": "text", "text": "Be brief."}],
        messages=QUESTION,
        stop_sequences=["END"],
        extra_body={"temperature": 0.2},  # this SDK leaves temperature to extra_body
    )
    assert message.type == "message" and message.role == "assistant" and message.model == "wire"
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "Use reversed() or slicing."
    assert message.stop_reason == "end_turn"
    # usage is every call of the turn: three references and the aggregator
    assert message.usage.input_tokens > 50 and message.usage.output_tokens > 7
    extension = message.model_extra["moa_chat"]
    assert extension["preset"] == "wire" and len(extension["calls"]) == 4
    body = llm_server.requests_for("agg")[0].body
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["max_tokens"] == 300 and body["temperature"] == 0.2 and body["stop"] == ["END"]
    for reference in ("ref-a", "ref-b", "ref-c"):  # the client's sampling is the aggregator's alone
        assert "stop" not in llm_server.requests_for(reference)[0].body
    assert "POST /v1/messages wire 200" in api.log_line("/v1/messages")


def test_a_streamed_message_is_anthropics_event_stream(api, llm_server):
    llm_server.script("agg", Reply(text="one two three four"))
    with claude(api).messages.stream(model="wire", max_tokens=100, messages=QUESTION) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_message()
    assert final.content[0].text == "one two three four" and final.stop_reason == "end_turn"
    assert final.usage.output_tokens > 0
    raw = [e for e in events if e not in ("text",)]
    assert raw[0] == "message_start" and raw[-1] == "message_stop"
    assert raw[1] == "content_block_start" and "content_block_delta" in raw and "message_delta" in raw
    assert events.count("text") >= 2  # the text came in pieces, as the aggregator streamed it


def test_a_tool_round_trip_reuses_the_panel(api, llm_server):
    llm_server.script(
        "agg",
        [
            Reply(
                text="Let me look.",
                tool_calls=[ScriptedToolCall("get_weather", json.dumps({"city": "Paris"}), id="call_w1")],
            ),
            Reply(text="It is sunny in Paris."),
        ],
    )
    client = claude(api)
    first = client.messages.create(model="wire", max_tokens=200, messages=QUESTION, tools=WEATHER)
    assert first.stop_reason == "tool_use"
    assert [block.type for block in first.content] == ["text", "tool_use"]
    use = first.content[1]
    assert use.name == "get_weather" and use.input == {"city": "Paris"} and use.id == "call_w1"
    offered = llm_server.requests_for("agg")[0].body["tools"]
    assert offered[0]["function"]["name"] == "get_weather"
    assert offered[0]["function"]["parameters"]["required"] == ["city"]
    conversation = [
        *QUESTION,
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": use.id, "content": "sunny, 24 °C"},
                {"type": "text", "text": "<system-reminder>Be brief.</system-reminder>"},
            ],
        },
    ]
    with client.messages.stream(model="wire", max_tokens=200, messages=conversation, tools=WEATHER) as stream:
        ending = [event for event in stream if event.type == "message_delta"]
        second = stream.get_final_message()
    assert second.content[0].text == "It is sunny in Paris." and second.stop_reason == "end_turn"
    again = llm_server.requests_for("agg")[1].body["messages"]
    result = {
        "role": "tool",
        "tool_call_id": "call_w1",
        "content": "sunny, 24 °C\n\n<system-reminder>Be brief.</system-reminder>",
    }
    assert result in again and again[-2:][0]["role"] != "user"  # the reminder rides with the result
    assert len(llm_server.requests_for("ref-a")) == 1  # one panel for the user turn
    assert ending[0].model_extra["moa_chat"]["guidance_reused"] is True


def test_a_streamed_tool_call_arrives_as_input_json(api, llm_server):
    llm_server.script("agg", Reply(tool_calls=[ScriptedToolCall("get_weather", json.dumps({"city": "Oslo"}), id="c9")]))
    with claude(api).messages.stream(
        model="wire", max_tokens=200, messages=QUESTION, tools=WEATHER, tool_choice={"type": "any"}
    ) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert [(b.type, getattr(b, "input", None)) for b in final.content] == [("tool_use", {"city": "Oslo"})]
    assert llm_server.requests_for("agg")[0].body["tool_choice"] == "required"


def test_an_image_reaches_the_slots_that_see_and_a_note_the_one_that_cannot(api, llm_server):
    picture = png(1280, 720)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(picture)}}
    content = [image, {"type": "text", "text": "What is in this screenshot?"}]
    claude(api).messages.create(model="blind", max_tokens=100, messages=[{"role": "user", "content": content}])
    for model in ("sees", "agg"):
        first_user = next(m for m in llm_server.requests_for(model)[0].body["messages"] if m["role"] == "user")
        image_part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(picture)}"}}
        assert image_part in first_user["content"]
    blind = llm_server.requests_for("blind-ref")[0].body["messages"][-1]["content"]
    assert {"type": "text", "text": "[image, 1280×720, not shown to this model]"} in blind
    assert not any(part.get("type") == "image_url" for part in blind)


def test_a_provider_that_refuses_an_image_is_asked_again_with_a_note_and_remembered(api, llm_server):
    llm_server.script("ref-b", Reply(status=400, error="ref-b: image input is not supported by this model"))
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(png(64, 48))}}
    for _ in range(2):
        claude(api).messages.create(
            model="wire",
            max_tokens=50,
            messages=[{"role": "user", "content": [image, {"type": "text", "text": "hm?"}]}],
        )
    first, again, later = (request.body["messages"][-1]["content"] for request in llm_server.requests_for("ref-b"))
    assert any(part.get("type") == "image_url" for part in first)
    for content in (again, later):  # sent again at once with the note, and the next turn starts with it
        assert {"type": "text", "text": "[image, 64×48, not shown to this model]"} in content


def test_thinking_shows_the_panels_progress_as_thinking_blocks(api, llm_server):
    llm_server.script("agg", Reply(text="Done."))
    with claude(api).messages.stream(
        model="wire", max_tokens=2048, messages=QUESTION, thinking={"type": "enabled", "budget_tokens": 1024}
    ) as stream:
        final = stream.get_final_message()
    assert [block.type for block in final.content] == ["thinking", "text"]
    thought = final.content[0].thinking
    assert "wire:ref-a" in thought and "3 of 3 references answered" in thought
    assert final.content[1].text == "Done."


def test_count_tokens_estimates_the_conversation(api):
    client = claude(api)
    short = client.messages.count_tokens(model="wire", messages=[{"role": "user", "content": "hi"}])
    long = client.messages.count_tokens(
        model="wire", messages=[{"role": "user", "content": "hi " * 500}], tools=WEATHER
    )
    assert 0 < short.input_tokens < long.input_tokens


def test_claude_codes_headers_betas_and_fields_are_accepted(api, llm_server):
    body = {
        "model": "wire",
        "max_tokens": 32000,
        "stream": False,
        "metadata": {"user_id": "someone"},
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
        "system": [{"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "say hi", "cache_control": {"type": "ephemeral"}}]},
            {"role": "system", "content": "Available agent types: general-purpose."},
        ],
    }
    headers = {
        "x-api-key": api.token,
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27",
        "x-app": "cli",
    }
    status, answer = post(f"{api.root}/v1/messages?beta=true", body, headers)
    assert status == 200, answer
    system = llm_server.requests_for("agg")[0].body["messages"][0]
    assert system == {"role": "system", "content": "You are an agent.\n\nAvailable agent types: general-purpose."}


def test_errors_take_anthropics_shape(api, llm_server):
    with pytest.raises(anthropic.AuthenticationError) as refused:
        anthropic.Anthropic(base_url=api.root, api_key="wrong", max_retries=0).messages.create(
            model="wire", max_tokens=10, messages=QUESTION
        )
    assert refused.value.body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid API key"},
    }
    with pytest.raises(anthropic.NotFoundError) as unknown:
        claude(api).messages.create(model="nope", max_tokens=10, messages=QUESTION)
    assert unknown.value.body["error"]["type"] == "not_found_error"
    status, missing = post(f"{api.root}/v1/messages", {"model": "wire", "messages": QUESTION}, {"x-api-key": api.token})
    assert status == 400
    assert missing["error"] == {"type": "invalid_request_error", "message": "max_tokens: Field required"}
    bad_image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": b64(b"not a picture")},
    }
    with pytest.raises(anthropic.BadRequestError) as not_an_image:
        claude(api).messages.create(model="wire", max_tokens=10, messages=[{"role": "user", "content": [bad_image]}])
    assert "not a PNG, JPEG, GIF or WebP image" in not_an_image.value.body["error"]["message"]
    llm_server.script("agg", Reply(status=500, error="the model crashed"))
    with pytest.raises(anthropic.APIStatusError) as failed:
        claude(api).messages.create(model="wire", max_tokens=10, messages=QUESTION)
    assert failed.value.status_code == 502 and failed.value.body["error"]["type"] == "api_error"
    assert "the model crashed" in failed.value.body["error"]["message"]


def test_a_full_panel_is_overloaded_529(home, llm_server):
    configure(home, llm_server)
    api = start_api(home, "--max-turns", "1")
    try:
        resume = threading.Event()
        llm_server.script("agg", [Reply(text="a b c d", pause_after=1, pause=60, resume=resume), Reply(text="ok")])
        client = claude(api)
        results: list[str] = []
        first = threading.Thread(
            target=lambda: results.append(
                client.messages.create(model="wire", max_tokens=10, messages=QUESTION).content[0].text
            )
        )
        first.start()
        llm_server.wait_for_request("agg", timeout=30)
        with pytest.raises(anthropic.APIStatusError) as full:
            client.messages.create(model="wire", max_tokens=10, messages=QUESTION)
        assert full.value.status_code == 529
        assert full.value.body["error"]["type"] == "overloaded_error"
        resume.set()
        first.join(timeout=60)
        assert results == ["a b c d"]
    finally:
        api.stop()


def test_the_openai_sdk_sends_an_image_part_through_the_chat_completions_wire(api, llm_server):
    picture = png(800, 600)
    url = f"data:image/png;base64,{b64(picture)}"
    content = [{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": url}}]
    reply = client(api).chat.completions.create(model="blind", messages=[{"role": "user", "content": content}])
    assert reply.choices[0].finish_reason == "stop"
    for model in ("sees", "agg"):
        user = next(m for m in llm_server.requests_for(model)[0].body["messages"] if m["role"] == "user")
        assert {"type": "image_url", "image_url": {"url": url}} in user["content"]
    blind = llm_server.requests_for("blind-ref")[0].body["messages"][-1]["content"]
    assert {"type": "text", "text": "[image, 800×600, not shown to this model]"} in blind
    with pytest.raises(openai.BadRequestError) as refused:
        not_an_image = [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64(b"x" * 100)}}]
        client(api).chat.completions.create(model="wire", messages=[{"role": "user", "content": not_an_image}])
    assert refused.value.body["code"] == "invalid_image" and refused.value.body["param"] == "messages[0].content[0]"
