"""Conversations that outlast the context window, on the real wire: a scripted server that enforces each model's
window with its family's real overflow error and counts every prompt with its own tokenizer (not moa-chat's
estimate), a stored session of 60 exchanges through `ChatSession`, and what was sent, turn by turn."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import write_config
from moa_chat.config import load_config
from moa_chat.engine.events import CompactionEnded, RequestFitted
from moa_chat.prompts import COMPACT_PROMPT, SUMMARY_HEADER
from moa_chat.providers.loopback_server import Reply
from moa_chat.providers.loopback_windows import ModelWindow
from moa_chat.session import ChatSession
from moa_chat.store import SessionStore
from moa_chat.store.export import as_json
from scripted_server import ScriptedServer

WINDOW = 3000
MAX_TOKENS = 300
CONFIG = """
providers:
  wire:
    base_url: {base_url}
    max_retries: 0
moa:
  default_preset: long
  presets:
    long:
      reference_models:
        - {{provider: wire, model: ref-a, max_tokens: {max_tokens}}}
        - {{provider: wire, model: ref-b, max_tokens: {max_tokens}}}
      aggregator: {{provider: wire, model: agg, max_tokens: {max_tokens}}}
"""
SENTENCE = "The cache keeps each answer for ten minutes, keyed by the request, and drops the oldest first. "


def answer(body: dict[str, Any]) -> Reply:
    """A reference's or the aggregator's answer (about 120 words), or a compaction's summary."""
    messages = body.get("messages") or []
    if (
        messages
        and messages[0].get("role") == "system"
        and str(messages[0].get("content", "")).startswith(COMPACT_PROMPT[:40])
    ):
        return Reply(text="The user asks numbered questions about a cache; each was answered in full. " * 3)
    return Reply(text=SENTENCE * 7)


@pytest.fixture
def windowed() -> Iterator[ScriptedServer]:
    """The models tell their windows (vLLM's /v1/models max_model_len) and refuse a request over them."""
    server = ScriptedServer(windows={m: ModelWindow(WINDOW, "vllm") for m in ("ref-a", "ref-b", "agg")})
    for model in ("ref-a", "ref-b", "agg"):
        server.script(model, answer)
    yield server
    server.stop()


@pytest.fixture
def silent() -> Iterator[ScriptedServer]:
    """The models tell nothing of their windows (OpenAI's /models) and refuse a request over them in OpenAI's words."""
    server = ScriptedServer(windows={m: ModelWindow(WINDOW, "openai") for m in ("ref-a", "ref-b", "agg")})
    for model in ("ref-a", "ref-b", "agg"):
        server.script(model, answer)
    yield server
    server.stop()


def session_on(home, server: ScriptedServer) -> ChatSession:
    config = load_config(write_config(home, CONFIG.format(base_url=server.base_url, max_tokens=MAX_TOKENS)))
    return ChatSession(config, config.preset("long"), store=SessionStore())


def converse(session: ChatSession, exchanges: int) -> list[object]:
    events: list[object] = []
    for n in range(exchanges):
        result = session.send(f"Question {n}: how long does the cache keep answer {n}?", observer=events.append)
        assert result.status == "ok", f"exchange {n}: {result.error}"
    return events


def test_sixty_exchanges_on_a_small_window_every_turn_whole_every_request_within_it(home, windowed):
    session = session_on(home, windowed)
    events = converse(session, 60)
    requests = windowed.requests
    assert not any(r.refused for r in requests)
    # Every request, as the server counted it with its own tokenizer, left room for its answer.
    assert max(r.prompt_tokens + MAX_TOKENS for r in requests) <= WINDOW
    compactions = [e for e in events if isinstance(e, CompactionEnded)]
    assert len(compactions) >= 2 and all(c.error is None for c in compactions)
    assert compactions[-1].exchanges >= 40 and compactions[-1].tokens_after < compactions[-1].tokens_before
    # The last turn's requests carry the summary in place of the exchanges it stands for.
    last = windowed.requests_for("agg")[-1].messages
    assert any(str(m.get("content", "")).startswith(SUMMARY_HEADER) for m in last)
    assert "Question 0:" not in json.dumps(last) and "Question 59:" in json.dumps(last)
    # The whole history stays: the export holds every exchange.
    exported = as_json(session.store, session.id)
    prompts = [m["content"] for m in exported["messages"] if m["role"] == "user"]
    assert prompts == [f"Question {n}: how long does the cache keep answer {n}?" for n in range(60)]
    # Every call says what it sent, within its window.
    calls = [c.record for t in session.store.turns(session.id) for c in t.calls]
    sent = [c.sent_tokens for c in calls if c.role != "compaction"]
    assert sent and all(s is not None and s + MAX_TOKENS <= WINDOW for s in sent)
    assert {c.window for c in calls} == {WINDOW}


def test_a_reopened_session_sends_the_same_summary(home, windowed):
    session = session_on(home, windowed)
    converse(session, 24)
    summary = session.context.summary
    assert summary is not None
    reopened = session_on(home, windowed)
    reopened.open(session.id)
    assert reopened.context.summary == summary
    # What the models would be sent next: the same summary and the same exchanges after it.
    assert reopened.context.view(reopened.messages) == session.context.view(session.messages)
    assert reopened.context.view(reopened.messages)[0] == summary.message()
    converse(reopened, 1)
    sent = windowed.requests_for("agg")[-1].messages
    assert any(str(m.get("content", "")).startswith(SUMMARY_HEADER) for m in sent)


