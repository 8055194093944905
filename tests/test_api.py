"""`moa-chat api` as clients use it: the real server process on a free port, the scripted loopback provider
behind it, and real clients in front (the openai SDK sync and async, curl, the `llm` CLI)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import openai
import pytest
from api_helpers import QUESTION, TOKEN, client, configure, start_api
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall


def test_start_up_names_models_key_and_presets_left_out(api):
    text = "\n".join(api.banner)
    assert "models: wire (default), wire-each" in text
    assert "left out: frontier (needs OPENROUTER_API_KEY)" in text
    assert "API key: the value of $MOA_CHAT_API_KEY" in text and TOKEN not in text
    assert "Authorization: Bearer" in text


def test_models_lists_the_runnable_presets(api):
    models = client(api).models.list()
    ids = [m.id for m in models.data]
    assert ids[:2] == ["wire", "wire-each"] and "frontier" not in ids
    assert models.data[0].model_extra["moa_chat"]["aggregator"] == "wire:agg"


def test_sdk_whole_reply_sums_usage_over_every_call(api, llm_server):
    response = client(api).chat.completions.create(model="wire", messages=QUESTION)
    assert response.choices[0].message.content == "ok from agg"
    assert response.choices[0].finish_reason == "stop"
    extension = response.model_extra["moa_chat"]
    assert sorted(c["label"] for c in extension["calls"]) == ["wire:agg", "wire:ref-a", "wire:ref-b", "wire:ref-c"]
    sent = [r.usage_sent["total_tokens"] for r in llm_server.requests if r.usage_sent]
    assert len(sent) == 4 and response.usage.total_tokens == sum(sent)
    assert extension["total_tokens"] == response.usage.total_tokens
    line = api.log_line("POST /v1/chat/completions")
    assert " wire 200 " in line and f"{response.usage.total_tokens:,} tokens" in line


def test_sdk_stream_with_usage(api, llm_server):
    llm_server.script("agg", Reply(text="one two three four"))
    stream = client(api).chat.completions.create(
        model="wire", messages=QUESTION, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "one two three four"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == [] and usage_chunk.usage.total_tokens == sum(
        r.usage_sent["total_tokens"] for r in llm_server.requests if r.usage_sent
    )
    assert len(usage_chunk.model_extra["moa_chat"]["calls"]) == 4


async def test_async_sdk_stream_and_whole(api):
    async with openai.AsyncOpenAI(base_url=api.base_url, api_key=api.token, max_retries=0) as aclient:
        whole = await aclient.chat.completions.create(model="wire", messages=QUESTION)
        assert whole.choices[0].message.content == "ok from agg"
        stream = await aclient.chat.completions.create(model="wire", messages=QUESTION, stream=True)
        pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        assert "".join(pieces) == "ok from agg"


def test_sampling_goes_to_the_aggregator_and_unknown_fields_are_ignored(api, llm_server):
    response = client(api).chat.completions.create(
        model="wire",
        messages=QUESTION,
        temperature=0.25,
        max_tokens=77,
        stop=["END"],
        seed=7,
        extra_body={"some_vendor_field": {"x": 1}},
    )
    assert response.choices[0].message.content == "ok from agg"
    aggregator = llm_server.requests_for("agg")[0].body
    assert (aggregator["temperature"], aggregator["max_tokens"], aggregator["stop"], aggregator["seed"]) == (
        0.25,
        77,
        ["END"],
        7,
    )
    assert "some_vendor_field" not in aggregator
    reference = llm_server.requests_for("ref-a")[0].body
    assert "max_tokens" not in reference and "stop" not in reference and "seed" not in reference


def test_a_wrong_type_is_a_400_naming_the_field(api):
    with pytest.raises(openai.BadRequestError) as caught:
        client(api).chat.completions.create(model="wire", messages=QUESTION, temperature="hot")  # type: ignore[arg-type]
    assert caught.value.body["param"] == "temperature" and caught.value.body["code"] == "invalid_type"


def test_an_unknown_model_is_a_404(api):
    with pytest.raises(openai.NotFoundError) as caught:
        client(api).chat.completions.create(model="frontier", messages=QUESTION)
    assert caught.value.body["code"] == "model_not_found" and "OPENROUTER_API_KEY" in caught.value.body["message"]


def test_tools_round_trip_asks_the_references_once(api, llm_server):
    llm_server.script(
        "agg",
        [
            Reply(tool_calls=[ScriptedToolCall("get_weather", '{"city": "Paris"}', id="call_1")]),
            Reply(tool_calls=[ScriptedToolCall("get_time", '{"city": "Paris"}', id="call_2")]),
            Reply(text="Sunny, at noon."),
        ],
    )
    tools = [
        {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
        for name in ("get_weather", "get_time")
    ]
    sdk = client(api)
    messages: list[dict[str, object]] = [{"role": "user", "content": "Weather and time in Paris?"}]
    for round_, result in enumerate(("sunny", "noon")):
        stream = round_ == 1  # one round streamed, one whole: both carry the calls back
        if stream:
            chunks = list(sdk.chat.completions.create(model="wire", messages=messages, tools=tools, stream=True))
            calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
            finish = next(c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason)
            call = {"id": calls[0].id, "type": "function", "function": calls[0].function.model_dump()}
        else:
            response = sdk.chat.completions.create(model="wire", messages=messages, tools=tools)
            finish = response.choices[0].finish_reason
            call = response.choices[0].message.tool_calls[0].model_dump(exclude_none=True)
        assert finish == "tool_calls"
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": result},
        ]
    final = sdk.chat.completions.create(model="wire", messages=messages, tools=tools)
    assert final.choices[0].message.content == "Sunny, at noon."
    assert final.model_extra["moa_chat"]["guidance_reused"] is True
    for model in ("ref-a", "ref-b", "ref-c"):
        assert len(llm_server.requests_for(model)) == 1, model  # one panel for the whole user turn
    assert len(llm_server.requests_for("agg")) == 3
    assert llm_server.requests_for("agg")[0].body["tools"][0]["function"]["name"] == "get_weather"


def test_per_iteration_asks_the_references_again(api, llm_server):
    llm_server.script("each-agg", [Reply(tool_calls=[ScriptedToolCall("look", "{}", id="c1")]), Reply(text="done")])
    tools = [{"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}]
    sdk = client(api)
    first = sdk.chat.completions.create(model="wire-each", messages=QUESTION, tools=tools)
    call = first.choices[0].message.tool_calls[0].model_dump(exclude_none=True)
    messages = [
        *QUESTION,
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
    ]
    second = sdk.chat.completions.create(model="wire-each", messages=messages, tools=tools)
    assert second.choices[0].message.content == "done"
    assert len(llm_server.requests_for("each-ref")) == 2


def test_length_and_content_filter_pass_through(api, llm_server):
    llm_server.script(
        "agg", [Reply(text="cut here", finish_reason="length"), Reply(text="no", finish_reason="content_filter")]
    )
    sdk = client(api)
    assert sdk.chat.completions.create(model="wire", messages=QUESTION).choices[0].finish_reason == "length"
    chunks = list(sdk.chat.completions.create(model="wire", messages=[{"role": "user", "content": "b"}], stream=True))
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == [
        "content_filter"
    ]


def test_curl_reads_raw_sse(api, llm_server):
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    llm_server.script("agg", Reply(text="alpha beta"))
    body = json.dumps({"model": "wire", "messages": QUESTION, "stream": True})
    result = subprocess.run(
        [curl, "-sN", f"{api.base_url}/chat/completions", "-H", f"Authorization: Bearer {api.token}",
         "-H", "Content-Type: application/json", "-d", body],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    events = [line for line in result.stdout.split("\n\n") if line]
    assert all(event.startswith("data: ") for event in events)
    assert events[-1] == "data: [DONE]"
    payloads = [json.loads(event[6:]) for event in events[:-1]]
    assert "".join(p["choices"][0]["delta"].get("content", "") for p in payloads) == "alpha beta"
    assert payloads[-1]["choices"][0]["finish_reason"] == "stop" and "moa_chat" in payloads[-1]


def test_llm_cli_uses_the_endpoint(api, tmp_path):
    llm = shutil.which("llm", path=os.path.dirname(sys.executable)) or shutil.which("llm")
    if llm is None:
        pytest.skip("the llm CLI is not installed (pip install -e '.[test]')")
    user_path = tmp_path / "llm-user"
    user_path.mkdir()
    (user_path / "extra-openai-models.yaml").write_text(
        f"- model_id: wire\n  model_name: wire\n  api_base: {api.base_url}\n  api_key_name: moa\n", encoding="utf-8"
    )
    (user_path / "keys.json").write_text(json.dumps({"moa": api.token}), encoding="utf-8")
    env = {**os.environ, "LLM_USER_PATH": str(user_path)}
    for stream in ([], ["--no-stream"]):
        result = subprocess.run(
            [llm, "-m", "wire", *stream, "--no-log", "How do I reverse a list?"],
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "ok from agg"


def test_save_keeps_each_conversation_as_one_session(home, llm_server):
    from moa_chat.store import SessionStore

    configure(home, llm_server)
    llm_server.script("agg", [Reply(tool_calls=[ScriptedToolCall("look", "{}", id="c1")]), Reply(text="found it")])
    api = start_api(home, "--save")
    try:
        sdk = client(api)
        tools = [{"type": "function", "function": {"name": "look", "parameters": {"type": "object"}}}]
        first = sdk.chat.completions.create(model="wire", messages=QUESTION, tools=tools)
        call = first.choices[0].message.tool_calls[0].model_dump(exclude_none=True)
        messages = [*QUESTION, {"role": "assistant", "content": None, "tool_calls": [call]}]
        messages.append({"role": "tool", "tool_call_id": "c1", "content": "the list"})
        second = sdk.chat.completions.create(model="wire", messages=messages, tools=tools)
        messages += [{"role": "assistant", "content": second.choices[0].message.content}]
        messages += [{"role": "user", "content": "And sort it?"}]
        sdk.chat.completions.create(model="wire", messages=messages, tools=tools)  # stored before it is answered
    finally:
        api.stop()
    store = SessionStore()
    [session] = store.sessions()
    assert session.title.startswith("How do I reverse a list?") and session.preset == "wire"
    path = [(m.role, m.content) for m in store.path(session.id)]
    assert path == [
        ("user", "How do I reverse a list?"),
        ("assistant", ""),
        ("tool", "the list"),
        ("assistant", "found it"),
        ("user", "And sort it?"),
        ("assistant", "found it"),
    ]
    turns = store.turns(session.id)
    assert [t.status for t in turns] == ["ok", "ok", "ok"]
    assert sum(len(t.calls) for t in turns) == 4 + 1 + 4  # the tool round reused the panel


@pytest.mark.parametrize("traced", [True, False])
def test_save_writes_each_calls_trace_under_the_stored_turn_with_save_traces(home, llm_server, traced):
    from moa_chat.store import SessionStore
    from moa_chat.store.traces import trace_path

    configure(home, llm_server, ("save_traces: true\n" if traced else "") + "privacy_filter: display\n")
    api = start_api(home, "--save")
    try:
        prompt = [{"role": "user", "content": "mail alice@example.com how to reverse a list"}]
        chunks = list(client(api).chat.completions.create(model="wire", messages=prompt, stream=True))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "ok from agg"
    finally:
        api.stop()  # the turn is stored, its traces written, before the client hears its end
    store = SessionStore()
    [session] = store.sessions()
    path = trace_path(session.id, store.file.parent)
    if not traced:
        assert not path.exists() and not path.parent.exists()
        return
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert sorted(e["label"] for e in entries) == ["wire:agg", "wire:ref-a", "wire:ref-b", "wire:ref-c"]
    assert sorted(e["request"]["task"] for e in entries) == ["moa_aggregator", *["moa_reference"] * 3]
    [turn] = store.turns(session.id)
    assert {e["turn"] for e in entries} == {turn.id}
    text = path.read_text(encoding="utf-8")
    assert "alice@example.com" not in text and "[email]" in text and TOKEN not in text  # redacted as the chat's
    assert "alice@example.com" in str(llm_server.requests_for("agg")[0].messages)  # the models got it whole


def test_a_reasoning_aggregators_thinking_streams_as_reasoning_content(api, llm_server):
    llm_server.script("agg", Reply(text="the answer", reasoning="first I think, then I answer"))
    chunks = list(client(api).chat.completions.create(model="wire", messages=QUESTION, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    thinking = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    assert thinking == "first I think, then I answer"
    assert "".join(d.content or "" for d in deltas) == "the answer"
    whole = client(api).chat.completions.create(model="wire", messages=QUESTION)
    assert whole.choices[0].message.content == "the answer"  # the thinking is never part of the reply
