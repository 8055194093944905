"""MoA strategies over real HTTP (issue 13): layers, Self-MoA samples, quorum and deadline, shuffle and
anonymous labels, and a solo turn."""

from __future__ import annotations

import random

import pytest
from conftest import WIRE_CONFIG, write_config
from moa_chat.config import ConfigError, load_config
from moa_chat.engine import ReferenceFinished, ReferenceQueued
from moa_chat.engine.panel import panel
from moa_chat.prompts import LAYER_HEADER
from moa_chat.providers.loopback_server import Reply
from moa_chat.session import ChatSession, Turn
from moa_chat.store import SessionStore

QUESTION = [{"role": "user", "content": "How do I reverse a list in Python?"}]


@pytest.fixture
def preset_config(home, llm_server):
    def make(extra: str):
        text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra=extra)
        return load_config(write_config(home, text))

    return make


def guidance(llm_server) -> str:
    return llm_server.requests_for("agg")[-1].messages[-1]["content"]


# --------------------------------------------------------------------------- layers


def test_layer_two_references_read_layer_ones_answers_and_the_aggregator_reads_the_last(preset_config, llm_server):
    config = preset_config("      layers: 2")
    answers = {"ref-a": "alpha says reversed()", "ref-b": "beta says [::-1]", "ref-c": "gamma says .reverse()"}
    for model, text in answers.items():
        llm_server.script(model, [Reply(text=text), Reply(text=f"second layer of {model}")])
    events: list = []
    result = Turn(config, config.preset("wire"), observer=events.append).run(QUESTION)
    assert result.status == "ok"
    for model in answers:
        first, second = llm_server.requests_for(model)
        assert LAYER_HEADER not in str(first.messages)
        earlier = second.messages[-1]["content"]
        assert earlier.startswith("How do I reverse a list in Python?")
        assert LAYER_HEADER in earlier and "evaluate them critically" in earlier
        assert all(text in earlier for text in answers.values())
    shown = guidance(llm_server)
    assert "second layer of ref-a" in shown and "alpha says" not in shown
    assert [(r.record.layer, r.index) for r in result.references] == [(1, 0), (1, 1), (1, 2), (2, 3), (2, 4), (2, 5)]
    assert [e.layer for e in events if isinstance(e, ReferenceQueued)] == [1, 1, 1, 2, 2, 2]


# --------------------------------------------------------------------------- samples


def test_samples_ask_one_model_several_times_with_a_temperature_spread(preset_config, llm_server):
    config = preset_config("")
    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="").replace(
        "        - provider: wire\n          model: ref-a\n",
        "        - provider: wire\n          model: ref-a\n          samples: 3\n",
    )
    config = load_config(write_config(config.path.parent, text))
    seats = panel(config.preset("wire"))
    assert [s.label for s in seats[:3]] == ["wire:ref-a #1", "wire:ref-a #2", "wire:ref-a #3"]
    result = Turn(config, config.preset("wire")).run(QUESTION)
    requests = llm_server.requests_for("ref-a")
    assert len(requests) == 3
    assert sorted(r.body["temperature"] for r in requests) == [0.4, 0.7, 1.0]
    assert [r.label for r in result.references][:3] == ["wire:ref-a #1", "wire:ref-a #2", "wire:ref-a #3"]
    assert "Reference 3 — wire:ref-a #3" in guidance(llm_server)


def test_a_set_temperature_is_kept_for_every_sample(preset_config, llm_server):
    config = preset_config("      reference_temperature: 0.2")
    text = config.path.read_text().replace("          model: ref-a\n", "          model: ref-a\n          samples: 2\n")
    config = load_config(write_config(config.path.parent, text))
    Turn(config, config.preset("wire")).run(QUESTION)
    assert [r.body["temperature"] for r in llm_server.requests_for("ref-a")] == [0.2, 0.2]


# --------------------------------------------------------------------------- quorum and deadline


def test_a_quorum_starts_the_aggregator_early_and_closes_the_slow_reference(preset_config, llm_server):
    config = preset_config("      quorum: 2")
    llm_server.script("ref-c", Reply(text="very slow", delay=30))
    result = Turn(config, config.preset("wire")).run(QUESTION)
    statuses = {r.label: (r.status, r.error) for r in result.references}
    assert statuses["wire:ref-c"] == ("late", "not waited for: 2 answered, the quorum is 2")
    aggregator = llm_server.requests_for("agg")[0]
    slow = llm_server.requests_for("ref-c")[0]
    # Server timestamps: the aggregator was asked while the slow reference was still being waited on.
    assert aggregator.received_at < slow.received_at + 30
    assert "wire:ref-c (not waited for)" in guidance(llm_server)
    slow_finished = slow.finished_at or 0
    assert slow.disconnected or slow_finished < slow.received_at + 30  # its stream was closed


