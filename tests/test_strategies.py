"""MoA strategies over real HTTP (issue 13): layers, Self-MoA samples, quorum and deadline, shuffle and
anonymous labels, and a solo turn."""

from __future__ import annotations

import random

import pytest
from conftest import WIRE_CONFIG, write_config
from loop_helpers import tool_loop
from moa_chat.config import ConfigError, load_config
from moa_chat.engine import ReferenceFinished, ReferenceQueued
from moa_chat.engine.panel import panel
from moa_chat.prompts import LAYER_HEADER
from moa_chat.providers.loopback_server import Reply
from moa_chat.session import ChatSession
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
    result = tool_loop(config, observer=events.append).run(QUESTION)
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
    result = tool_loop(config).run(QUESTION)
    requests = llm_server.requests_for("ref-a")
    assert len(requests) == 3
    assert sorted(r.body["temperature"] for r in requests) == [0.4, 0.7, 1.0]
    assert [r.label for r in result.references][:3] == ["wire:ref-a #1", "wire:ref-a #2", "wire:ref-a #3"]
    assert "Reference 3 — wire:ref-a #3" in guidance(llm_server)


def test_a_set_temperature_is_kept_for_every_sample(preset_config, llm_server):
    config = preset_config("      reference_temperature: 0.2")
    text = config.path.read_text().replace("          model: ref-a\n", "          model: ref-a\n          samples: 2\n")
    config = load_config(write_config(config.path.parent, text))
    tool_loop(config).run(QUESTION)
    assert [r.body["temperature"] for r in llm_server.requests_for("ref-a")] == [0.2, 0.2]


# --------------------------------------------------------------------------- quorum and deadline


def test_a_quorum_starts_the_aggregator_early_and_closes_the_slow_reference(preset_config, llm_server):
    config = preset_config("      quorum: 2")
    llm_server.script("ref-c", Reply(text="very slow", delay=30))
    result = tool_loop(config).run(QUESTION)
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
    result = tool_loop(config).run(QUESTION)
    assert [r.status for r in result.references] == ["ok", "late", "late"]
    assert result.references[1].error == "not waited for: the deadline of 0.5s passed"


def test_a_deadline_waits_for_the_first_answer_when_none_is_in(preset_config, llm_server):
    config = preset_config("      deadline: 0.2")
    for model in ("ref-a", "ref-b"):
        llm_server.script(model, Reply(text="slow", delay=30))
    llm_server.script("ref-c", Reply(text="in the end", delay=0.8))
    result = tool_loop(config).run(QUESTION)
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
    first = tool_loop(config, rng=random.Random(7)).run(QUESTION).reference_order
    second = tool_loop(config, rng=random.Random(7)).run(QUESTION).reference_order
    assert first == second


def test_anonymous_labels_hide_the_model_names(preset_config, llm_server):
    config = preset_config("      anonymous: true")
    tool_loop(config).run(QUESTION)
    text = guidance(llm_server)
    assert "[Reference 1]\n" in text and "wire:ref-a" not in text


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
    tool_loop(config, observer=events.append).run(QUESTION)
    assert sorted({e.record.layer for e in events if isinstance(e, ReferenceFinished)}) == [1, 2]


# --------------------------------------------------------------------------- cost


def test_a_calls_cost_is_its_tokens_times_the_configured_price(home, llm_server):
    from moa_chat.config.pricing import Price

    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="")
    text += "pricing:\n  wire:agg: {input: 2.0, output: 8.0}\n  wire:ref-a: {input: 1.0, output: 1.0}\n"
    config = load_config(write_config(home, text))
    assert config.price("wire:agg") == Price(2.0, 8.0)
    assert config.price("openai:gpt-4.1") == Price(2.0, 8.0)  # bundled
    assert config.price("demo:simulated-analyst") == Price(0.0, 0.0)  # served here: free
    assert config.price("wire:ref-b") is None
    llm_server.script("agg", Reply(text="answer", usage={"prompt_tokens": 1000, "completion_tokens": 500}))
    llm_server.script("ref-a", Reply(text="advice", usage={"prompt_tokens": 2000, "completion_tokens": 1000}))
    result = tool_loop(config).run(QUESTION)
    costs = {r.label: r.cost for r in result.ledger.records}
    assert costs["wire:agg"] == pytest.approx((1000 * 2.0 + 500 * 8.0) / 1e6)
    assert costs["wire:ref-a"] == pytest.approx(3000 / 1e6)
    assert costs["wire:ref-b"] is None  # no price: not guessed
    assert result.ledger.cost() == pytest.approx(0.006 + 0.003)
    assert not result.ledger.cost_complete()
    assert result.ledger.as_json()["cost"] == pytest.approx(0.009)


def test_a_providers_own_cost_wins_and_is_stored(home, llm_server):
    from moa_chat.store import SessionStore

    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="")
    config = load_config(write_config(home, text + "pricing:\n  wire:agg: {input: 100, output: 100}\n"))
    llm_server.script("agg", Reply(text="answer", usage={"prompt_tokens": 10, "completion_tokens": 5, "cost": 0.0042}))
    session = ChatSession(config, config.preset("wire"), store=SessionStore())
    result = session.send("hi")
    assert [r.cost for r in result.ledger.records if r.role == "aggregator"] == [0.0042]
    stored = SessionStore().turns(session.id)[0].calls
    assert [c.record.cost for c in stored if c.record.role == "aggregator"] == [0.0042]
    assert SessionStore().session(session.id).cost == pytest.approx(0.0042)


