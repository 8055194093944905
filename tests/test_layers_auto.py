"""`layers: auto` over real HTTP: after each layer the references' agreement decides between aggregating
now and another layer, up to `max_layers`; the judge's call is paid for like any other, and the turn's
result, the store and `ask --json` say how many layers ran and why."""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import pytest
from conftest import WIRE_CONFIG, write_config
from loop_helpers import tool_loop
from moa_chat.config import ConfigError, load_config
from moa_chat.engine import AgreementChecked, Cancelled, CancelToken, LayersDecided, ReferenceFinished
from moa_chat.engine.agreement import parse_verdict
from moa_chat.engine.cost import estimate_turn
from moa_chat.moa import MoAChatCompletions
from moa_chat.prompts import AGREEMENT_HEADER
from moa_chat.providers.loopback_server import Reply
from moa_chat.session import ChatSession
from moa_chat.store import SessionStore
from test_cli import run

QUESTION = [{"role": "user", "content": "What is 6 times 7?"}]
AUTO = "layers: auto\nmax_layers: 3"
PRICING = "pricing:\n  wire:agg: {input: 1.0, output: 1.0}\n  wire:judge: {input: 2.0, output: 2.0}\n"


def judged_by(verdicts: list[str], reply: str = "The answer is 42.") -> Any:
    """A model that answers its non-streamed requests (the agreement checks) with `verdicts` in turn, the
    last repeating, and its streamed ones (the aggregator's reply) with `reply`."""
    asked: list[int] = []

    def respond(body: dict[str, Any]) -> Reply:
        if body.get("stream"):
            return Reply(text=reply)
        asked.append(1)
        return Reply(
            text=verdicts[min(len(asked), len(verdicts)) - 1], usage={"prompt_tokens": 90, "completion_tokens": 1}
        )

    return respond


def checks(llm_server, model: str = "agg") -> list:
    return [r for r in llm_server.requests_for(model) if not r.body.get("stream")]


def answer_of(text: str) -> str | None:
    found = re.search(r"answer is (\d+)", text)
    return found.group(1) if found else None


# --------------------------------------------------------------------------- the judge


def test_references_that_agree_after_layer_one_are_aggregated_at_once(wire_config, llm_server):
    config = wire_config(AUTO)
    llm_server.script("agg", judged_by(["AGREE"]))
    events: list = []
    result = tool_loop(config, observer=events.append).run(QUESTION)
    assert result.status == "ok" and result.text == "The answer is 42."
    assert result.layers_run == 1 and result.layers_reason == "references agreed"
    assert all(len(llm_server.requests_for(m)) == 1 for m in ("ref-a", "ref-b", "ref-c"))
    [check] = checks(llm_server)
    prompt = check.messages[-1]["content"]
    assert AGREEMENT_HEADER in prompt and "What is 6 times 7?" in prompt and "ok from ref-b" in prompt
    assert "AGREE or DISAGREE" in check.messages[0]["content"]
    # The judge's call is a call of the turn: in the ledger, with its tokens.
    [judge] = [r for r in result.ledger.records if r.role == "agreement"]
    assert judge.label == "wire:agg" and judge.status == "ok" and judge.layer == 1
    assert judge.usage is not None and judge.usage.total_tokens == 91
    assert result.usage.total_tokens >= 91 + result.ledger.usage("aggregator").total_tokens
    [checked] = [e for e in events if isinstance(e, AgreementChecked)]
    assert checked.layer == 1 and checked.agreed and checked.text == "AGREE"
    [decided] = [e for e in events if isinstance(e, LayersDecided)]
    assert decided.line == "1 of 3 layers: references agreed"
    assert {e.record.layer for e in events if isinstance(e, ReferenceFinished)} == {1}


def test_references_that_keep_disagreeing_run_to_max_layers(wire_config, llm_server):
    config = wire_config(AUTO)
    llm_server.script("agg", judged_by(["DISAGREE"]))
    events: list = []
    result = tool_loop(config, observer=events.append).run(QUESTION)
    assert result.status == "ok"
    assert result.layers_run == 3 and result.layers_reason == "no agreement by max_layers"
    assert all(len(llm_server.requests_for(m)) == 3 for m in ("ref-a", "ref-b", "ref-c"))
    # A check after layers 1 and 2; none after the last, which is aggregated whatever it says.
    assert len(checks(llm_server)) == 2
    assert [(e.layer, e.agreed) for e in events if isinstance(e, AgreementChecked)] == [(1, False), (2, False)]
    assert [r.layer for r in result.ledger.records if r.role == "agreement"] == [1, 2]
    assert [r.record.layer for r in result.references][-3:] == [3, 3, 3]


