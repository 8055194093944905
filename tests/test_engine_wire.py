"""The MoA engine over real HTTP: parallel references, failure isolation, guidance, streaming, usage."""

from __future__ import annotations

import itertools
import threading
import time

import pytest
from loop_helpers import tool_loop
from moa_chat.engine import AggregatorStarted, ReferenceFinished, ReferenceQueued, ReferenceStarted
from moa_chat.engine.cancel import Cancelled, CancelToken
from moa_chat.llm.stream import StreamAssembler
from moa_chat.moa import MoAChatCompletions
from moa_chat.prompts import ADVISOR_PROMPT
from moa_chat.providers.loopback_server import Reply

QUESTION = [
    {"role": "system", "content": "You are a terse assistant. SECRET-SYSTEM-PROMPT"},
    {"role": "user", "content": "How do I reverse a list in Python?"},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]


def _drain(stream) -> StreamAssembler:
    assembler = StreamAssembler()
    for chunk in stream:
        assembler.feed(chunk)
    return assembler


def test_references_run_in_parallel(wire_config, llm_server):
    config = wire_config()
    for model in ("ref-a", "ref-b", "ref-c"):
        llm_server.script(model, Reply(text=f"answer from {model}", delay=0.3))
    MoAChatCompletions("wire", config=config).create(messages=QUESTION)
    refs = [llm_server.requests_for(m)[0] for m in ("ref-a", "ref-b", "ref-c")]
    # Every reference request arrived before any of them was answered: they overlapped.
    assert max(r.received_at for r in refs) < min(r.finished_at for r in refs)
    aggregator = llm_server.requests_for("agg")[0]
    assert aggregator.received_at >= max(r.finished_at for r in refs)


def test_max_workers_caps_the_pool(wire_config, llm_server):
    config = wire_config("max_workers: 1")
    for model in ("ref-a", "ref-b", "ref-c"):
        llm_server.script(model, Reply(text=model, delay=0.05))
    MoAChatCompletions("wire", config=config).create(messages=QUESTION)
    refs = sorted((llm_server.requests_for(m)[0] for m in ("ref-a", "ref-b", "ref-c")), key=lambda r: r.received_at)
    for earlier, later in itertools.pairwise(refs):
        assert later.received_at >= earlier.finished_at


def test_reference_view_and_advisor_prompt(wire_config, llm_server):
    config = wire_config()
    conversation = [
        *QUESTION,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "x" * 5000 + "TAIL-MARK"},
        {"role": "assistant", "content": "The file is long."},
        {"role": "user", "content": "Summarise it."},
    ]
    MoAChatCompletions("wire", config=config).create(messages=conversation, tools=TOOLS)
    body = llm_server.requests_for("ref-a")[0].body
    messages = body["messages"]
    assert messages[0] == {"role": "system", "content": ADVISOR_PROMPT}
    assert "SECRET-SYSTEM-PROMPT" not in str(messages)  # the user's system prompt is left out
    assert "tools" not in body  # references never receive tool schemas
    assert all(m["role"] in ("system", "user", "assistant") for m in messages)
    assert messages[-1]["role"] == "user" and "Summarise it." in messages[-1]["content"]
    rendered = str(messages)
    assert (
        '[called tool `read_file` with arguments {"path": "a.py"}]' in rendered.replace("\\'", "'")
        or 'called tool `read_file` with arguments {"path": "a.py"}' in rendered
    )
    assert "TAIL-MARK" in rendered and "characters omitted" in rendered
    roles = [m["role"] for m in messages[1:]]
    assert all(a != b for a, b in itertools.pairwise(roles))  # alternating


def test_aggregator_gets_history_then_guidance_in_preset_order_and_the_tools(wire_config, llm_server):
    config = wire_config()
    llm_server.script("ref-a", Reply(text="Use reversed().", delay=0.2))
    llm_server.script("ref-b", Reply(text="Use slicing [::-1]."))
    llm_server.script("ref-c", Reply(text="Use list.reverse() in place.", delay=0.1))
    MoAChatCompletions("wire", config=config).create(messages=QUESTION, tools=TOOLS)
    body = llm_server.requests_for("agg")[0].body
    assert body["messages"][: len(QUESTION)] == QUESTION  # history first: the prefix stays cacheable
    guidance = body["messages"][-1]["content"]
    a = guidance.index("Reference 1 — wire:ref-a]\n\nUse reversed().")
    b = guidance.index("Reference 2 — wire:ref-b]\n\nUse slicing [::-1].")
    c = guidance.index("Reference 3 — wire:ref-c]\n\nUse list.reverse() in place.")
    assert a < b < c
    assert body["tools"] == TOOLS


