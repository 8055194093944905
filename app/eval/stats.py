"""The arithmetic of a result people can trust: proportions with a 95 % Wilson interval, the difference of
two with Newcombe's interval, and latency percentiles.

Wilson's interval behaves at small n and near 0 % or 100 %, where the textbook ±1.96·√(p(1−p)/n) claims
certainty it does not have. Newcombe's hybrid score interval (his method 10) combines two Wilson
intervals for a difference; treating the two as independent makes it wider than a paired interval would
be, so a difference it calls real is real. A score may be fractional (a judged tie counts a half), which
both formulas take as they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def wilson(successes: float, n: int, z: float = Z95) -> Interval:
    """Wilson's score interval for `successes` out of `n` (n = 0: the whole of [0, 1])."""
    if n <= 0:
        return Interval(0.0, 1.0)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return Interval(max(0.0, centre - half), min(1.0, centre + half))


def newcombe(k1: float, n1: int, k2: float, n2: int, z: float = Z95) -> Interval:
    """Newcombe's interval for p1 − p2 from two Wilson intervals."""
    if n1 <= 0 or n2 <= 0:
        return Interval(-1.0, 1.0)
    p1, p2 = k1 / n1, k2 / n2
    one, two = wilson(k1, n1, z), wilson(k2, n2, z)
    low = p1 - p2 - math.sqrt((p1 - one.low) ** 2 + (two.high - p2) ** 2)
    high = p1 - p2 + math.sqrt((one.high - p1) ** 2 + (p2 - two.low) ** 2)
    return Interval(max(-1.0, low), min(1.0, high))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0–100) by linear interpolation between closest ranks; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    below = math.floor(rank)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (rank - below)


@dataclass(frozen=True)
class Difference:
    """How much better `first` did than `second` on the tasks both were scored on."""

    first: str
    second: str
    delta: float
    interval: Interval
    n: int

    @property
    def holds(self) -> bool:
        """The interval leaves out zero: one really did better."""
        return self.interval.low > 0 or self.interval.high < 0

    def verdict(self) -> str:
        if not self.holds:
            return f"{self.first} vs {self.second}: no clear difference"
        better, worse = (self.first, self.second) if self.delta > 0 else (self.second, self.first)
        return f"{better} beats {worse}"


def difference(first: str, a: Sequence[float], second: str, b: Sequence[float]) -> Difference:
    """The difference in mean score, with Newcombe's interval; `a` and `b` are the scores on shared tasks."""
    n = min(len(a), len(b))
    k1, k2 = sum(a[:n]), sum(b[:n])
    delta = (k1 - k2) / n if n else 0.0
    return Difference(first, second, delta, newcombe(k1, n, k2, n), n)