def test_agreement_on_the_second_layer_stops_there(wire_config, llm_server):
    config = wire_config(AUTO)
    llm_server.script("agg", judged_by(["DISAGREE", "**Agree.**"]))
    result = tool_loop(config).run(QUESTION)
    assert result.layers_run == 2 and result.layers_reason == "references agreed"
    assert len(llm_server.requests_for("ref-a")) == 2


def test_a_named_model_judges_and_its_cost_is_the_turns(home, llm_server):
    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="      layers: auto\n      agreement: wire:judge")
    config = load_config(write_config(home, text + PRICING))
    llm_server.script("judge", judged_by(["AGREE"]))
    result = tool_loop(config).run(QUESTION)
    assert result.layers_run == 1
    assert len(checks(llm_server, "judge")) == 1 and not checks(llm_server, "agg")
    assert result.ledger.cost("agreement") == pytest.approx(91 * 2.0 / 1e6)
    assert result.ledger.as_json()["agreement_cost"] == pytest.approx(91 * 2.0 / 1e6)
    assert config.preset("wire").layers == 3  # max_layers' default


def test_an_unclear_or_failed_judgement_runs_another_layer(wire_config, llm_server):
    config = wire_config("layers: auto\nmax_layers: 2")
    llm_server.script("agg", judged_by(["I cannot tell."]))
    events: list = []
    result = tool_loop(config, observer=events.append).run(QUESTION)
    assert result.status == "ok" and result.layers_run == 2
    [checked] = [e for e in events if isinstance(e, AgreementChecked)]
    assert checked.reason == "wire:agg gave no clear verdict"

    def failing(body: dict[str, Any]) -> Reply:
        return Reply(text="fine") if body.get("stream") else Reply(status=400, error="no such thing")

    llm_server.script("agg", failing)
    events.clear()
    result = tool_loop(config, observer=events.append).run(QUESTION)
    assert result.status == "ok" and result.text == "fine" and result.layers_run == 2
    [checked] = [e for e in events if isinstance(e, AgreementChecked)]
    assert checked.reason.startswith("the agreement check failed") and checked.record.status == "failed"
    assert [r.status for r in result.ledger.records if r.role == "agreement"] == ["failed"]


def test_a_cancel_during_the_judgement_ends_the_turn_with_no_reply(wire_config, llm_server):
    config = wire_config(AUTO)

    def slow(body: dict[str, Any]) -> Reply:
        return Reply(text="never shown") if body.get("stream") else Reply(text="AGREE", delay=30)

    llm_server.script("agg", slow)
    cancel = CancelToken()
    turn = tool_loop(config, cancel=cancel)
    box: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: box.setdefault("result", turn.run(QUESTION)))
    worker.start()
    assert llm_server.wait_for_request("agg").stalled.wait(5)  # the judge's request is out, no answer yet
    cancel.cancel()
    worker.join(5)
    result = box["result"]
    assert result.status == "cancelled" and result.text == ""
    assert [bool(r.body.get("stream")) for r in llm_server.requests_for("agg")] == [False]  # no aggregator call
    assert [r.status for r in result.ledger.records if r.role == "agreement"] == ["cancelled"]


def test_a_quorum_still_applies_to_each_layer(wire_config, llm_server):
    config = wire_config(f"{AUTO}\nquorum: 2")
    llm_server.script("ref-c", Reply(text="slow", delay=30))
    llm_server.script("agg", judged_by(["AGREE"]))
    result = tool_loop(config).run(QUESTION)
    assert result.layers_run == 1
    assert [r.status for r in result.references] == ["ok", "ok", "late"]
    # The judge read the two answers that came in, not the one not waited for.
    prompt = checks(llm_server)[0].messages[-1]["content"]
    assert "## Answer 2" in prompt and "## Answer 3" not in prompt


# --------------------------------------------------------------------------- an answer extractor


def test_an_extractor_compares_the_answers_and_no_judge_is_asked(wire_config, llm_server):
    config = wire_config(AUTO)
    for model in ("ref-a", "ref-b", "ref-c"):
        llm_server.script(model, Reply(text=f"{model}: the answer is 42"))
    events: list = []
    result = tool_loop(config, observer=events.append, answer_extractor=answer_of).run(QUESTION)
    assert result.layers_run == 1 and result.layers_reason == "references agreed (same answer)"
    assert not checks(llm_server)
    assert not [r for r in result.ledger.records if r.role == "agreement"]
    [checked] = [e for e in events if isinstance(e, AgreementChecked)]
    assert checked.agreed and checked.record is None