def test_failed_and_timed_out_references_are_isolated(wire_config, llm_server):
    config = wire_config("reference_timeout: 0.5")
    llm_server.script("ref-a", Reply(text="Solid advice."))
    llm_server.script("ref-b", Reply(status=500, error="RAW-UPSTREAM-FAILURE stack trace"))
    llm_server.script("ref-c", Reply(text="too late", delay=5))
    llm_server.script("agg", Reply(text="Final answer."))
    events = []
    started = time.monotonic()
    facade = MoAChatCompletions("wire", config=config, observer=events.append)
    response = facade.create(messages=QUESTION)
    assert time.monotonic() - started < 3  # the slow reference was abandoned, not awaited
    assert response.choices[0].message.content == "Final answer."
    finished = {e.label: e for e in events if isinstance(e, ReferenceFinished)}
    assert finished["wire:ref-a"].status == "ok"
    assert finished["wire:ref-b"].status == "failed" and "HTTP 500" in finished["wire:ref-b"].error
    assert finished["wire:ref-c"].status == "timeout"
    guidance = llm_server.requests_for("agg")[0].body["messages"][-1]["content"]
    assert "Solid advice." in guidance
    assert "RAW-UPSTREAM-FAILURE" not in guidance and "too late" not in guidance
    assert "Reference 2 — wire:ref-b (failed)" in guidance
    assert "Reference 3 — wire:ref-c (timed out)" in guidance


def test_all_references_failing_leaves_the_aggregator_alone_with_a_note(wire_config, llm_server):
    config = wire_config()
    for model in ("ref-a", "ref-b", "ref-c"):
        llm_server.script(model, Reply(status=503, error="overloaded"))
    MoAChatCompletions("wire", config=config).create(messages=QUESTION)
    guidance = llm_server.requests_for("agg")[0].body["messages"][-1]["content"]
    assert "every reference model failed" in guidance
    assert "overloaded" not in guidance


def test_progress_events_in_order(wire_config, llm_server):
    config = wire_config()
    events = []
    MoAChatCompletions("wire", config=config).create(messages=QUESTION, observer=events.append)
    kinds = [type(e).__name__ for e in events]
    assert kinds[:3] == ["ReferenceQueued"] * 3
    assert kinds.count("ReferenceStarted") == 3 and kinds.count("ReferenceFinished") == 3
    assert kinds[-1] == "AggregatorStarted"
    for index in range(3):
        mine = [e for e in events if getattr(e, "index", None) == index]
        assert [type(e) for e in mine if type(e).__name__ != "ReferenceProgress"] == [
            ReferenceQueued,
            ReferenceStarted,
            ReferenceFinished,
        ]
    last = events[-1]
    assert isinstance(last, AggregatorStarted) and last.references_ok == 3 and last.label == "wire:agg"


