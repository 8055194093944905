"""When a failed call is sent again, and after how long: one pure decision, `RetryPolicy.decide`.

The SDK has a retry loop of its own, and its rules for what is worth another try are the ones used here
(`llm.is_transient`: 408, 409, 429, 5xx, a refused or reset connection, `x-should-retry`). Its loop is
switched off for the engine's calls (max_retries=0) because it cannot do what a chat needs:
- retry a stream that ended before any answer (an empty answer, a cut before the first token, a malformed
  chunk): the SDK returns such a stream as a success, or fails with a raw JSON error;
- refuse a `Retry-After` too long to wait, saying how long (the SDK waits up to two minutes without a
  word, and past that ignores the header and retries at once);
- be cancelled mid-wait, stop retrying a reference that was dropped, and tell the user what it is waiting on.

The decision, as a table (`tests/test_retry_policy.py` holds every row):

    role        shown    fault                                        decision
    any         any      timed out (`network:` limits), not transient  fail
                         (a 4xx), empty on purpose (`length`,
                         `content_filter`)
    any         any      `Retry-After` over `max_retry_wait`            fail, saying how long was asked
    reference   any      transient, cut off, malformed, empty           retry after the backoff, while
                                                                        `max_retries` lasts: its text is
                                                                        never the answer
    aggregator, nothing  transient, cut off, malformed, empty           the same (a tool call cut half-way
    judge                                                               was neither shown nor run)
    aggregator  text     cut off or malformed; the front end can show   restart: a fresh reply, the text
                         a fresh reply; a restart left; `max_retries`   shown an earlier version
                         not 0
    aggregator  text     anything else                                  fail: the text stays, cut off

"Shown" is the front end's word: the API's non-streamed reply and `ask` into a pipe show nothing until the turn
ends, so a restart there is invisible.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ..config.model import NetworkLimits
from ..llm import CutOff, LLMCallError, TimedOut, format_wait
from ..llm.errors import EmptyAnswer, MalformedChunk
from .events import Role

BASE_DELAY = 0.5  # seconds before the first retry; doubled for each one after (as the SDK does)
MAX_DELAY = 8.0
JITTER = 0.25  # up to this fraction taken off each delay, so parallel calls do not retry in step

FaultKind = Literal[
    "transient",  # a 5xx, 429 or 408, a refused or reset connection: the same request may well succeed
    "cut_off",  # the stream ended, or its connection closed, without a finish reason
    "malformed",  # the provider sent a chunk that is not a chat-completion chunk
    "empty",  # a whole answer with no text and no tool call
    "stopped_empty",  # empty because max_tokens ran out or a content filter stopped it: it would be again
    "timed_out",  # a `network:` time limit passed: asking again would make the user wait as long again
    "permanent",  # a 4xx that is not transient, a body that is not a chat stream
]
RETRYABLE: frozenset[FaultKind] = frozenset({"transient", "cut_off", "malformed", "empty"})
RESTARTABLE: frozenset[FaultKind] = frozenset({"cut_off", "malformed"})


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    retry_after: float | None = None  # seconds the provider asked to wait, when it said


@dataclass(frozen=True)
class Retry:
    """Send the same request again after `after` seconds: nothing of the answer was shown."""

    after: float


@dataclass(frozen=True)
class Restart:
    """Ask again for a fresh reply after `after` seconds: the text shown becomes an earlier version."""

    after: float


@dataclass(frozen=True)
class Fail:
    """Let the error stand; `reason`, when given, is why it is not retried (said after the error's own)."""

    reason: str | None = None


Decision = Retry | Restart | Fail


def fault_of(error: LLMCallError) -> Fault:
    """What kind of failure `error` is, for `decide`."""
    kind: FaultKind
    if isinstance(error, TimedOut):
        kind = "timed_out"
    elif isinstance(error, CutOff):
        kind = "cut_off"
    elif isinstance(error, MalformedChunk):
        kind = "malformed"
    elif isinstance(error, EmptyAnswer):
        kind = "empty" if error.transient else "stopped_empty"
    else:
        kind = "transient" if error.transient else "permanent"
    return Fault(kind, error.retry_after)


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 2
    max_wait: float = 30.0
    base_delay: float = BASE_DELAY
    random: Callable[[], float] = random.random

    @classmethod
    def from_limits(cls, limits: NetworkLimits) -> RetryPolicy:
        return cls(max_retries=limits.max_retries, max_wait=limits.max_retry_wait)

    def decide(
        self,
        role: Role,
        *,
        shown_text: bool,
        fault: Fault,
        attempt: int,
        restarts_left: int,
        can_show_fresh: bool,
    ) -> Decision:
        """What to do after attempt number `attempt` (1 for the first) failed with `fault`. `shown_text`: some of
        this attempt's answer text reached the user; `restarts_left`: how many fresh replies may still be asked
        for; `can_show_fresh`: the front end can show a fresh reply as one (see the table above)."""
        if fault.kind not in RETRYABLE:
            return Fail()
        if fault.retry_after is not None and fault.retry_after > self.max_wait:
            return Fail(f"not retried: that is longer than network: max_retry_wait ({format_wait(self.max_wait)})")
        if role != "reference" and shown_text:
            if fault.kind in RESTARTABLE and can_show_fresh and restarts_left > 0 and self.max_retries > 0:
                return Restart(self._delay(fault, 0))
            return Fail()
        if attempt - 1 >= self.max_retries:
            return Fail()
        return Retry(self._delay(fault, attempt - 1))

    def _delay(self, fault: Fault, retries_done: int) -> float:
        if fault.retry_after is not None:
            return fault.retry_after
        backoff: float = min(MAX_DELAY, self.base_delay * 2**retries_done)
        return backoff * (1 - JITTER * self.random())
