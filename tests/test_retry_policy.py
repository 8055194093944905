"""The retry policy as a table: every row engine/retry.py's docstring and docs/reliability.md promise, each a
decision of the pure `RetryPolicy.decide`, and the backoff it waits."""

from __future__ import annotations

import pytest
from moa_chat.engine.retry import Fail, Fault, Restart, Retry, RetryPolicy, fault_of
from moa_chat.llm import CutOff, LLMCallError, TimedOut
from moa_chat.llm.errors import EmptyAnswer, MalformedChunk

POLICY = RetryPolicy(max_retries=2, max_wait=30.0, random=lambda: 0.0)  # no jitter: the first backoff is 0.5 s
RETRY = Retry(0.5)

# role, text shown, fault, attempt (1: the first), restarts left, front end can show a fresh reply -> decision
ROWS = [
    # Never retried: a time limit, a refusal that would come again, an answer empty on purpose.
    ("aggregator", False, Fault("timed_out"), 1, 1, True, Fail()),
    ("reference", False, Fault("timed_out"), 1, 0, False, Fail()),
    ("aggregator", False, Fault("permanent"), 1, 1, True, Fail()),
    ("reference", False, Fault("permanent"), 1, 0, False, Fail()),
    ("aggregator", False, Fault("stopped_empty"), 1, 1, True, Fail()),
    # Nothing shown yet: asked again after the backoff, the aggregator's calls as the references'.
    ("aggregator", False, Fault("transient"), 1, 1, True, RETRY),
    ("aggregator", False, Fault("transient"), 1, 0, False, RETRY),
    ("aggregator", False, Fault("cut_off"), 1, 0, False, RETRY),
    ("aggregator", False, Fault("malformed"), 1, 0, False, RETRY),
    ("aggregator", False, Fault("empty"), 1, 0, False, RETRY),
    ("agreement", False, Fault("cut_off"), 1, 0, False, RETRY),
    ("agreement", False, Fault("transient"), 1, 0, False, RETRY),
    # A reference's text is never the answer: a cut-off one is asked again, text or not.
    ("reference", True, Fault("cut_off"), 1, 0, False, RETRY),
    ("reference", True, Fault("malformed"), 1, 0, False, RETRY),
    ("reference", False, Fault("empty"), 1, 0, False, RETRY),
    # ... while max_retries lasts.
    ("reference", False, Fault("transient"), 2, 0, False, Retry(1.0)),
    ("reference", False, Fault("transient"), 3, 0, False, Fail()),
    ("aggregator", False, Fault("cut_off"), 3, 1, True, Fail()),
    # The provider's Retry-After is obeyed, up to max_retry_wait; past it the call fails at once, saying so.
    ("aggregator", False, Fault("transient", retry_after=7.0), 1, 0, False, Retry(7.0)),
    (
        "reference",
        False,
        Fault("transient", retry_after=31.0),
        1,
        0,
        False,
        Fail("not retried: that is longer than network: max_retry_wait (30 s)"),
    ),
    # Text shown: only a cut-off (or garbled) reply is asked again, as a fresh reply, where one can be shown.
    ("aggregator", True, Fault("cut_off"), 1, 1, True, Restart(0.5)),
    ("aggregator", True, Fault("malformed"), 1, 1, True, Restart(0.5)),
    ("aggregator", True, Fault("cut_off"), 3, 1, True, Restart(0.5)),  # a restart is not one of the retries
    ("aggregator", True, Fault("cut_off"), 1, 0, True, Fail()),  # once
    ("aggregator", True, Fault("cut_off"), 1, 1, False, Fail()),  # `ask --stream`, the API's stream
    ("aggregator", True, Fault("transient"), 1, 1, True, Fail()),  # an error event mid-reply
    ("aggregator", True, Fault("empty"), 1, 1, True, Fail()),
]


@pytest.mark.parametrize(("role", "shown", "fault", "attempt", "restarts", "fresh", "decision"), ROWS)
def test_the_decision_table(role, shown, fault, attempt, restarts, fresh, decision):
    got = POLICY.decide(
        role, shown_text=shown, fault=fault, attempt=attempt, restarts_left=restarts, can_show_fresh=fresh
    )
    assert got == decision


def test_no_retries_means_no_restart_either():
    """`max_retries: 0` switches every second request off, the fresh reply after a cut-off one included."""
    off = RetryPolicy(max_retries=0, random=lambda: 0.0)
    decide = off.decide
    assert (
        decide("aggregator", shown_text=True, fault=Fault("cut_off"), attempt=1, restarts_left=1, can_show_fresh=True)
        == Fail()
    )
    assert (
        decide(
            "reference", shown_text=False, fault=Fault("transient"), attempt=1, restarts_left=0, can_show_fresh=False
        )
        == Fail()
    )


def test_the_backoff_doubles_to_its_cap_with_bounded_jitter():
    def waits(policy: RetryPolicy, attempts: int) -> list[float]:
        decisions = [
            policy.decide(
                "reference",
                shown_text=False,
                fault=Fault("transient"),
                attempt=n,
                restarts_left=0,
                can_show_fresh=False,
            )
            for n in range(1, attempts + 1)
        ]
        return [d.after for d in decisions if isinstance(d, Retry)]

    assert waits(RetryPolicy(max_retries=6, random=lambda: 0.0), 6) == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert waits(RetryPolicy(max_retries=6, random=lambda: 1.0), 3) == [0.375, 0.75, 1.5]


def test_each_error_is_the_fault_it_names():
    def where() -> dict[str, object]:
        return {"provider": "p", "model": "m", "task": "moa_aggregator"}

    assert fault_of(TimedOut("no answer began", provider="p", model="m")) == Fault("timed_out")
    assert fault_of(CutOff(characters=12, **where())) == Fault("cut_off")
    assert fault_of(MalformedChunk(sample="{oops", **where())) == Fault("malformed")
    assert fault_of(EmptyAnswer("empty", transient=True, provider="p", model="m")) == Fault("empty")
    assert fault_of(EmptyAnswer("empty: max_tokens", provider="p", model="m")) == Fault("stopped_empty")
    assert fault_of(LLMCallError("HTTP 503", provider="p", model="m", transient=True, retry_after=2.0)) == Fault(
        "transient", 2.0
    )
    assert fault_of(LLMCallError("HTTP 400", provider="p", model="m")) == Fault("permanent")
