"""MCP servers as tools: a tiny stdio server written here, discovered and called through a real turn."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from conftest import WIRE_CONFIG, write_config
from loop_helpers import tool_loop
from moa_chat.config import load_config
from moa_chat.engine.cancel import CancelToken
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall
from moa_chat.tools import Workspace, tools_for
from moa_chat.tools.approval import ApprovalPolicy
from moa_chat.tools.mcp_bridge import McpHub

SERVER = str(Path(__file__).with_name("mcp_tiny_server.py"))


TINY_SERVER = f"""
mcp_servers:
  tiny:
    command: {sys.executable}
    args: [{SERVER}]
"""


def _config(home, llm_server, servers: str):
    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="") + servers
    return load_config(write_config(home, text))


def test_tools_are_discovered_prefixed_and_called_in_a_turn(home, llm_server, tmp_path):
    config = _config(home, llm_server, TINY_SERVER)
    hub = McpHub(config.mcp_servers).start()
    try:
        registry, warnings = tools_for(config, config.preset("wire"), Workspace(tmp_path), hub)
        assert not warnings and not hub.failures
        assert {"tiny__add", "tiny__remember", "tiny__fail"} <= set(registry.names())
        assert "read_file" in registry.names()  # beside the built-ins
        assert registry.get("tiny__add").read_only and not registry.get("tiny__remember").read_only
        schema = next(s for s in registry.schemas() if s["function"]["name"] == "tiny__add")
        assert set(schema["function"]["parameters"]["properties"]) == {"a", "b"}

        llm_server.script(
            "agg",
            [
                Reply(
                    tool_calls=[
                        ScriptedToolCall("tiny__add", json.dumps({"a": 2, "b": 40}), id="m1"),
                        ScriptedToolCall("tiny__remember", json.dumps({"note": "hi"}), id="m2"),
                        ScriptedToolCall("tiny__fail", "{}", id="m3"),
                    ]
                ),
                Reply(text="2 + 40 = 42"),
            ],
        )
        result = tool_loop(config, tools=registry, approval=ApprovalPolicy(allow_all=True)).run(
            [{"role": "user", "content": "add 2 and 40"}]
        )
        assert result.status == "ok" and result.text == "2 + 40 = 42"
        tools = {
            m["tool_call_id"]: m["content"]
            for m in llm_server.requests_for("agg")[1].body["messages"]
            if m["role"] == "tool"
        }
        assert tools["m1"] == "42"
        assert tools["m2"] == "stored 1 note(s)"
        assert tools["m3"].startswith("error: ") and "fail" in tools["m3"]  # an error result, not a crash
    finally:
        started = time.monotonic()
        hub.close()
        assert time.monotonic() - started < 5


def test_a_server_that_fails_to_start_is_reported_once_and_skipped(home, llm_server, tmp_path):
    config = _config(
        home,
        llm_server,
        f"""
mcp_servers:
  broken:
    command: definitely-not-a-real-binary-xyz
  tiny:
    command: {sys.executable}
    args: [{SERVER}]
""",
    )
    reports = []
    hub = McpHub(config.mcp_servers).start(report=reports.append)
    try:
        assert len(reports) == 1
        assert "MCP server 'broken' failed to start" in reports[0] and "command not found" in reports[0]
        registry, _ = tools_for(config, config.preset("wire"), Workspace(tmp_path), hub)
        assert "tiny__add" in registry.names() and not any(n.startswith("broken") for n in registry.names())
        assert registry.tools["tiny__add"].run({"a": 1, "b": 1}, CancelToken()) == "2"
    finally:
        hub.close()


def test_presets_can_name_a_whole_mcp_server_in_tools(home, llm_server, tmp_path):
    config = _config(home, llm_server, "tools: [read_file, tiny]\n" + TINY_SERVER)
    hub = McpHub(config.mcp_servers).start()
    try:
        registry, warnings = tools_for(config, config.preset("wire"), Workspace(tmp_path), hub)
        assert registry.names() == ["read_file", "tiny__add", "tiny__remember", "tiny__fail", "tiny__environment"]
        assert not warnings
    finally:
        hub.close()


def test_names_that_sanitising_or_the_64_character_cut_would_merge_stay_distinct():
    from moa_chat.tools.mcp_bridge import _unique, tool_name

    first, second = tool_name("srv", "a.b" + "x" * 80), tool_name("srv", "a_b" + "x" * 80)
    assert first == second and len(first) == 64  # the clash
    taken = {first}
    renamed = _unique(second, taken)
    assert renamed not in taken and len(renamed) <= 64 and renamed.endswith("_2")
    assert _unique(second, {first, renamed}).endswith("_3")


def test_a_server_gets_the_tool_environment_policy_plus_its_own_env(home, llm_server, tmp_path, monkeypatch):
    """The same allowlist as commands run by tools (`tool_env: core`), then the server's own `env:`."""
    from moa_chat.session import ChatSession

    monkeypatch.setenv("PGPASSWORD", "pg-value-123456")
    monkeypatch.setenv("LANG", "C.UTF-8")
    servers = TINY_SERVER + "    env: {TINY_SETTING: on}\n"
    config = _config(home, llm_server, servers)
    call = ScriptedToolCall("tiny__environment", "{}", id="e1")
    llm_server.script("agg", [Reply(tool_calls=[call]), Reply(text="seen")])
    session = ChatSession(config, config.preset("wire"), allow_all=True)
    try:
        session.start_mcp()
        result = session.send("what do you see?")
    finally:
        session.close()
    names = next(m["content"] for m in result.new_messages if m["role"] == "tool").split()
    assert {"PATH", "HOME", "LANG", "TINY_SETTING"} <= set(names)
    assert "PGPASSWORD" not in names and "MOA_CHAT_HOME" not in names
