"""The cost label (header, cards, `ask`) and the ledger's per-role completeness behind its "+"."""

from __future__ import annotations

import pytest
from moa_chat.config.pricing import cost_label
from moa_chat.engine.events import CallRecord, Role
from moa_chat.llm.usage import Usage
from moa_chat.session import UsageLedger


@pytest.mark.parametrize(
    ("dollars", "complete", "label"),
    [
        (0.0042, True, "$0.0042"),
        (0.0042, False, "$0.0042+"),
        (0.0123, True, "$0.012"),
        (0.0123, False, "$0.012+"),
        (0.5, True, "$0.500"),
        (0.5, False, "$0.500+"),
        (1234.5, True, "$1,234.50"),
        (1234.5, False, "$1,234.50+"),
        (0.0, True, "$0"),
        (0.0, False, "$0+"),
    ],
)
def test_cost_label_marks_an_incomplete_sum(dollars: float, complete: bool, label: str) -> None:
    assert cost_label(dollars, complete=complete) == label


def _call(role: Role, *, cost: float | None, used_tokens: bool = True) -> CallRecord:
    usage = Usage(10, 5, 15) if used_tokens else None
    return CallRecord(role, f"demo:{role}", 0, 1, "ok", usage, cost=cost)


def test_cost_complete_by_role_looks_only_at_that_role() -> None:
    ledger = UsageLedger([_call("reference", cost=None), _call("aggregator", cost=0.01)])
    assert not ledger.cost_complete()
    assert not ledger.cost_complete("reference")
    assert ledger.cost_complete("aggregator")


def test_cost_complete_any_unpriced_round_of_the_role_makes_it_partial() -> None:
    ledger = UsageLedger(
        [_call("reference", cost=0.02), _call("aggregator", cost=0.01), _call("aggregator", cost=None)]
    )
    assert not ledger.cost_complete("aggregator")
    assert ledger.cost_complete("reference")
    assert not ledger.cost_complete()


def test_cost_complete_ignores_calls_that_used_no_tokens() -> None:
    # A call that failed before any usage came back spent nothing: its missing price leaves nothing out.
    ledger = UsageLedger([_call("aggregator", cost=0.01), _call("aggregator", cost=None, used_tokens=False)])
    assert ledger.cost_complete("aggregator")
    assert ledger.cost_complete()


def test_cost_complete_with_no_calls_of_the_role() -> None:
    ledger = UsageLedger([_call("reference", cost=None)])
    assert ledger.cost_complete("aggregator")
    assert UsageLedger().cost_complete()