def test_a_window_nobody_states_is_learned_from_the_first_overflow(home, silent):
    session = session_on(home, silent)
    events = converse(session, 40)
    refused = [r.model for r in silent.requests if r.refused]
    # The aggregator reads the most (the conversation and the answers), so its window is met first: it refuses
    # once, its window is learned from the error, and the request, fitted to it, goes again. From then on the
    # conversation is compacted to that window, and no model refuses again.
    assert refused == ["agg"]
    assert session.store.model_facts.learned_window("wire", "agg").tokens == WINDOW
    assert all(r.prompt_tokens + MAX_TOKENS <= WINDOW for r in silent.requests if not r.refused and r.model == "agg")
    assert any(isinstance(e, CompactionEnded) and e.error is None for e in events)


def test_the_guidance_is_cut_in_proportion_when_it_does_not_fit(home, windowed):
    """References whose answers together are longer than the aggregator's room: each is cut to the same share of
    its length, keeping its start and a mark; none is dropped."""
    windowed.script("ref-a", Reply(text=SENTENCE * 90))
    windowed.script("ref-b", Reply(text=SENTENCE * 45))
    session = session_on(home, windowed)
    events: list[object] = []
    assert session.send("How long does the cache keep an answer?", observer=events.append).status == "ok"
    (fitted,) = [e for e in events if isinstance(e, RequestFitted) and e.role == "aggregator"]
    assert [c.label for c in fitted.cuts] == ["wire:ref-a", "wire:ref-b"]
    shares = [c.kept / c.total for c in fitted.cuts]
    assert abs(shares[0] - shares[1]) < 0.05  # the same share of each
    guidance = windowed.requests_for("agg")[-1].messages[-1]["content"]
    assert guidance.count("cut to fit the aggregator's context window") == 2
    assert windowed.requests_for("agg")[-1].prompt_tokens + MAX_TOKENS <= WINDOW


def test_a_prompt_longer_than_a_window_is_refused_before_anything_is_sent(home, windowed, tmp_path):
    from moa_chat.session.attachments import Attachment, attach

    session = session_on(home, windowed)
    big = Attachment("big.txt", SENTENCE * 300, len(SENTENCE * 300))
    content = attach("Summarize this file in one line.", [big])
    for slot in (*session.preset.references, session.preset.aggregator):  # the windows, as a turn asks them
        session.context.finder(session.config).window(slot)
    problem = session.context.too_long(session.config, session.preset, content, [big])
    assert problem is not None
    assert "big.txt: about" in problem and f"context window is {WINDOW:,} tokens" in problem
    assert f"{MAX_TOKENS:,} of them are kept for its answer" in problem
    result = session.send(content)
    assert result.status == "failed" and "nothing was sent" in (result.error or "")
    assert all(r.path.endswith("/models") for r in windowed.requests)  # no chat request left


def test_the_new_users_big_file_on_the_local_model_is_refused_naming_the_window(home, tmp_path):
    """`ask --preset local "Summarize this file in one line." -a big.txt` with a 50,000-character file: the local
    model's window (8,192 tokens, moa-chat starts its server with it) cannot hold it, and ask says so, naming the
    file, its size and the window, before any server starts (exit 2, nothing sent)."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("the local extra (llama-cpp-python) is not installed here")
    big = tmp_path / "big.txt"
    big.write_text((SENTENCE * 600)[:50_000])
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "moa_chat",
            "ask",
            "--preset",
            "local",
            "Summarize this file in one line.",
            "-a",
            str(big),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("moa-chat: error: not sent: the prompt is about ")
    assert "big.txt: about " in error and "context window is 8,192 tokens" in error
    assert "connection" not in result.stderr.lower() and "Starting the local model" not in result.stderr


def test_the_api_answers_a_conversation_no_window_can_hold_with_a_400(home, windowed):
    """`moa-chat api` owns no conversation, so it never compacts one: a conversation longer than the aggregator's
    window, even with its earlier exchanges left out, is a 400 in OpenAI's shape, with the numbers."""
    import openai
    from api_helpers import client, start_api

    write_config(home, CONFIG.format(base_url=windowed.base_url, max_tokens=MAX_TOKENS))
    api = start_api(home)
    try:
        huge = [{"role": "user", "content": SENTENCE * 300}]
        with pytest.raises(openai.BadRequestError) as refused:
            client(api).chat.completions.create(model="long", messages=huge)
        error = refused.value.body
        assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
        assert "wire:agg" in error["message"] and f"window of {WINDOW:,} tokens" in error["message"]
        assert not [r for r in windowed.requests if r.path.endswith("/chat/completions")]  # nothing was sent
        # A conversation that fits is answered, its requests fitted; the moa_chat field says what was fitted.
        answer = client(api).chat.completions.create(model="long", messages=[{"role": "user", "content": "Hi?"}])
        assert answer.choices[0].message.content and answer.model_extra["moa_chat"]["fitted"] == []
    finally:
        api.stop()