def test_stream_true_streams_the_aggregator_and_usage_is_collected(wire_config, llm_server):
    config = wire_config()
    llm_server.script("ref-a", Reply(text="a", usage={"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}))
    llm_server.script(
        "agg",
        Reply(text="streamed final answer", usage={"prompt_tokens": 100, "completion_tokens": 3, "total_tokens": 103}),
    )
    facade = MoAChatCompletions("wire", config=config)
    stream = facade.create(messages=QUESTION, stream=True, timeout=30)
    assembler = _drain(stream)
    assert assembler.text == "streamed final answer"
    assert assembler.usage.total_tokens == 103
    body = llm_server.requests_for("agg")[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert facade.last_references[0].usage.total_tokens == 11


def test_turn_totals_reference_and_aggregator_usage(wire_config, llm_server):
    config = wire_config()
    usage = {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
    for model in ("ref-a", "ref-b", "ref-c", "agg"):
        llm_server.script(model, Reply(text=f"from {model}", usage=usage))
    result = tool_loop(config).run(QUESTION)
    assert result.status == "ok" and result.text == "from agg"
    assert result.usage.total_tokens == 40
    assert result.new_messages == [{"role": "assistant", "content": "from agg"}]


def test_aggregator_failure_keeps_the_turn_and_names_provider_and_model(wire_config, llm_server):
    config = wire_config()
    llm_server.script("agg", Reply(status=429, error="Rate limit reached"))
    result = tool_loop(config).run(QUESTION)
    assert result.status == "failed"
    assert result.error == "wire:agg failed: HTTP 429: Rate limit reached (rate limited; try again shortly)"
    assert len(result.references) == 3


def test_connection_drop_mid_stream_keeps_the_partial_text(wire_config, llm_server):
    config = wire_config()
    llm_server.script("agg", Reply(text="one two three four five six", drop_after=3))
    result = tool_loop(config).run(QUESTION)
    # Not "cannot reach the endpoint": it was reached, and answered in part.
    assert result.status == "cut_off"
    assert result.error.startswith("the reply from wire:agg was cut off: the connection was closed mid-reply after 13")
    assert result.text == "one two three"
    assert result.new_messages == [{"role": "assistant", "content": "one two three"}]


def test_cancel_during_fanout_skips_pending_references_and_the_aggregator(wire_config, llm_server):
    config = wire_config("max_workers: 1")
    llm_server.script("ref-a", Reply(text="slow", delay=5))
    cancel = CancelToken()
    events = []
    facade = MoAChatCompletions("wire", config=config, observer=events.append)

    def cancel_once_ref_a_waits() -> None:  # ref-a's request is out and the server holds its reply back
        llm_server.wait_for_request("ref-a").stalled.wait(5)
        cancel.cancel()

    threading.Thread(target=cancel_once_ref_a_waits, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        facade.create(messages=QUESTION, cancel=cancel)
    assert time.monotonic() - started < 1.5  # not the 5 s ref-a's reply waits
    statuses = {e.label: e.status for e in events if isinstance(e, ReferenceFinished)}
    assert statuses == {"wire:ref-a": "cancelled", "wire:ref-b": "cancelled", "wire:ref-c": "cancelled"}
    # Cancelled before they started: no request of theirs reached the server (the one worker stays on ref-a's
    # unanswered request, abandoned to its daemon thread, so a late start could only come after its 5 s).
    assert not llm_server.requests_for("ref-b") and not llm_server.requests_for("agg")


def test_cancel_closes_the_aggregator_stream_at_once(wire_config, llm_server):
    config = wire_config()
    words = " ".join(f"w{i}" for i in range(200))
    llm_server.script("agg", Reply(text=words, piece_delay=0.05))
    cancel = CancelToken()
    deltas = []

    def observer(event):
        if type(event).__name__ == "ReplyDelta":
            deltas.append(event.text)
            if len(deltas) == 5:
                threading.Timer(0.01, cancel.cancel).start()

    started = time.monotonic()
    result = tool_loop(config, observer=observer, cancel=cancel).run(QUESTION)
    assert result.status == "cancelled"
    assert time.monotonic() - started < 2
    assert result.text.startswith("w0 w1 w2 w3 w4")
    assert result.new_messages[-1]["content"] == result.text
    assert llm_server.requests_for("agg")[0].finished.wait(5)
    assert llm_server.requests_for("agg")[0].disconnected  # the server saw the client hang up


def test_guidance_is_reused_within_a_user_turn_and_rerun_per_iteration_when_asked(wire_config, llm_server):
    follow_up = [
        *QUESTION[1:],
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "file text"},
    ]
    config = wire_config()
    facade = MoAChatCompletions("wire", config=config)
    facade.create(messages=QUESTION[1:])
    facade.create(messages=follow_up)
    assert len(llm_server.requests_for("ref-a")) == 1
    guidance = llm_server.requests_for("agg")[1].body["messages"][-1]["content"]
    assert "written before the tool calls" in guidance

    config = wire_config("fanout: per_iteration")
    facade = MoAChatCompletions("wire", config=config)
    facade.create(messages=QUESTION[1:])
    facade.create(messages=follow_up)
    assert len(llm_server.requests_for("ref-a")) == 3


def test_unset_slot_values_stay_off_the_wire_and_set_ones_are_sent(wire_config, llm_server, home):
    from conftest import write_config
    from moa_chat.config import load_config

    config = load_config(
        write_config(
            home,
            f"""
        providers:
          wire: {{base_url: "{llm_server.base_url}", max_retries: 0}}
        moa:
          presets:
            tuned:
              reference_temperature: 0.2
              aggregator_temperature: 0.6
              reference_models:
                - {{provider: wire, model: ref-a, max_tokens: 77, extra_body: {{top_k: 5}}}}
                - {{provider: wire, model: ref-b, temperature: 1.1, reasoning_effort: low}}
              aggregator: {{provider: wire, model: agg}}
    """,
        )
    )
    MoAChatCompletions("tuned", config=config).create(messages=QUESTION)
    a = llm_server.requests_for("ref-a")[0].body
    b = llm_server.requests_for("ref-b")[0].body
    agg = llm_server.requests_for("agg")[0].body
    assert (a["temperature"], a["max_tokens"], a["top_k"]) == (0.2, 77, 5) and "reasoning_effort" not in a
    assert (b["temperature"], b["reasoning_effort"]) == (1.1, "low") and "max_tokens" not in b
    assert agg["temperature"] == 0.6 and "max_tokens" not in agg and "stream" not in agg


def test_cancel_is_prompt_even_while_the_stream_is_silent(wire_config, llm_server):
    """A blocked read on a quiet stream must end at once: closing alone would wait for the next byte."""
    config = wire_config()
    llm_server.script("agg", Reply(text="first words and then silence", pause_after=2, pause=30))
    cancel = CancelToken()
    got_text = threading.Event()
    shown = []

    def observer(event):
        if type(event).__name__ == "ReplyDelta":
            shown.append(event.text)
            if "".join(shown) == "first words":
                got_text.set()

    turn = tool_loop(config, observer=observer, cancel=cancel)
    box = {}
    worker = threading.Thread(target=lambda: box.setdefault("result", turn.run(QUESTION)))
    worker.start()
    # All the text before the silence has reached the turn and the server has gone quiet: what the client
    # does next is wait in a read for a byte that does not come for 30 s.
    assert got_text.wait(5)
    assert llm_server.wait_for_request("agg").stalled.wait(5)
    pressed = time.monotonic()
    cancel.cancel()
    worker.join(5)
    assert time.monotonic() - pressed < 0.5
    assert box["result"].status == "cancelled" and box["result"].text == "first words"


def test_reference_timeout_closes_a_silent_reference_stream(wire_config, llm_server):
    config = wire_config("reference_timeout: 0.4")
    llm_server.script("ref-a", Reply(text="starts then stalls forever", pause_after=1, pause=30))
    events = []
    started = time.monotonic()
    MoAChatCompletions("wire", config=config, observer=events.append).create(messages=QUESTION)
    assert time.monotonic() - started < 2
    [finished] = [e for e in events if isinstance(e, ReferenceFinished) and e.label == "wire:ref-a"]
    assert finished.status == "timeout"
    assert llm_server.requests_for("ref-a")[0].finished.wait(5)
    assert llm_server.requests_for("ref-a")[0].disconnected


def test_cancel_is_prompt_while_the_aggregator_waits_for_its_first_byte(wire_config, llm_server):
    """A reasoning model can take a minute to send headers; Esc must not wait for them, nor must exit."""
    config = wire_config()
    llm_server.script("agg", Reply(text="too late", delay=30))
    cancel = CancelToken()
    started = threading.Event()

    def observer(event):
        if type(event).__name__ == "AggregatorStarted":
            started.set()

    box = {}
    worker = threading.Thread(
        target=lambda: box.setdefault("result", tool_loop(config, observer=observer, cancel=cancel).run(QUESTION))
    )
    worker.start()
    assert started.wait(5)
    assert llm_server.wait_for_request("agg").stalled.wait(5)  # the request is out, no byte back yet
    pressed = time.monotonic()
    cancel.cancel()
    worker.join(5)
    assert time.monotonic() - pressed < 0.5
    assert box["result"].status == "cancelled"
    # What still waits on the provider is a daemon thread: it cannot hold up the process's exit.
    assert all(t.daemon for t in threading.enumerate() if t.name.startswith("moa-"))
