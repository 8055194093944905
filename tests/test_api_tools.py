"""`moa-chat api --read-tools`: moa-chat's own tools that only read run on the server, over the real process;
tools that change things or need approval never run, and the client's own tools keep working beside them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from api_helpers import QUESTION, ApiProcess, client, configure, start_api
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall
from scripted_server import ScriptedServer

WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
READERS = {"read_file", "list_directory", "search_files", "fetch_url"}


@pytest.fixture
def reading_api(home: Path, llm_server: ScriptedServer) -> Iterator[ApiProcess]:
    configure(home, llm_server)
    (home / "notes.txt").write_text("the build is slow because of the linker\n")
    server = start_api(home, "--read-tools")
    yield server
    server.stop()


def offered(body: dict[str, object]) -> set[str]:
    return {tool["function"]["name"] for tool in body.get("tools") or []}  # type: ignore[attr-defined, index]


def tool_results(body: dict[str, object]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}  # type: ignore[attr-defined, index]


def test_reading_tools_run_on_the_server_and_changing_ones_are_refused(reading_api, llm_server, home):
    assert any("only read run here" in line for line in reading_api.banner)
    llm_server.script(
        "agg",
        [
            Reply(
                tool_calls=[
                    ScriptedToolCall("read_file", json.dumps({"path": "notes.txt"}), id="r1"),
                    ScriptedToolCall("run_command", json.dumps({"command": "touch ran"}), id="x1"),
                    ScriptedToolCall("write_file", json.dumps({"path": "wrote.txt", "content": "x"}), id="w1"),
                ]
            ),
            Reply(text="The linker is slow."),
        ],
    )
    reply = client(reading_api).chat.completions.create(model="wire", messages=QUESTION, tools=WEATHER)
    message = reply.choices[0].message
    assert message.content == "The linker is slow." and not message.tool_calls
    assert reply.choices[0].finish_reason == "stop"
    first, second = (request.body for request in llm_server.requests_for("agg"))
    assert offered(first) == READERS | {"get_weather"}  # never run_command or write_file
    results = tool_results(second)
    assert "the build is slow because of the linker" in results["r1"]
    for call_id, name in (("x1", "run_command"), ("w1", "write_file")):
        assert results[call_id].startswith(f"error: {name} does not run through moa-chat's API")
    assert not (home / "ran").exists() and not (home / "wrote.txt").exists()
    assert len(llm_server.requests_for("ref-a")) == 1  # the tool round reused the panel


def test_a_reading_call_that_needs_approval_is_refused(reading_api, llm_server):
    local = json.dumps({"url": "http://127.0.0.1:9/secret"})
    llm_server.script("agg", [Reply(tool_calls=[ScriptedToolCall("fetch_url", local, id="f1")]), Reply(text="no")])
    client(reading_api).chat.completions.create(model="wire", messages=QUESTION)
    result = tool_results(llm_server.requests_for("agg")[1].body)["f1"]
    assert result.startswith("error: fetch_url does not run through moa-chat's API") and "approval" in result


def test_the_clients_tools_still_go_back_to_the_client(reading_api, llm_server):
    llm_server.script("agg", [Reply(tool_calls=[ScriptedToolCall("get_weather", "{}", id="c1")])])
    stream = client(reading_api).chat.completions.create(model="wire", messages=QUESTION, tools=WEATHER, stream=True)
    chunks = list(stream)
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert [call.function.name for call in calls] == ["get_weather"]
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]


def test_a_client_tool_of_the_same_name_wins(reading_api, llm_server, home):
    mine = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    llm_server.script("agg", [Reply(tool_calls=[ScriptedToolCall("read_file", '{"path": "notes.txt"}', id="c1")])])
    reply = client(reading_api).chat.completions.create(model="wire", messages=QUESTION, tools=mine)
    assert [call.function.name for call in reply.choices[0].message.tool_calls or []] == ["read_file"]
    assert [t["function"]["name"] for t in llm_server.requests_for("agg")[0].body["tools"]].count("read_file") == 1


def test_without_the_flag_no_tool_of_moa_chat_is_offered_or_run(home, llm_server):
    configure(home, llm_server)
    api = start_api(home)
    try:
        llm_server.script("agg", [Reply(tool_calls=[ScriptedToolCall("run_command", '{"command": "touch ran"}')])])
        reply = client(api).chat.completions.create(model="wire", messages=QUESTION)
        assert [call.function.name for call in reply.choices[0].message.tool_calls or []] == ["run_command"]
        assert not offered(llm_server.requests_for("agg")[0].body)
        assert not (home / "ran").exists()
    finally:
        api.stop()


def test_tool_rounds_past_max_iterations_fail_the_turn(home, llm_server):
    configure(home, llm_server, extra="max_iterations: 1")
    api = start_api(home, "--read-tools")
    try:
        llm_server.script("agg", [Reply(tool_calls=[ScriptedToolCall("list_directory", "{}", id="l1")])] * 3)
        with pytest.raises(openai.APIStatusError) as failed:
            client(api).chat.completions.create(model="wire", messages=QUESTION)
        assert failed.value.status_code == 502 and "max_iterations: 1" in failed.value.message
        assert len(llm_server.requests_for("agg")) == 1
    finally:
        api.stop()
