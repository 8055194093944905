"""The session's contracts: ChatSession never leaves a turn running, the usage ledger is the one source of
token totals, the session starts its servers before the first call, and keys shown to the user follow a
`keymap:` remap."""

from __future__ import annotations

import json

import pytest
from moa_chat.config import load_config
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall
from moa_chat.session import ChatSession, ToolLoop
from moa_chat.tui.screens.help import HelpScreen
from moa_chat.tui.widgets.chat_log import UserPrompt
from moa_chat.tui.widgets.reply import AssistantReply
from test_cli import run
from tui_helpers import make_app, run_turn, wait_until

THREE_ROUNDS = [
    Reply(text="Looking.", tool_calls=[ScriptedToolCall("list_directory", json.dumps({"path": "."}))]),
    Reply(tool_calls=[ScriptedToolCall("search_files", json.dumps({"pattern": "nothing-matches-this"}))]),
    Reply(text="Done: the folder is listed and searched."),
]


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("a file to list\n")
    monkeypatch.chdir(root)
    return root


def test_ask_json_totals_equal_what_the_server_reported_under_per_iteration_fanout(
    home, llm_server, wire_config, project
):
    wire_config("fanout: per_iteration")
    llm_server.script("agg", THREE_ROUNDS)
    result = run("ask", "look around", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    requests = llm_server.requests
    assert len(requests) == 12  # three rounds, each asking the three references again and the aggregator
    assert all(r.usage_sent for r in requests)

    def server_total(models: set[str] | None = None) -> int:
        return sum(r.usage_sent["total_tokens"] for r in requests if models is None or r.model in models)

    usage = data["usage"]
    assert usage["total_tokens"] == server_total()
    assert usage["references_total_tokens"] == server_total({"ref-a", "ref-b", "ref-c"})
    assert usage["aggregator_total_tokens"] == server_total({"agg"})
    assert usage["prompt_tokens"] == sum(r.usage_sent["prompt_tokens"] for r in requests)
    calls = usage["calls"]
    assert len(calls) == 12
    assert sorted((c["role"], c["iteration"]) for c in calls if c["role"] == "aggregator") == [
        ("aggregator", 1),
        ("aggregator", 2),
        ("aggregator", 3),
    ]
    assert sorted(c["iteration"] for c in calls if c["role"] == "reference") == [1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert [c["finish_reason"] for c in calls if c["role"] == "aggregator"] == ["tool_calls", "tool_calls", "stop"]


def test_the_session_ledger_adds_up_its_turns(home, llm_server, wire_config):
    config = wire_config()
    session = ChatSession(config, config.preset("wire"))
    first = session.send("one")
    second = session.send("two")
    assert first.status == second.status == "ok"
    assert len(session.ledger.records) == 8  # two turns of three references and an aggregator
    assert session.ledger.usage().total_tokens == first.usage.total_tokens + second.usage.total_tokens
    assert session.ledger.usage().total_tokens == sum(r.usage_sent["total_tokens"] for r in llm_server.requests)
    assert [m["role"] for m in session.messages] == ["user", "assistant", "user", "assistant"]


def test_a_failed_aggregator_round_is_in_the_ledger(home, llm_server, wire_config):
    config = wire_config()
    llm_server.script("agg", Reply(status=503, error="overloaded"))
    result = ChatSession(config, config.preset("wire")).send("q")
    assert result.status == "failed"
    aggregator = [r for r in result.ledger.records if r.role == "aggregator"]
    assert len(aggregator) == 1 and aggregator[0].status == "failed" and "503" in (aggregator[0].error or "")


def test_send_never_raises_and_keeps_the_user_message(home, llm_server, wire_config, monkeypatch):
    config = wire_config()

    def broken(self, messages):
        raise RuntimeError("a bug in the turn")

    monkeypatch.setattr(ToolLoop, "run", broken)
    session = ChatSession(config, config.preset("wire"))
    result = session.send("hello")
    assert result.status == "failed"
    assert "a bug in the turn" in (result.error or "") and "conversation is kept" in (result.error or "")
    assert session.messages == [{"role": "user", "content": "hello"}]


async def test_a_turn_that_raises_ends_failed_and_the_next_prompt_works(home, llm_server, wire_config, monkeypatch):
    config = wire_config()
    real_run = ToolLoop.run
    calls = {"n": 0}

    def fails_once(self, messages):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("injected fault")
        return real_run(self, messages)

    monkeypatch.setattr(ToolLoop, "run", fails_once)
    app = make_app(config, "wire")
    async with app.run_test(size=(110, 36)) as pilot:
        await run_turn(pilot, "first")
        first = app.query(AssistantReply).last()
        assert not app.chat.turn_running
        assert "injected fault" in str(first.query_one(".reply-error").render())
        await run_turn(pilot, "second")
        second = app.query(AssistantReply).last()
        assert second.text == "ok from agg"
        # The failed prompt stays in the log but not in what the models are sent: no two prompts glued together
        # (history.for_models, docs/sessions.md).
        sent = llm_server.requests_for("agg")[-1].messages
        assert next(m["content"] for m in sent if m["role"] == "user") == "second"
        assert "first" not in [m["content"] for m in sent]
        assert [m.text for m in app.query(UserPrompt)] == ["first", "second"]  # still shown, failure and all


async def test_help_and_palette_name_a_remapped_key(home):
    from conftest import write_config

    write_config(home, "keymap:\n  next_preset: f11\n  help: f12\n")
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(110, 40)) as pilot:
        commands = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert commands["Next preset"].endswith("(F11)") and commands["Help"].endswith("(F12)")
        await pilot.press("f12")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = app.screen.markdown()
        assert "| **F11** | next preset |" in text and "| **F12** | keys and where to find more |" in text
        assert "**F3**" not in text
        welcome = str(app.chat.query_one(".welcome").render())
        assert "F12 help" in welcome


def test_the_session_starts_the_servers_it_is_given_before_the_first_call(home, llm_server, wire_config):
    """The server starter is a dependency the session is handed (not detected from how calls are wired)."""
    config = wire_config()
    started: list[str] = []

    def starter(name, config, *, report=None, abandon=None):
        started.append(name)
        assert not llm_server.requests  # before any request leaves
        return None

    result = ChatSession(config, config.preset("wire"), servers=starter).send("hello")
    assert result.status == "ok" and started == ["wire"]


def test_a_server_that_cannot_start_ends_the_turn_with_its_reason(home, llm_server, wire_config):
    config = wire_config()

    def starter(name, config, *, report=None, abandon=None):
        raise RuntimeError("the local model would not load")

    result = ChatSession(config, config.preset("wire"), servers=starter).send("hello")
    assert result.status == "failed" and "would not load" in (result.error or "")
    assert not llm_server.requests


def test_a_scripted_call_needs_no_wire_and_no_servers(home, wire_config):
    """A session given its own CallLLM (answers scripted, no server) and no server starter runs a whole turn."""
    from moa_chat.llm import ChatRequest

    config = wire_config()
    asked: list[ChatRequest] = []

    def answer(request: ChatRequest) -> dict[str, object]:
        asked.append(request)
        text = f"{request.task} from {request.model}"
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}

    session = ChatSession(config, config.preset("wire"), call=answer, servers=None)
    result = session.send("hello")
    assert result.status == "ok" and result.text == "moa_aggregator from agg"
    assert sorted(r.model for r in asked) == ["agg", "ref-a", "ref-b", "ref-c"]
    aggregator = next(r for r in asked if r.task == "moa_aggregator")
    assert (
        aggregator.stream
        and aggregator.max_retries == 0
        and aggregator.messages[0] == {"role": "user", "content": "hello"}
    )
    assert session.messages[-1] == {"role": "assistant", "content": "moa_aggregator from agg"}