def test_an_extractor_runs_another_layer_while_the_answers_differ_or_are_missing(wire_config, llm_server):
    config = wire_config(AUTO)
    llm_server.script("ref-a", [Reply(text="the answer is 41"), Reply(text="the answer is 42")])
    llm_server.script("ref-b", [Reply(text="no idea"), Reply(text="the answer is 42")])
    llm_server.script("ref-c", Reply(text="the answer is 42"))
    events: list = []
    result = tool_loop(config, observer=events.append, answer_extractor=answer_of).run(QUESTION)
    assert result.layers_run == 2
    reasons = [e.reason for e in events if isinstance(e, AgreementChecked)]
    assert reasons == ["1 of 3 answers state no answer", "references agreed (same answer)"]
    assert not checks(llm_server)


def test_a_chat_session_passes_its_extractor_to_the_turn(wire_config, llm_server):
    config = wire_config(AUTO)
    for model in ("ref-a", "ref-b", "ref-c"):
        llm_server.script(model, Reply(text="the answer is 7"))
    session = ChatSession(config, config.preset("wire"), answer_extractor=answer_of)
    result = session.send("What is 3 + 4?")
    assert result.layers_run == 1 and not checks(llm_server)


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("AGREE", True),
        ("agree.", True),
        ("**Agree**", True),
        ("They agree.", True),
        ("DISAGREE", False),
        ("Disagree - answer 2 says 41.", False),
        ("I do not agree", False),
        ("<think>maybe DISAGREE? no.</think>\nAGREE", True),
        ("", None),
        ("AGREE or DISAGREE", None),
        ("Unsure.", None),
    ],
)
def test_a_verdict_is_read_however_the_judge_dresses_it(text, verdict):
    assert parse_verdict(text) is verdict


# --------------------------------------------------------------------------- what is kept and shown


def test_the_stored_turn_says_how_many_layers_ran_and_why(home, wire_config, llm_server):
    config = wire_config(AUTO)
    llm_server.script("agg", judged_by(["DISAGREE", "AGREE"]))
    store = SessionStore(home / "sessions.db")
    session = ChatSession(config, config.preset("wire"), store=store)
    session.send("What is 6 times 7?")
    [turn] = store.turns(session.id)
    assert turn.layers_run == 2 and turn.layers_reason == "references agreed"
    judged = [c for c in turn.calls if c.record.role == "agreement"]
    assert [(c.record.layer, c.text) for c in judged] == [(1, "DISAGREE"), (2, "AGREE")]
    assert turn.preset_json["auto_layers"] is True and turn.preset_json["layers"] == 3
    # A fixed preset's turn records its layers, with no reason.
    plain = wire_config()
    session = ChatSession(plain, plain.preset("wire"), store=store)
    session.send("again")
    [turn] = store.turns(session.id)
    assert turn.layers_run == 1 and turn.layers_reason is None


def test_a_regeneration_reuses_the_stored_layers_and_checks_nothing(home, wire_config, llm_server):
    config = wire_config(AUTO)
    llm_server.script("agg", judged_by(["DISAGREE", "AGREE"]))
    session = ChatSession(config, config.preset("wire"), store=SessionStore(home / "sessions.db"))
    session.send("What is 6 times 7?")
    asked = len(llm_server.requests)
    events: list = []
    result = session.rerun(aggregator_only=True, observer=events.append)
    assert result.status == "ok" and result.layers_run == 2 and result.layers_reason == "the stored answers"
    assert [r.model for r in llm_server.requests[asked:]] == ["agg"]  # the aggregator alone, no check
    assert [e.line for e in events if isinstance(e, LayersDecided)] == ["2 of 3 layers: the stored answers"]


