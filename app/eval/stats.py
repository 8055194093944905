"""The arithmetic of a single system's result: a proportion with its 95 % Wilson interval, and latency
percentiles. (Two systems are compared in paired.py.)

Wilson's interval behaves at small n and near 0 % or 100 %, where the textbook ±1.96·√(p(1−p)/n) claims
certainty it does not have. A score may be fractional (a judged tie counts a half, a task's mean over
repeats), which the formula takes as it is.
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


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0–100) by linear interpolation between closest ranks; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    below = math.floor(rank)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (rank - below)