def test_max_cost_per_turn_refuses_in_ask_with_exit_2(home, llm_server, capsys):
    from moa_chat.cli import main

    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="      max_cost_per_turn: 0.01")
    load_config(write_config(home, text + "pricing:\n  wire:agg: {input: 10, output: 30}\n"))
    # The aggregator alone: ~3,160 tokens in (three 1,000-token answers and the prompt) at $10/M and 1,000
    # out at $30/M.
    assert main(["ask", "--no-save", "hello"]) == 2
    err = capsys.readouterr().err
    assert "not sent: this turn may cost up to $0.062" in err and "max_cost_per_turn of $0.010" in err
    assert "not counting wire:ref-a, wire:ref-b, wire:ref-c: no price" in err
    assert llm_server.requests == []


def test_the_estimate_grows_with_layers_samples_and_the_prompt():
    from moa_chat.config import Preset, Slot
    from moa_chat.config.model import Config
    from moa_chat.config.pricing import Price
    from moa_chat.engine.cost import estimate_turn

    config = Config(path=None, presets={}, providers={}, pricing={"p:m": Price(1.0, 1.0)})
    one = Preset("x", (Slot("p", "m", max_tokens=100),), Slot("p", "m", max_tokens=100))
    short = [{"role": "user", "content": "hi"}]
    long = [{"role": "user", "content": "x" * 40_000}]
    base = estimate_turn(config, one, short).dollars
    assert estimate_turn(config, one, long).dollars > base
    import dataclasses

    two_layers = dataclasses.replace(one, layers=2)
    three_samples = dataclasses.replace(one, reference_models=(Slot("p", "m", max_tokens=100, samples=3),))
    assert estimate_turn(config, two_layers, short).dollars > base
    assert estimate_turn(config, three_samples, short).dollars > base
    assert estimate_turn(config, one, short, solo=True).dollars < base


# --------------------------------------------------------------------------- in the chat


async def test_the_sidebar_groups_cards_by_layer_and_shows_samples_and_late_ones(preset_config, llm_server):
    from moa_chat.tui.widgets.sidebar import ReferenceSidebar
    from tui_helpers import make_app, run_turn

    config = preset_config("      layers: 2\n      quorum: 2")
    text = config.path.read_text().replace("          model: ref-a\n", "          model: ref-a\n          samples: 2\n")
    config = load_config(write_config(config.path.parent, text))
    llm_server.script("ref-c", Reply(text="slow", delay=30))
    app = make_app(config, "wire")
    async with app.run_test(size=(120, 40)) as pilot:
        sidebar = app.query_one(ReferenceSidebar)
        titles = [str(w.render()) for w in sidebar.query(".sidebar-title")]
        assert titles[:2] == ["Layer 1 · 4 references", "Layer 2 · 4 references"]
        assert [c.label for c in sidebar.cards()][:2] == ["wire:ref-a #1", "wire:ref-a #2"]
        await run_turn(pilot, "hello", timeout=30)
        statuses = [c.status for c in sidebar.cards()]
        assert statuses.count("late") >= 2 and "ok" in statuses
        late = next(c for c in sidebar.cards() if c.status == "late")
        assert "not waited for" in late.render().plain


async def test_ctrl_t_sends_a_solo_turn_and_the_log_marks_it(preset_config, llm_server):
    from moa_chat.tui.widgets.chat_log import NoticeLine
    from moa_chat.tui.widgets.prompt_input import PromptInput
    from moa_chat.tui.widgets.reply import AssistantReply
    from tui_helpers import make_app, wait_until

    config = preset_config("")
    app = make_app(config, "wire")
    async with app.run_test(size=(120, 36)) as pilot:
        app.query_one(PromptInput).load_text("quick one")
        await pilot.press("ctrl+t")
        await wait_until(pilot, lambda: app.query(AssistantReply) and app.query_one(AssistantReply).finished)
        assert not any(r.model.startswith("ref-") for r in llm_server.requests)
        assert any("solo" in str(n.render()) for n in app.query(NoticeLine))


async def test_a_turn_over_the_cost_limit_is_asked_about_in_the_chat(preset_config, llm_server):
    from moa_chat.tui.screens.confirm import ConfirmScreen
    from moa_chat.tui.widgets.prompt_input import PromptInput
    from moa_chat.tui.widgets.reply import AssistantReply
    from tui_helpers import make_app, send, wait_until

    config = preset_config("      max_cost_per_turn: 0.001")
    text = config.path.read_text() + "pricing:\n  wire:agg: {input: 10, output: 30}\n"
    config = load_config(write_config(config.path.parent, text))
    app = make_app(config, "wire")
    async with app.run_test(size=(120, 36)) as pilot:
        await send(pilot, "expensive question")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await wait_until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert llm_server.requests == [] and app.query_one(PromptInput).text == "expensive question"
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_until(pilot, lambda: app.query(AssistantReply) and app.query_one(AssistantReply).finished)
        assert llm_server.requests_for("agg")