def test_ask_prints_the_decision_and_json_reports_it(home, llm_server):
    write_config(home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra="      layers: auto"))
    llm_server.script("agg", judged_by(["DISAGREE", "AGREE"]))
    result = run("ask", "What is 6 times 7?")
    assert result.returncode == 0, result.stderr
    assert "preset wire — up to 9 references in 3 layers → wire:agg" in result.stderr
    assert "≟ layer 1: references disagree, layer 2 next (wire:agg" in result.stderr
    assert "≟ layer 2: references agreed, aggregating now" in result.stderr
    assert "≡ 2 of 3 layers: references agreed" in result.stderr
    assert result.stdout == "The answer is 42.\n"
    llm_server.script("agg", judged_by(["DISAGREE", "AGREE"]))
    result = run("ask", "What is 6 times 7?", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["layers_run"] == 2 and data["layers_reason"] == "references agreed"
    assert [c["role"] for c in data["usage"]["calls"]].count("agreement") == 2


def test_the_estimate_counts_every_layer_and_check(home, llm_server):
    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="      layers: auto\n      agreement: wire:judge")
    config = load_config(write_config(home, text + PRICING))
    preset = config.preset("wire")
    estimate = estimate_turn(config, preset, QUESTION)
    assert estimate.dollars > 0 and "wire:judge" not in estimate.unpriced
    assert set(estimate.unpriced) == {"wire:ref-a", "wire:ref-b", "wire:ref-c"}


# --------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("extra", "line", "message"),
    [
        ("max_layers: 3", 20, "max_layers applies only with layers: auto"),
        ("layers: 2\nagreement: wire:agg", 21, "agreement applies only with layers: auto"),
        ("layers: sometimes", 20, "layers must be a whole number >= 1 (at most 16) or auto, not 'sometimes'"),
        ("layers: auto\nmax_layers: 1", 21, "max_layers must be a whole number >= 2 (at most 16)"),
        ("layers: auto\nmax_layers: 17", 21, "max_layers must be a whole number >= 2 (at most 16)"),
        ("layers: auto\nagreement: judge", 21, "agreement must be provider:model"),
        ("layers: auto\nagreement: 5", 21, "agreement must be provider:model or a mapping"),
        ("layers: auto\nagreement: {provider: wire}", 21, "agreement is incomplete: it needs model:"),
    ],
)
def test_auto_layer_settings_are_checked_with_their_line(wire_config, extra, line, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        wire_config(extra)
    assert caught.value.line == line


def test_auto_layers_need_two_answers_to_compare(home, llm_server):
    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="      layers: auto")
    text = text.replace("        - provider: wire\n          model: ref-b\n", "").replace(
        "        - provider: wire\n          model: ref-c\n", ""
    )
    with pytest.raises(ConfigError, match="layers: auto needs at least two references"):
        load_config(write_config(home, text))
    # Two samples of one model are two answers.
    text = text.replace("          model: ref-a\n", "          model: ref-a\n          samples: 2\n")
    assert load_config(write_config(home, text)).preset("wire").auto_layers


def test_an_agreement_model_on_an_unknown_provider_is_named_with_its_line(home, llm_server):
    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="      layers: auto\n      agreement: nowhere:judge")
    config = load_config(write_config(home, text))
    problem = config.problems["wire"]
    assert "agreement: unknown provider 'nowhere'" in str(problem) and problem.line == 21
    assert "nowhere" in config.preset("wire").providers


# --------------------------------------------------------------------------- the seed's facade


def streamed_text(stream: Any) -> str:
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


def test_the_facades_own_observer_and_cancel_reach_the_judge(wire_config, llm_server):
    """A `create()` that brings its own observer and cancel token gets a turn environment of its own: the
    agreement check hears both, as the references and the aggregator do, in every call, not only the first."""
    config = wire_config(AUTO)
    llm_server.script("agg", judged_by(["AGREE"]))
    facade = MoAChatCompletions("wire", config=config)
    for _ in range(2):
        events: list[object] = []
        stream = facade.create(messages=QUESTION, stream=True, observer=events.append, cancel=CancelToken())
        assert streamed_text(stream) == "The answer is 42."
        (checked,) = [e for e in events if isinstance(e, AgreementChecked)]
        assert checked.agreed and checked.record is not None and checked.record.role == "agreement"

    judging = threading.Event()

    def slow(body: dict[str, Any]) -> Reply:
        if body.get("stream"):
            return Reply(text="never shown")
        judging.set()
        return Reply(text="AGREE", delay=30)

    llm_server.script("agg", slow)
    cancel, box, events = CancelToken(), {}, []

    def create() -> None:
        try:
            facade.create(messages=[{"role": "user", "content": "Again?"}], observer=events.append, cancel=cancel)
        except Cancelled as exc:
            box["cancelled"] = exc

    worker = threading.Thread(target=create)
    worker.start()
    assert judging.wait(10)  # the judge's request is out, its answer 30 s away
    cancel.cancel()
    worker.join(10)
    assert not worker.is_alive() and "cancelled" in box
    (checked,) = [e for e in events if isinstance(e, AgreementChecked)]
    assert checked.reason == "cancelled" and checked.record is not None and checked.record.status == "cancelled"
