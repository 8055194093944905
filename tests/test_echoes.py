"""moa-chat's markers, copied by a model into its reply, are taken out of what the user sees, what is kept and what
eval reads: the filter over a stream in any split, and a real turn whose aggregator echoes its guidance."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from loop_helpers import tool_loop
from moa_chat.engine import ReplyDelta
from moa_chat.engine.echoes import EchoFilter, without_echoes
from moa_chat.eval.checks import Choice
from moa_chat.prompts import GUIDANCE_END, GUIDANCE_HEADER, LAYER_HEADER, answer_heading, reference_heading
from moa_chat.providers.loopback_server import Reply

ECHOED = [
    GUIDANCE_HEADER,
    LAYER_HEADER,
    GUIDANCE_END,
    reference_heading(4, "local:smollm2 #1"),
    reference_heading(2, "wire:ref-b", " (stopped early: max_tokens reached)"),
    reference_heading(1, None),
    answer_heading(3, "openai:gpt-4.1"),
    "### Reference 4 — local:smollm2 #1",  # the Markdown form the guidance was once written in
    "  ### Answer 2 — ollama:llama3:8b  ",
    "### Reference 1",
]
KEPT = [
    "B) 42",
    "# A title",
    "### Reference implementation",
    "[link](https://example.com)",
    "[1] A footnote",
    "The answer is [Reference 1] in the docs.",  # a marker's words inside a sentence are the model's own
    "ANSWER: C",
    "    indented code",
    "",
]


@pytest.mark.parametrize("line", ECHOED)
def test_a_marker_line_is_removed_with_the_blank_lines_after_it(line: str) -> None:
    assert without_echoes(f"Before.\n{line}\nAfter.") == "Before.\nAfter."
    assert without_echoes(f"Before.\n\n{line}\n\n\nAfter.") == "Before.\n\nAfter."
    assert without_echoes(line) == ""


@pytest.mark.parametrize("line", KEPT)
def test_anything_else_is_kept_as_written(line: str) -> None:
    text = f"Before.\n{line}\nAfter."
    assert without_echoes(text) == text


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.sampled_from(ECHOED + KEPT + ["plain words", "more words here"]), min_size=1, max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=20),
)
def test_the_stream_shows_what_the_whole_text_keeps_however_it_is_split(lines: list[str], cuts: list[int]) -> None:
    text = "\n".join(lines)
    points = sorted({c for c in cuts if c < len(text)})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    echoes = EchoFilter()
    streamed = "".join(echoes.feed(piece) for piece in pieces) + echoes.finish()
    assert streamed == without_echoes(text)
    assert not any(marker in streamed.splitlines() for marker in ECHOED)


def test_a_held_line_that_is_no_marker_goes_out_as_soon_as_it_says_so() -> None:
    echoes = EchoFilter()
    assert echoes.feed("[Ref") == ""  # may still be "[Reference 1 — …]"
    assert echoes.feed("use this]") == "[Refuse this]"  # it is not: out at once, before its line ends
    assert echoes.feed(" and more") == " and more"


def test_a_turn_whose_aggregator_echoes_its_guidance_shows_and_keeps_none_of_it(wire_config: Any, llm_server) -> None:
    config = wire_config()
    for model in ("ref-a", "ref-b", "ref-c"):
        llm_server.script(model, Reply(text=f"{model} thinks C) 7"))
    echo = f"{GUIDANCE_HEADER}\n\n{reference_heading(1, 'wire:ref-a')}\n\nThe answer is 7.\n\nANSWER: C\n{GUIDANCE_END}"
    llm_server.script("agg", Reply(text=echo))
    events: list[object] = []
    result = tool_loop(config, observer=events.append).run([{"role": "user", "content": "Which is prime?"}])
    shown = "".join(e.text for e in events if isinstance(e, ReplyDelta))
    assert result.status == "ok"
    assert shown == result.text == "The answer is 7.\n\nANSWER: C\n"
    assert result.new_messages[-1]["content"] == result.text  # what the conversation keeps, and sends next turn
    assert result.echoes_removed == 3  # counted, so eval can say how often replies carry them
    guidance = llm_server.requests_for("agg")[-1].messages[-1]["content"]
    assert guidance.endswith(GUIDANCE_END) and reference_heading(1, "wire:ref-a") in guidance


def test_eval_reads_no_letter_from_an_echoed_marker() -> None:
    # A reply that is only echoed headings has no answer in it; the "A" of "Mixture-of-Agents" is not one.
    check = Choice(("4", "6", "7"), "C")
    reply = f"{GUIDANCE_HEADER}\n{reference_heading(1, 'local:smollm2 #1')}\nA"
    assert check.extract(without_echoes(reply)) == "A"  # the lone letter the model wrote is still read
    assert check.read(without_echoes(f"{GUIDANCE_HEADER}\n{reference_heading(2, 'x:y')}")).value is None


@pytest.mark.parametrize("retries", [0, 1])
def test_a_reply_of_nothing_but_markers_is_an_empty_answer(home: Any, llm_server, retries: int) -> None:
    """The aggregator copies only moa-chat's markers: nothing of it is an answer. It is asked again as an empty
    answer is; with no retry left, the turn fails saying so (it ended "ok" with an empty reply)."""
    from conftest import WIRE_CONFIG, write_config
    from moa_chat.config import load_config

    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="").replace(
        "max_retries: 0", f"max_retries: {retries}"
    )
    config = load_config(write_config(home, text))
    markers = f"{GUIDANCE_HEADER}\n\n{reference_heading(1, 'wire:ref-a')}\n\n{GUIDANCE_END}\n"
    llm_server.script("agg", [Reply(text=markers), Reply(text="The answer is 7.")])
    result = tool_loop(config).run([{"role": "user", "content": "Which is prime?"}])
    if retries:
        assert (result.status, result.text) == ("ok", "The answer is 7."), result.error
        assert len(llm_server.requests_for("agg")) == 2
    else:
        assert result.status == "failed" and result.text == ""
        assert "only copied moa-chat's own marker lines" in str(result.error)
