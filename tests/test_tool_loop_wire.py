"""The tool loop over real HTTP/SSE: the aggregator calls tools, results go back, it answers."""

from __future__ import annotations

import json
import sys
import threading
import time

import pytest
from loop_helpers import tool_loop
from moa_chat.engine.cancel import CancelToken
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall
from moa_chat.session import ToolCallEvent
from moa_chat.tools import ToolRegistry, Workspace
from moa_chat.tools.approval import Answering, ApprovalPolicy, ApprovalRequest, ApprovalVerdict
from moa_chat.tools.builtin import builtin_tools

ASK = [{"role": "user", "content": "What does README.md say?"}]


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "work"
    root.mkdir()
    (root / "README.md").write_text("# Wire test\n\nThe answer is 42.\n")
    (tmp_path / "outside.txt").write_text("private")
    return Workspace(root)


@pytest.fixture
def registry(workspace):
    return ToolRegistry.of(builtin_tools(workspace))


def call(name, arguments, id=None):
    return ScriptedToolCall(name, json.dumps(arguments) if not isinstance(arguments, str) else arguments, id=id)


def turn(config, registry, *, approval=None, observer=None, cancel=None, preset="wire"):
    return tool_loop(
        config, preset, tools=registry, approval=approval or ApprovalPolicy(), observer=observer, cancel=cancel
    )


def test_fragmented_tool_call_runs_and_its_result_reaches_the_next_request(wire_config, llm_server, registry):
    config = wire_config()
    llm_server.script(
        "agg",
        [
            Reply(
                text="Reading it.", tool_calls=[call("read_file", {"path": "README.md"}, id="c1")], argument_pieces=7
            ),
            Reply(text="It says the answer is 42."),
        ],
    )
    events = []
    result = turn(config, registry, observer=events.append).run(ASK)
    assert result.status == "ok" and result.text == "Reading it.\n\nIt says the answer is 42."
    first, second = (r.body for r in llm_server.requests_for("agg"))
    assert [t["function"]["name"] for t in first["tools"]] == list(registry.names())
    sent = second["messages"]
    assistant = next(m for m in sent if m["role"] == "assistant")
    assert assistant["content"] == "Reading it."
    assert assistant["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "README.md"}'}}
    ]
    tool_message = next(m for m in sent if m["role"] == "tool")
    assert tool_message["tool_call_id"] == "c1" and "The answer is 42." in tool_message["content"]
    statuses = [e.status for e in events if isinstance(e, ToolCallEvent)]
    assert statuses == ["requested", "running", "done"]
    assert [m["role"] for m in result.new_messages] == ["assistant", "tool", "assistant"]


def test_tool_call_only_messages_carry_empty_content_not_null(wire_config, llm_server, registry):
    config = wire_config()
    llm_server.script("agg", [Reply(tool_calls=[call("list_directory", {}, id="c1")]), Reply(text="Done.")])
    turn(config, registry).run(ASK)
    assistant = next(m for m in llm_server.requests_for("agg")[1].body["messages"] if m["role"] == "assistant")
    assert assistant["content"] == ""