def test_a_deadline_starts_the_aggregator_once_one_has_answered(preset_config, llm_server):
    config = preset_config("      deadline: 0.5")
    llm_server.script("ref-b", Reply(text="slow", delay=30))
    llm_server.script("ref-c", Reply(text="slower", delay=30))
    result = Turn(config, config.preset("wire")).run(QUESTION)
    assert [r.status for r in result.references] == ["ok", "late", "late"]
    assert result.references[1].error == "not waited for: the deadline of 0.5s passed"


def test_a_deadline_waits_for_the_first_answer_when_none_is_in(preset_config, llm_server):
    config = preset_config("      deadline: 0.2")
    for model in ("ref-a", "ref-b"):
        llm_server.script(model, Reply(text="slow", delay=30))
    llm_server.script("ref-c", Reply(text="in the end", delay=0.8))
    result = Turn(config, config.preset("wire")).run(QUESTION)
    assert [r.status for r in result.references] == ["late", "late", "ok"]


# --------------------------------------------------------------------------- position bias


def test_shuffle_changes_the_order_and_the_order_is_stored(preset_config, llm_server, home):
    config = preset_config("      shuffle: true")
    session = ChatSession(config, config.preset("wire"), store=SessionStore())
    orders = set()
    for n in range(6):
        result = session.send(f"question {n}")
        assert sorted(result.reference_order) == [0, 1, 2]
        text = guidance(llm_server)
        shown = [text.index(f"ok from ref-{c}") for c in "abc"]
        expected = [sorted(shown).index(p) for p in shown]  # where each reference appeared
        assert [result.reference_order.index(i) for i in range(3)] == expected
        orders.add(tuple(result.reference_order))
    assert len(orders) > 1  # six turns, one order each: not all the same (1 in 6**5 chance otherwise)
    stored = [t.reference_order for t in SessionStore().turns(session.id)]
    assert all(order is not None and sorted(order) == [0, 1, 2] for order in stored)


def test_shuffle_is_reproducible_with_a_seeded_random(preset_config, llm_server):
    config = preset_config("      shuffle: true")
    first = Turn(config, config.preset("wire"), rng=random.Random(7)).run(QUESTION).reference_order
    second = Turn(config, config.preset("wire"), rng=random.Random(7)).run(QUESTION).reference_order
    assert first == second


def test_anonymous_labels_hide_the_model_names(preset_config, llm_server):
    config = preset_config("      anonymous: true")
    Turn(config, config.preset("wire")).run(QUESTION)
    text = guidance(llm_server)
    assert "### Reference 1\n" in text and "wire:ref-a" not in text


# --------------------------------------------------------------------------- solo


def test_solo_sends_no_reference_request_and_no_guidance(preset_config, llm_server, home):
    config = preset_config("")
    session = ChatSession(config, config.preset("wire"), store=SessionStore())
    result = session.send("quick one", solo=True)
    assert result.status == "ok" and result.solo and result.references == ()
    assert not any(r.model.startswith("ref-") for r in llm_server.requests)
    assert llm_server.requests_for("agg")[0].messages == [{"role": "user", "content": "quick one"}]
    assert SessionStore().turns(session.id)[0].solo


def test_ask_solo(preset_config, llm_server, capsys):
    from moa_chat.cli import main

    preset_config("")
    assert main(["ask", "--no-save", "--solo", "hi"]) == 0
    assert "solo, no references" in capsys.readouterr().err
    assert {r.model for r in llm_server.requests} == {"agg"}


# --------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("      layers: 0", "layers must be a whole number >= 1"),
        ("      quorum: two", "quorum must be a whole number >= 1"),
        ("      deadline: -1", "deadline must be a number >= 0.001"),
        ("      shuffle: sometimes", "shuffle must be true or false"),
    ],
)
def test_strategy_settings_are_checked_with_their_line(preset_config, extra, message):
    with pytest.raises(ConfigError, match=message):
        preset_config(extra)


def test_reference_finished_events_carry_their_layer(preset_config, llm_server):
    config = preset_config("      layers: 2")
    events: list = []
    Turn(config, config.preset("wire"), observer=events.append).run(QUESTION)
    assert sorted({e.record.layer for e in events if isinstance(e, ReferenceFinished)}) == [1, 2]
