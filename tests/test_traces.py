"""Traces and the privacy filter: what is kept, where, with what permissions, and redacted how."""

from __future__ import annotations

import stat

from conftest import WIRE_CONFIG, write_config
from moa_chat.config import load_config
from moa_chat.session import ChatSession
from moa_chat.store import SessionStore
from moa_chat.store.traces import read_traces, trace_path

FAKE_KEY = "sk-test-TRACEKEY-0123456789abcdef"


def traced_config(home, llm_server, extra: str = "", *, keyed: bool = False):
    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="")
    if keyed:
        text = text.replace("    max_retries: 0\n", "    max_retries: 0\n    api_key_env: WIRE_API_KEY\n")
    return load_config(write_config(home, text + "save_traces: true\n" + extra))


def test_every_call_of_a_turn_is_traced_owner_only_without_keys(home, llm_server, monkeypatch):
    monkeypatch.setenv("WIRE_API_KEY", FAKE_KEY)
    config = traced_config(home, llm_server, keyed=True)
    session = ChatSession(config, config.preset("wire"), store=SessionStore())
    result = session.send("How do I reverse a list?")
    assert result.status == "ok"
    path = trace_path(session.id, home)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    entries = read_traces(session.id, home)
    assert sorted(e["label"] for e in entries) == ["wire:agg", "wire:ref-a", "wire:ref-b", "wire:ref-c"]
    aggregator = next(e for e in entries if e["role"] == "aggregator")
    assert aggregator["answer"] == "ok from agg" and aggregator["status"] == "ok"
    assert aggregator["request"]["model"] == "agg"
    assert aggregator["request"]["messages"][0] == {"role": "user", "content": "How do I reverse a list?"}
    assert aggregator["usage"]["total_tokens"] > 0 and aggregator["seconds"] >= 0
    text = path.read_text()
    assert FAKE_KEY not in text and "Authorization" not in text and "api_key" not in text
    assert "config" not in aggregator["request"]
    [turn] = SessionStore().turns(session.id)
    assert {e["turn"] for e in entries} == {turn.id}  # each call names the stored turn it belongs to


def test_no_traces_unless_asked(home, llm_server):
    config = load_config(write_config(home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra="")))
    session = ChatSession(config, config.preset("wire"), store=SessionStore())
    session.send("hi")
    assert not trace_path(session.id, home).exists()


def test_privacy_display_redacts_the_trace_but_not_what_the_models_get(home, llm_server):
    config = traced_config(home, llm_server, "privacy_filter: display\n")
    session = ChatSession(config, config.preset("wire"), store=SessionStore())
    session.send("mail alice@example.com about build 2026-12-01, commit 3f2a9c1")
    sent = llm_server.requests_for("agg")[0].messages[0]["content"]
    assert "alice@example.com" in sent
    trace = trace_path(session.id, home).read_text()
    assert "alice@example.com" not in trace and "[email]" in trace
    assert "2026-12-01" in trace and "3f2a9c1" in trace  # dates and hashes are left alone


def test_privacy_full_redacts_what_the_models_receive(home, llm_server):
    config = traced_config(home, llm_server, "privacy_filter: full\n")
    session = ChatSession(config, config.preset("wire"), store=SessionStore())
    session.send("my key is sk-proj-AbCdEfGhIjKlMnOpQrSt and my mail bob@example.org")
    for request in llm_server.requests:
        text = str(request.messages)
        assert "sk-proj-AbCdEfGhIjKlMnOpQrSt" not in text and "bob@example.org" not in text
    assert "[email]" in str(llm_server.requests_for("agg")[0].messages)


def test_privacy_display_redacts_what_is_shown_even_split_across_deltas_but_keeps_it_stored(home, llm_server, capsys):
    from moa_chat.cli import main
    from moa_chat.providers.loopback_server import Reply

    traced_config(home, llm_server, "privacy_filter: display\n")
    # The address arrives in two pieces: a per-delta filter would miss it.
    llm_server.script("agg", Reply(text="", pieces=["write to ali", "ce@example.com today, about ", "3f2a9c1"]))
    assert main(["ask", "-q", "hi"]) == 0
    out = capsys.readouterr().out
    assert "alice@example.com" not in out and "[email]" in out and "3f2a9c1" in out
    [session] = SessionStore().sessions()
    stored = [m.content for m in SessionStore().path(session.id) if m.role == "assistant"]
    assert stored == ["write to alice@example.com today, about 3f2a9c1"]
