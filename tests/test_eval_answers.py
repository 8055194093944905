"""How eval reads a reply, table-driven: every reply in tests/fixtures/eval_replies.yaml (the local model's own,
the cases an earlier reader got wrong, and written ones) is read as the fixture says, or counted unreadable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from moa_chat.eval.answers import read_choice, read_number
from moa_chat.eval.checks import LETTERS, Choice, Number

FIXTURES = yaml.safe_load((Path(__file__).parent / "fixtures" / "eval_replies.yaml").read_text(encoding="utf-8"))


def _label(case: dict[str, Any]) -> str:
    return f"{case['from'][:60]}: {case['reply'][:40]!r}"


@pytest.mark.parametrize("case", FIXTURES["choice"], ids=_label)
def test_a_multiple_choice_reply_is_read_as_the_task_meant(case: dict[str, Any]) -> None:
    options = tuple(case["options"])
    reading = read_choice(case["reply"], options, LETTERS[: len(options)])
    assert reading.value == case["read"], reading.how
    assert reading.how  # how it was read, or why it could not be: the report shows it


@pytest.mark.parametrize("case", FIXTURES["number"], ids=_label)
def test_a_numeric_reply_is_read_as_the_task_meant(case: dict[str, Any]) -> None:
    reading = read_number(case["reply"])
    assert reading.value == case["read"], reading.how


def test_the_fixtures_hold_the_local_models_replies_and_a_few_dozen_in_all() -> None:
    cases = FIXTURES["choice"] + FIXTURES["number"]
    assert len(cases) >= 60
    assert sum(case["from"].startswith("SmolLM2") for case in cases) >= 30
    assert sum(case["read"] is None for case in cases) >= 20  # the unreadable are pinned as firmly as the rest


def test_an_unreadable_reply_is_wrong_and_says_why() -> None:
    check = Choice(("4", "6", "7"), "C")
    reading = check.read("A) 4\nB) 6\nC) 7")
    assert reading.value is None and reading.how == "lists options A, B, C"
    assert not check.score("A) 4\nB) 6\nC) 7")  # a list of every option holds the right one, and is still wrong
    assert Number(322).read("So she reads 322 pages in 14 days.").value is None
    assert not Number(322).score("So she reads 322 pages in 14 days.")