def test_two_parallel_calls_each_get_a_result_in_order(wire_config, llm_server, registry):
    config = wire_config()
    llm_server.script(
        "agg",
        [
            Reply(
                tool_calls=[
                    call("list_directory", {"path": "."}, id="a"),
                    call("read_file", {"path": "README.md"}, id="b"),
                ]
            ),
            Reply(text="Both seen."),
        ],
    )
    result = turn(config, registry).run(ASK)
    tools = [m for m in llm_server.requests_for("agg")[1].body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["a", "b"]
    assert "README.md" in tools[0]["content"] and "answer is 42" in tools[1]["content"]
    assert result.text == "Both seen."


def test_repeated_id_and_name_deltas_run_one_call(wire_config, llm_server, registry):
    config = wire_config()
    llm_server.script(
        "agg",
        [
            Reply(
                tool_calls=[call("read_file", {"path": "README.md"}, id="same")],
                repeat_call_identity=True,
                argument_pieces=5,
            ),
            Reply(text="ok"),
        ],
    )
    events = []
    turn(config, registry, observer=events.append).run(ASK)
    done = [e for e in events if isinstance(e, ToolCallEvent) and e.status == "done"]
    assert [(e.call_id, e.name) for e in done] == [("same", "read_file")]


def test_invalid_json_arguments_go_back_to_the_model_as_an_error(wire_config, llm_server, registry):
    config = wire_config()
    llm_server.script(
        "agg",
        [
            Reply(tool_calls=[call("read_file", '{"path": "README.md"', id="bad")]),
            Reply(text="Sorry, retrying would help."),
        ],
    )
    result = turn(config, registry).run(ASK)
    assert result.status == "ok"
    tool = next(m for m in llm_server.requests_for("agg")[1].body["messages"] if m["role"] == "tool")
    assert tool["content"].startswith("error: the arguments are not valid JSON")
    assert "Call read_file again" in tool["content"]


def test_unknown_tool_is_an_error_result(wire_config, llm_server, registry):
    config = wire_config()
    llm_server.script("agg", [Reply(tool_calls=[call("delete_everything", {}, id="x")]), Reply(text="ok")])
    turn(config, registry).run(ASK)
    tool = next(m for m in llm_server.requests_for("agg")[1].body["messages"] if m["role"] == "tool")
    assert "no tool named 'delete_everything'" in tool["content"] and "read_file" in tool["content"]


def test_a_changing_tool_asks_first_and_a_denial_reaches_the_model(wire_config, llm_server, registry, workspace):
    config = wire_config()
    llm_server.script(
        "agg",
        [
            Reply(tool_calls=[call("write_file", {"path": "README.md", "content": "vandalised"}, id="w")]),
            Reply(text="Understood, I left it alone."),
        ],
    )
    asked = []

    def deny(request):
        asked.append(request)
        return "deny"

    events = []
    turn(config, registry, approval=ApprovalPolicy(Answering(deny)), observer=events.append).run(ASK)
    assert workspace.root.joinpath("README.md").read_text().startswith("# Wire test")
    [request] = asked
    assert request.tool == "write_file" and request.arguments["path"] == "README.md"
    assert "-# Wire test" in request.preview and "+vandalised" in request.preview
    tool = next(m for m in llm_server.requests_for("agg")[1].body["messages"] if m["role"] == "tool")
    assert tool["content"] == "denied by the user"
    assert [e.status for e in events if isinstance(e, ToolCallEvent)] == ["requested", "awaiting_approval", "denied"]


def test_with_no_one_to_ask_the_model_is_told_the_run_allows_it_not_that_a_user_said_no(
    wire_config, llm_server, registry, workspace
):
    config = wire_config()
    write = {"path": "out.txt", "content": "x"}
    local = llm_server.base_url + "/models"
    llm_server.script(
        "agg",
        [
            Reply(tool_calls=[call("write_file", write, id="w"), call("fetch_url", {"url": local}, id="f")]),
            Reply(text="ok"),
        ],
    )
    result = turn(config, registry, approval=ApprovalPolicy()).run(ASK)  # no approver: `ask` without flags
    assert not workspace.root.joinpath("out.txt").exists()
    told = {m["tool_call_id"]: m["content"] for m in result.new_messages if m["role"] == "tool"}
    assert told == {
        "w": "not allowed in this non-interactive run: run with --yes to allow",
        "f": "not allowed in this non-interactive run: run with --allow-local to allow",
    }


def test_the_policy_says_who_denied(registry):
    request = ApprovalRequest("c", "write_file", {})
    never = CancelToken()
    assert ApprovalPolicy().decide(request, never) == ApprovalVerdict("deny", denied_by="no_one_to_ask")
    assert ApprovalPolicy(Answering(lambda r: "deny")).decide(request, never) == ApprovalVerdict(
        "deny", denied_by="user"
    )
    allowed = ApprovalPolicy(Answering(lambda r: "allow_once")).decide(request, never)
    assert allowed.allowed and allowed.denied_by is None
    assert ApprovalPolicy(allow_all=True).decide(request, never) == ApprovalVerdict("allow_once")


def test_allow_for_the_session_asks_only_once(wire_config, llm_server, registry, workspace):
    config = wire_config()
    write = {"path": "out.txt", "content": "x"}
    llm_server.script(
        "agg",
        [
            Reply(tool_calls=[call("write_file", write, id="1")]),
            Reply(tool_calls=[call("write_file", write, id="2")]),
            Reply(text="done"),
        ],
    )
    asked = []
    policy = ApprovalPolicy(Answering(lambda request: asked.append(request) or "allow_always"))
    turn(config, registry, approval=policy).run(ASK)
    assert len(asked) == 1 and workspace.root.joinpath("out.txt").read_text() == "x"


def test_reading_tools_never_ask(wire_config, llm_server, registry):
    config = wire_config()
    llm_server.script("agg", [Reply(tool_calls=[call("read_file", {"path": "README.md"})]), Reply(text="ok")])

    def never(request):
        raise AssertionError("read-only tools must not ask")

    assert turn(config, registry, approval=ApprovalPolicy(Answering(never))).run(ASK).status == "ok"


def test_a_path_outside_the_working_directory_is_refused(wire_config, llm_server, registry):
    config = wire_config()
    llm_server.script("agg", [Reply(tool_calls=[call("read_file", {"path": "../outside.txt"})]), Reply(text="ok")])
    turn(config, registry).run(ASK)
    tool = next(m for m in llm_server.requests_for("agg")[1].body["messages"] if m["role"] == "tool")
    assert "refused" in tool["content"] and "private" not in tool["content"]


def test_the_iteration_cap_ends_a_runaway_loop_as_a_failed_turn(wire_config, llm_server, registry):
    """No final answer is not an answer: the turn fails, saying why, and keeps what the rounds said."""
    config = wire_config("max_iterations: 3")
    llm_server.script("agg", Reply(text="Looking again.", tool_calls=[call("list_directory", {})]))
    result = turn(config, registry).run(ASK)
    assert len(llm_server.requests_for("agg")) == 3
    assert result.status == "failed" and result.iterations == 3
    assert "stopped after 3 tool rounds without a final answer (max_iterations: 3)" in result.error
    assert "What the last round said is above" in result.error and result.text.endswith("Looking again.")
    assert result.new_messages[-1]["role"] == "tool"  # every call still got its result


@pytest.mark.parametrize(("fanout", "per_reference"), [("user_turn", 1), ("per_iteration", 3)])
def test_fanout_user_turn_versus_per_iteration(wire_config, llm_server, registry, fanout, per_reference):
    config = wire_config(f"fanout: {fanout}")
    llm_server.script(
        "agg",
        [
            Reply(tool_calls=[call("list_directory", {})]),
            Reply(tool_calls=[call("read_file", {"path": "README.md"})]),
            Reply(text="done"),
        ],
    )
    turn(config, registry).run(ASK)
    assert len(llm_server.requests_for("agg")) == 3
    for model in ("ref-a", "ref-b", "ref-c"):
        assert len(llm_server.requests_for(model)) == per_reference
    last_guidance = llm_server.requests_for("agg")[2].body["messages"][-1]["content"]
    assert ("written before the tool calls" in last_guidance) == (fanout == "user_turn")


def test_references_never_see_tool_schemas_in_the_tool_loop(wire_config, llm_server, registry):
    config = wire_config("fanout: per_iteration")
    llm_server.script("agg", [Reply(tool_calls=[call("list_directory", {})]), Reply(text="done")])
    turn(config, registry).run(ASK)
    for request in llm_server.requests_for("ref-a"):
        assert "tools" not in request.body
        assert all(m["role"] != "tool" for m in request.body["messages"])
    assert "[result of tool `list_directory`]" in str(llm_server.requests_for("ref-a")[1].body["messages"])


def test_escape_interrupts_a_running_tool(wire_config, llm_server, registry):
    config = wire_config()
    sleeper = call("run_command", {"command": [sys.executable, "-c", "import time; time.sleep(30)"]})
    llm_server.script("agg", [Reply(tool_calls=[sleeper]), Reply(text="never asked")])
    cancel = CancelToken()
    running = threading.Event()

    def observer(event):
        if isinstance(event, ToolCallEvent) and event.status == "running":
            running.set()

    box = {}
    worker = threading.Thread(
        target=lambda: box.setdefault(
            "result",
            turn(config, registry, approval=ApprovalPolicy(allow_all=True), observer=observer, cancel=cancel).run(ASK),
        )
    )
    worker.start()
    assert running.wait(10)
    started = time.monotonic()
    cancel.cancel()
    worker.join(5)
    assert time.monotonic() - started < 1
    result = box["result"]
    assert result.status == "cancelled"
    assert result.new_messages[-1] == {
        "role": "tool",
        "tool_call_id": result.new_messages[0]["tool_calls"][0]["id"],
        "content": "cancelled by the user",
    }
    assert len(llm_server.requests_for("agg")) == 1


@pytest.mark.parametrize("arguments", [{"path": ".", "content": "x"}, "[" * 100_000])
def test_a_tool_that_breaks_is_an_error_result_not_a_broken_turn(wire_config, llm_server, registry, arguments):
    """A directory as write_file's path (its preview cannot read it) or arguments nested past the JSON
    parser's depth: the model hears about it and the conversation stays valid."""
    config = wire_config()
    llm_server.script("agg", [Reply(tool_calls=[call("write_file", arguments, id="w")]), Reply(text="noted")])
    result = turn(config, registry, approval=ApprovalPolicy(allow_all=True)).run(ASK)
    assert result.status == "ok" and result.text == "noted"
    tool_message = next(m for m in result.new_messages if m["role"] == "tool")
    assert tool_message["tool_call_id"] == "w" and tool_message["content"].startswith("error: ")


def test_an_approver_that_fails_denies_nothing_silently_and_keeps_the_turn(wire_config, llm_server, registry):
    def broken(request):
        raise RuntimeError("the approval dialog went away")

    config = wire_config()
    write = {"path": "out.txt", "content": "x"}
    llm_server.script("agg", [Reply(tool_calls=[call("write_file", write, id="w")]), Reply(text="ok")])
    result = turn(config, registry, approval=ApprovalPolicy(Answering(broken))).run(ASK)
    assert result.status == "ok"
    assert {
        "role": "tool",
        "tool_call_id": "w",
        "content": "error: RuntimeError: the approval dialog went away",
    } in result.new_messages
    assert not any(m["role"] == "tool" and "created" in m["content"] for m in result.new_messages)


def test_fetching_a_local_address_asks_first_and_a_public_one_would_not(wire_config, llm_server, registry):
    config = wire_config()
    local = llm_server.base_url + "/models"  # 127.0.0.1: this machine
    llm_server.script("agg", [Reply(tool_calls=[call("fetch_url", {"url": local}, id="f")]), Reply(text="ok")])
    asked = []
    result = turn(config, registry, approval=ApprovalPolicy(Answering(lambda r: asked.append(r) or "deny"))).run(ASK)
    assert [r.tool for r in asked] == ["fetch_url"]
    assert "local or private address (127.0.0.1)" in asked[0].preview
    assert {"role": "tool", "tool_call_id": "f", "content": "denied by the user"} in result.new_messages
    fetch = registry.get("fetch_url")
    assert fetch.approval_reason({"url": "http://10.1.2.3/"}) and fetch.approval_reason({"url": "http://[::1]/"})
    assert fetch.approval_reason({"url": "http://93.184.215.14/"}) is None  # a public address reads freely


def test_a_cancel_withdraws_an_unanswered_approval_question(wire_config, llm_server, registry, workspace):
    """The turn waits on the approver's future together with its cancel token: a cancel ends the wait at once,
    cancels the future (so a dialog showing the question closes) and writes nothing."""
    from concurrent.futures import Future

    class Unanswered:
        def __init__(self) -> None:
            self.asked = threading.Event()
            self.future: Future = Future()

        def ask(self, request):
            self.asked.set()
            return self.future

    config = wire_config()
    llm_server.script("agg", [Reply(tool_calls=[call("write_file", {"path": "out.txt", "content": "x"}, id="w")])])
    approver, cancel, box = Unanswered(), CancelToken(), {}
    worker = threading.Thread(
        target=lambda: box.setdefault(
            "result", turn(config, registry, approval=ApprovalPolicy(approver), cancel=cancel).run(ASK)
        )
    )
    worker.start()
    assert approver.asked.wait(10)
    cancel.cancel()
    worker.join(10)
    assert not worker.is_alive()
    assert approver.future.cancelled()
    assert box["result"].status == "cancelled"
    assert not workspace.root.joinpath("out.txt").exists()
