"""Stream assembly from real SSE chunks, quirks included: read as the SDK's own chunk objects, and as the engine
reads them (plain chunks, llm.stream_chunks)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from moa_chat import llm
from moa_chat.llm.stream import StreamAssembler, stream_chunks
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall

WEATHER = ScriptedToolCall("get_weather", json.dumps({"city": "Paris", "unit": "celsius"}), id="call_w")
TIME = ScriptedToolCall("get_time", json.dumps({"timezone": "Europe/Paris"}), id="call_t")


Read = Callable[[Any], Iterable[Any]]


@pytest.fixture(params=["sdk-objects", "plain-chunks"])
def read(request: pytest.FixtureRequest) -> Read:
    return stream_chunks if request.param == "plain-chunks" else iter


def _assemble(wire_config, llm_server, reply: Reply, read: Read) -> StreamAssembler:
    config = wire_config()
    llm_server.script("m", reply)
    stream = llm.call_llm(
        provider="wire",
        model="m",
        config=config,
        stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "hi"}],
    )
    assembler = StreamAssembler()
    for chunk in read(stream):
        assembler.feed(chunk)
    return assembler


def test_text_usage_and_finish_reason(wire_config, llm_server, read):
    a = _assemble(wire_config, llm_server, Reply(text="Hello, streaming world."), read)
    assert a.text == "Hello, streaming world."
    assert a.finish_reason == "stop" and a.usage and a.usage.completion_tokens > 0
    assert a.tool_calls() == []


def test_fragmented_arguments_rebuild_one_call(wire_config, llm_server, read):
    a = _assemble(wire_config, llm_server, Reply(tool_calls=[WEATHER], argument_pieces=9), read)
    [call] = a.tool_calls()
    assert (call.id, call.name) == ("call_w", "get_weather")
    assert call.parsed_arguments() == ({"city": "Paris", "unit": "celsius"}, None)
    assert a.finish_reason == "tool_calls"


def test_two_parallel_calls_and_text_in_one_message(wire_config, llm_server, read):
    a = _assemble(wire_config, llm_server, Reply(text="Checking both.", tool_calls=[WEATHER, TIME]), read)
    assert a.text == "Checking both."
    assert [(c.id, c.name) for c in a.tool_calls()] == [("call_w", "get_weather"), ("call_t", "get_time")]
    assert a.tool_calls()[1].parsed_arguments()[0] == {"timezone": "Europe/Paris"}


def test_repeated_id_and_name_deltas_do_not_concatenate(wire_config, llm_server, read):
    a = _assemble(wire_config, llm_server, Reply(tool_calls=[WEATHER, TIME], repeat_call_identity=True), read)
    assert [c.name for c in a.tool_calls()] == ["get_weather", "get_time"]
    assert [c.id for c in a.tool_calls()] == ["call_w", "call_t"]
    assert a.tool_calls()[0].parsed_arguments()[0] == {"city": "Paris", "unit": "celsius"}


def _delta(index=None, id=None, name=None, arguments=None):
    call = {"function": {}}
    if index is not None:
        call["index"] = index
    if id:
        call["id"] = id
    if name:
        call["function"]["name"] = name
    if arguments is not None:
        call["function"]["arguments"] = arguments
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}


def test_servers_that_number_every_call_zero_are_told_apart_by_id():
    a = StreamAssembler()
    for chunk in (_delta(0, "a", "one", '{"x":'), _delta(0, None, None, " 1}"), _delta(0, "b", "two", '{"y": 2}')):
        a.feed(chunk)
    assert [(c.id, c.name, c.arguments) for c in a.tool_calls()] == [("a", "one", '{"x": 1}'), ("b", "two", '{"y": 2}')]


def test_calls_without_index_continue_until_a_new_id():
    a = StreamAssembler()
    for chunk in (_delta(None, "a", "one", '{"x"'), _delta(None, None, None, ": 1}"), _delta(None, "b", "two", "{}")):
        a.feed(chunk)
    assert [(c.name, c.arguments) for c in a.tool_calls()] == [("one", '{"x": 1}'), ("two", "{}")]


def test_invalid_json_arguments_become_a_message_not_a_crash():
    a = StreamAssembler()
    a.feed(_delta(0, "a", "write_file", '{"path": "x.txt", "content": "unterminated'))
    [call] = a.tool_calls()
    arguments, problem = call.parsed_arguments()
    assert arguments is None and "not valid JSON" in problem
    assert StreamAssembler().feed({"choices": []}) == ""


def test_reasoning_deltas_are_kept_apart_from_the_answer():
    a = StreamAssembler()
    a.feed({"choices": [{"delta": {"reasoning_content": "thinking..."}}]})
    a.feed({"choices": [{"delta": {"content": "Answer."}, "finish_reason": "stop"}]})
    assert (a.text, a.reasoning, a.finish_reason) == ("Answer.", "thinking...", "stop")


def test_a_call_without_arguments_then_a_new_call_at_index_zero_stay_two_calls():
    a = StreamAssembler()
    for chunk in (_delta(0, "a", "list_directory", ""), _delta(0, "b", "read_file", '{"path": "x"}')):
        a.feed(chunk)
    assert [(c.id, c.name) for c in a.tool_calls()] == [("a", "list_directory"), ("b", "read_file")]
