"""When a failed call is sent again, and after how long.

The SDK has a retry loop of its own, and its rules for what is worth another try are the ones used here
(`llm.is_transient`: 408, 409, 429, 5xx, a refused or reset connection, `x-should-retry`). Its loop is
switched off for the engine's calls (max_retries=0) because it cannot do what a chat needs:
- retry a stream that ended before any answer (an empty answer, a cut before the first token): the SDK
  returns such a stream as a success;
- refuse a `Retry-After` too long to wait, saying how long (the SDK waits up to two minutes without a
  word, and past that ignores the header and retries at once);
- be cancelled mid-wait, stop retrying a reference that was dropped, and tell the user what it is waiting on.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from ..config.model import NetworkLimits
from ..llm import LLMCallError, TimedOut, format_wait

BASE_DELAY = 0.5  # seconds before the first retry; doubled for each one after (as the SDK does)
MAX_DELAY = 8.0
JITTER = 0.25  # up to this fraction taken off each delay, so parallel calls do not retry in step


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 2
    max_wait: float = 30.0
    base_delay: float = BASE_DELAY
    random: Callable[[], float] = random.random

    @classmethod
    def from_limits(cls, limits: NetworkLimits) -> RetryPolicy:
        return cls(max_retries=limits.max_retries, max_wait=limits.max_retry_wait)

    def delay(self, error: LLMCallError, retries_done: int, *, transient: bool | None = None) -> float | None:
        """Seconds to wait before sending again, or None to give up with `error` (see `refusal`).

        `transient` overrides the error's own judgement: a reference cut off mid-answer is worth another
        request, though the same cut would end an aggregator's shown reply for good."""
        transient = error.transient if transient is None else transient
        if isinstance(error, TimedOut) or not transient or retries_done >= self.max_retries:
            return None
        if error.retry_after is not None:
            return None if error.retry_after > self.max_wait else error.retry_after
        backoff: float = min(MAX_DELAY, self.base_delay * 2**retries_done)
        return backoff * (1 - JITTER * self.random())

    def refusal(self, error: LLMCallError) -> str | None:
        """Why a transient failure is not retried, when the reason is ours (a wait too long), else None."""
        if error.transient and error.retry_after is not None and error.retry_after > self.max_wait:
            return (
                f"{error.reason}; not retried: that is longer than network: max_retry_wait "
                f"({format_wait(self.max_wait)})"
            )
        return None
