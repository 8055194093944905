"""`CallMeter`: one model call's clocks — when it began, when its answer and its thinking began — and its watch
against the `network:` time limits (engine/watchdog.py), which ends the call when it waits too long."""

from __future__ import annotations

from collections.abc import Callable

from ..config.model import NetworkLimits
from .watchdog import WATCHDOG, ByteWatch


class CallMeter:
    def __init__(self, limits: NetworkLimits | None, clock: Callable[[], float], expire: Callable[[], None]) -> None:
        """`expire` is called from the watchdog's thread when a limit passes (`expired` says which), and must
        end the call at once (its reader then raises TimedOut)."""
        self._limits, self._now, self._expire = limits, clock, expire
        self.started_at: float | None = None  # the first attempt's request: a retry's time counts, the user waits
        self.first_token_at: float | None = None
        self.first_reasoning_at: float | None = None
        self.expired: str | None = None  # why a time limit ended the current attempt
        self._watch: ByteWatch | None = None

    def begin_attempt(self) -> None:
        """A request is about to leave: the clock starts (once), and so does this attempt's watch."""
        if self.started_at is None:
            self.started_at = self._now()
        self.expired = None
        if self._limits is not None:
            limits = self._limits
            self._watch = ByteWatch(
                first_token=limits.first_token_timeout, stall=limits.stall_timeout, expire=self._on_expiry
            )
            WATCHDOG.watch(self._watch)

    def stop(self) -> None:
        """Nothing more to wait for (the answer is read, failed, or another reader keeps its own time)."""
        if self._watch is not None:
            WATCHDOG.unwatch(self._watch)

    def byte(self, answering: bool) -> None:
        """Some bytes arrived; `answering`: the answer itself (text, thinking or a tool call) has begun."""
        watch = self._watch
        if watch is not None:
            if not watch.answering and answering:
                watch.answer()
            else:
                watch.byte()

    def text(self) -> None:
        if self.first_token_at is None:
            self.first_token_at = self._now()

    def thought(self) -> None:
        if self.first_reasoning_at is None:
            self.first_reasoning_at = self._now()

    def forget_answer(self) -> None:
        """The attempt's answer is dropped (a retry): its first token and thought no longer count."""
        self.first_token_at = self.first_reasoning_at = None

    def _on_expiry(self, reason: str) -> None:
        self.expired = reason
        self._expire()

    # ------------------------------------------------------------------ readings

    def elapsed(self) -> float:
        return self._now() - self.started_at if self.started_at is not None else 0.0

    def first_token_seconds(self) -> float | None:
        """Seconds from the request to the first answer text (None: no text yet)."""
        return self._since_start(self.first_token_at)

    def thinking_seconds(self) -> float | None:
        """Seconds from the request to the first reasoning delta (None: no reasoning yet)."""
        return self._since_start(self.first_reasoning_at)

    def _since_start(self, moment: float | None) -> float | None:
        if moment is None or self.started_at is None:
            return None
        return round(moment - self.started_at, 3)
