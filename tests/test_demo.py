"""The offline demo provider: deterministic, clearly simulated, drawing on its references."""

from __future__ import annotations

from moa_chat.config import load_config
from moa_chat.llm.stream import StreamAssembler
from moa_chat.moa import MoAChatCompletions
from moa_chat.providers import demo

PROMPT = [{"role": "user", "content": "How should I structure a SQLite schema for chat sessions?"}]


def test_references_give_distinct_takes_derived_from_the_prompt():
    takes = [demo.reference_take(p.model, PROMPT[0]["content"]) for p in demo.PERSONAS]
    assert len(set(takes)) == 3
    assert all("sqlite" in t.lower() for t in takes)
    assert takes == [demo.reference_take(p.model, PROMPT[0]["content"]) for p in demo.PERSONAS]  # deterministic


def test_delays_are_realistic_and_distinct_unless_paced_to_zero(monkeypatch):
    monkeypatch.setenv(demo.PACE_ENV, "1")
    replies = [demo.respond({"model": p.model, "messages": PROMPT}) for p in demo.PERSONAS]
    assert len({r.delay for r in replies}) == 3 and all(0.2 < r.delay < 2 for r in replies)
    aggregator = demo.respond({"model": demo.AGGREGATOR.model, "messages": PROMPT})
    tokens_per_second = 1 / aggregator.piece_delay
    assert 20 <= tokens_per_second <= 80
    monkeypatch.setenv(demo.PACE_ENV, "0")
    assert demo.respond({"model": demo.AGGREGATOR.model, "messages": PROMPT}).piece_delay == 0


def test_demo_turn_synthesises_its_references_with_markdown(home):
    facade = MoAChatCompletions("demo", config=load_config())
    assembler = StreamAssembler()
    for chunk in facade.create(messages=PROMPT, stream=True):
        assembler.feed(chunk)
    text = assembler.text
    assert text.startswith("*Simulated reply")
    assert "1. **Frame it**" in text and "3. **Ship small**" in text
    assert "```python" in text
    for result in facade.last_references:
        assert result.status == "ok"
        first_sentence = result.text.split("** ", 1)[1].split(". ")[0]
        assert first_sentence in text  # visibly draws on each reference
    assert all("simulated" in r.label for r in facade.last_references)


def test_unknown_demo_model_is_a_clear_404():
    reply = demo.respond({"model": "gpt-4", "messages": PROMPT})
    assert reply.status == 404 and "simulated-analyst" in reply.error
