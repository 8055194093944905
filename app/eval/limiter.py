"""How many turns each provider serves at once during an eval, and how a 429 slows that provider alone.

Every turn takes a slot of each provider it calls (all at once, so two turns never hold half of each other's
slots). A 429 halves that provider's cap (down to one) and holds its new calls until its `Retry-After` has
passed, and the turn asks again as any turn does (the engine's `max_retries`). A `Retry-After` longer than
the provider's `max_retry_wait` is not waited for: the turn fails at once, saying how long was asked, as
`ask` does, and nothing is held. After `RECOVER_AFTER` turns in a row without a 429, the cap grows by one
again, up to what was asked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from ..llm import CallLLM, ChatRequest, LLMCallError

RATE_LIMITED = 429
DEFAULT_PAUSE = 1.0  # seconds a provider is held after a 429 that names no wait
RECOVER_AFTER = 10


class ProviderLimiter:
    def __init__(
        self,
        cap: int,
        *,
        ceilings: dict[str, int] | None = None,
        clock: Callable[[], float] = time.monotonic,
        longest_wait: Callable[[str], float] = lambda _provider: float("inf"),
    ) -> None:
        """`longest_wait`: a provider's `max_retry_wait`, the longest `Retry-After` it is held for."""
        self.ceiling = max(1, cap)
        self._longest_wait = longest_wait
        self._ceilings = {p: max(1, min(c, self.ceiling)) for p, c in (ceilings or {}).items()}  # below `cap`
        self._clock = clock
        self._changed = threading.Condition()
        self._caps: dict[str, int] = {}
        self._busy: dict[str, int] = {}
        self._paused_until: dict[str, float] = {}
        self._calm: dict[str, int] = {}
        self.rate_limits: dict[str, int] = {}  # 429s seen, per provider
        self.peak: dict[str, int] = {}  # the most turns a provider served at once

    def ceiling_of(self, provider: str) -> int:
        return self._ceilings.get(provider, self.ceiling)

    def cap(self, provider: str) -> int:
        with self._changed:
            return self._caps.get(provider, self.ceiling_of(provider))

    def _free(self, provider: str, now: float) -> bool:
        return (
            self._busy.get(provider, 0) < self._caps.get(provider, self.ceiling_of(provider))
            and self._paused_until.get(provider, 0.0) <= now
        )

    def _next_wake(self, providers: Iterable[str]) -> float | None:
        now = self._clock()
        waits = [self._paused_until.get(p, 0.0) - now for p in providers]
        later = [w for w in waits if w > 0]
        return min(later) if later else None

    def acquire(self, providers: Iterable[str], stop: threading.Event) -> bool:
        """Take a slot of every provider in `providers`; False when `stop` is set first."""
        wanted = sorted(set(providers))
        with self._changed:
            while not stop.is_set():
                now = self._clock()
                if all(self._free(p, now) for p in wanted):
                    for p in wanted:
                        self._busy[p] = self._busy.get(p, 0) + 1
                        self.peak[p] = max(self.peak.get(p, 0), self._busy[p])
                    return True
                self._changed.wait(self._next_wake(wanted) or 0.5)
            return False

    def release(self, providers: Iterable[str], *, rate_limited: bool) -> None:
        with self._changed:
            for p in set(providers):
                self._busy[p] = max(0, self._busy.get(p, 0) - 1)
                if rate_limited:
                    continue
                self._calm[p] = self._calm.get(p, 0) + 1
                cap = self._caps.get(p, self.ceiling_of(p))
                if cap < self.ceiling_of(p) and self._calm[p] >= RECOVER_AFTER:
                    self._caps[p], self._calm[p] = cap + 1, 0
            self._changed.notify_all()

    def slow(self, provider: str, retry_after: float | None) -> None:
        """A 429 from `provider`: halve its cap and hold its calls for the wait it asked for."""
        with self._changed:
            self.rate_limits[provider] = self.rate_limits.get(provider, 0) + 1
            self._caps[provider] = max(1, self._caps.get(provider, self.ceiling_of(provider)) // 2)
            self._calm[provider] = 0
            until = self._clock() + (DEFAULT_PAUSE if retry_after is None else retry_after)
            self._paused_until[provider] = max(self._paused_until.get(provider, 0.0), until)
            self._changed.notify_all()

    def wake(self) -> None:
        """End every wait at once (the run is stopping: each wait looks at its `stop`)."""
        with self._changed:
            self._changed.notify_all()

    def wait_ready(self, provider: str, stop: threading.Event) -> None:
        """Before a call: wait out a pause the provider asked for (or until `stop`)."""
        with self._changed:
            while not stop.is_set():
                wait = self._next_wake([provider])
                if wait is None:
                    return
                self._changed.wait(wait)

    def wrap(self, call: CallLLM, stop: threading.Event, flag: Callable[[], None]) -> CallLLM:
        """`call`, held while its provider is paused; a 429 slows the provider and runs `flag` (the turn's
        provider slots are then released as rate-limited)."""

        def limited(request: ChatRequest) -> object:
            provider = request.provider or ""
            self.wait_ready(provider, stop)
            try:
                return call(request)
            except LLMCallError as exc:
                longer = exc.retry_after is not None and exc.retry_after > self._longest_wait(provider)
                if exc.status == RATE_LIMITED and not longer:  # a longer wait fails the turn, holding nothing
                    self.slow(provider, exc.retry_after)
                    flag()
                raise

        return limited
