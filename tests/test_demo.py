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


def test_layers_auto_on_the_demo_runs_a_second_layer_that_agrees(home):
    # The preset docs/strategies.md gives to try `layers: auto` offline, run as it says.
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    from conftest import write_config

    page = (Path(__file__).parent.parent / "docs" / "strategies.md").read_text(encoding="utf-8")
    section = page.split("### Try it offline", 1)[1]
    write_config(home, re.search(r"```yaml\n(.*?)```", section, re.S).group(1))  # type: ignore[union-attr]
    command = re.search(r'`(moa-chat ask --preset demo-auto "[^"]+")`', section).group(1)  # type: ignore[union-attr]
    prompt = command.split('"')[1]
    env = dict(os.environ, MOA_CHAT_HOME=str(home), **{demo.PACE_ENV: "0"})
    done = subprocess.run(
        [sys.executable, "-m", "moa_chat", "ask", "--preset", "demo-auto", prompt],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "layer 1: references disagree, layer 2 next" in done.stderr
    assert "layer 2: references agreed, aggregating now" in done.stderr
    assert "2 of 3 layers: references agreed" in done.stderr
    assert "The panel agrees on **cache api responses**" in done.stdout


def test_the_demo_judge_agrees_only_on_a_later_layers_converged_answers():
    first_layer = [demo.reference_take(p.model, PROMPT[0]["content"]) for p in demo.PERSONAS]
    earlier = "\n\n".join(first_layer)
    later = [
        demo.reference_take(p.model, f"{PROMPT[0]['content']}\n\n{demo.LAYER_HEADER}\n\n{earlier}")
        for p in demo.PERSONAS
    ]
    assert all("sqlite" in take.lower() and demo.LAYER_HEADER not in take for take in later)

    def verdict(answers: list[str]) -> str:
        request = demo.AGREEMENT_HEADER + "".join(f"\n\n## Answer {n}\n\n{a}" for n, a in enumerate(answers, 1))
        reply = demo.respond({"model": demo.AGGREGATOR.model, "messages": [{"role": "user", "content": request}]})
        return reply.text

    assert verdict(first_layer) == "DISAGREE"
    assert verdict(later) == "AGREE"
    assert verdict(later[:1]) == "DISAGREE"  # one answer agrees with nothing


def test_the_demo_server_keeps_no_request_after_answering_it(monkeypatch):
    # Each request carries the whole conversation: kept, a long demo session would hold every one of them.
    import openai

    monkeypatch.setenv(demo.PACE_ENV, "0")
    provider = demo.DemoProvider()
    provider.start()
    try:
        client = openai.OpenAI(base_url=provider.base_url, api_key="unused", max_retries=0)
        for _ in range(3):
            reply = client.chat.completions.create(model=demo.PERSONAS[0].model, messages=PROMPT)  # type: ignore[arg-type]
            assert "sqlite" in (reply.choices[0].message.content or "").lower()
        assert provider._server.requests == []
    finally:
        provider.stop()
