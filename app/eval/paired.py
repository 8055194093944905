"""Paired comparisons that replicate: two systems scored on the same tasks, an exact paired test, Newcombe's
paired interval, and Holm's correction over a family of comparisons.

Two systems answer the same tasks, so their scores are paired: a hard task is hard for both. A test that
treats them as independent samples throws that away and, across ten comparisons, one of them "wins" by
chance alone far more often than 5 % of the time. Here each comparison is

- a **sign-flip test** on the per-task differences: under "no difference", each task's difference is as
  likely to have either sign, and the p-value counts the sign patterns at least as extreme as the one seen,
  exactly. On 0/1 scores it is McNemar's exact test (a binomial test on the tasks where the two disagree);
  it takes fractional scores (a judged tie, a mean over repeats) as they are;
- **Newcombe's interval** for a difference of paired proportions (1998, the square-and-add method 10, with
  his continuity-corrected correlation), on the per-task means;
- and **Holm's step-down correction** over the comparisons of one family: a difference is called only when
  its adjusted p-value is below 0.05, which holds the chance of any false "beats" in the family at 5 %.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from .stats import Interval, wilson

ALPHA = 0.05
EXACT_SPAN = 200_000  # beyond this many possible sums, the sign-flip test samples patterns instead
SAMPLED = 20_000  # sign patterns drawn then (with a fixed seed: the same data give the same p-value)


def sign_flip_p(differences: Sequence[float]) -> float:
    """Two-sided p-value of the exact sign-flip test on paired differences (1.0 when all are zero)."""
    fractions = [Fraction(d).limit_denominator(1000) for d in differences if d]
    if not fractions:
        return 1.0
    scale = math.lcm(*(f.denominator for f in fractions))
    steps = [abs(int(f * scale)) for f in fractions]
    observed = abs(sum(int(f * scale) for f in fractions))
    if sum(steps) > EXACT_SPAN:
        return _sampled_p(steps, observed)
    counts: dict[int, int] = {0: 1}  # the sum of the signed differences → how many sign patterns give it
    for step in steps:
        grown: dict[int, int] = {}
        for total, ways in counts.items():
            for signed in (total + step, total - step):
                grown[signed] = grown.get(signed, 0) + ways
        counts = grown
    extreme = sum(ways for total, ways in counts.items() if abs(total) >= observed)
    return min(1.0, float(extreme) / float(2 ** len(steps)))


def _sampled_p(steps: Sequence[int], observed: int) -> float:
    rng = random.Random(0)
    extreme = sum(abs(sum(s if rng.random() < 0.5 else -s for s in steps)) >= observed for _ in range(SAMPLED))
    return (extreme + 1) / (SAMPLED + 1)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def paired_interval(a: Sequence[float], b: Sequence[float]) -> Interval:
    """Newcombe's square-and-add interval for mean(a) − mean(b), the same tasks scored by both."""
    n = min(len(a), len(b))
    if n == 0:
        return Interval(-1.0, 1.0)
    a, b = a[:n], b[:n]
    k1, k2 = sum(a), sum(b)
    p1, p2 = k1 / n, k2 / n
    one, two = wilson(k1, n), wilson(k2, n)
    phi = _correlation(a, b)
    delta = p1 - p2
    low = delta - math.sqrt(
        max(0.0, (p1 - one.low) ** 2 + (two.high - p2) ** 2 - 2 * phi * (p1 - one.low) * (two.high - p2))
    )
    high = delta + math.sqrt(
        max(0.0, (p2 - two.low) ** 2 + (one.high - p1) ** 2 - 2 * phi * (p2 - two.low) * (one.high - p1))
    )
    return Interval(max(-1.0, low), min(1.0, high))


def _correlation(a: Sequence[float], b: Sequence[float]) -> float:
    """The correlation of the two systems' scores over tasks: Newcombe's corrected phi on 0/1 scores, Pearson's
    on fractional ones; 0 when either system's scores do not vary."""
    n = len(a)
    if all(x in (0.0, 1.0) for x in (*a, *b)):
        both = sum(1 for x, y in zip(a, b, strict=True) if x and y)
        first = sum(1 for x, y in zip(a, b, strict=True) if x and not y)
        second = sum(1 for x, y in zip(a, b, strict=True) if y and not x)
        neither = n - both - first - second
        margins = (both + first) * (second + neither) * (both + second) * (first + neither)
        if not margins:
            return 0.0
        cross = both * neither - first * second
        corrected = cross - n / 2 if cross > n / 2 else (0.0 if cross >= 0 else cross)
        return corrected / math.sqrt(margins)
    mean_a, mean_b = sum(a) / n, sum(b) / n
    spread_a = math.sqrt(sum((x - mean_a) ** 2 for x in a))
    spread_b = math.sqrt(sum((y - mean_b) ** 2 for y in b))
    if not spread_a or not spread_b:
        return 0.0
    return sum((x - mean_a) * (y - mean_b) for x, y in zip(a, b, strict=True)) / (spread_a * spread_b)


@dataclass(frozen=True)
class Comparison:
    """`first` against `second` on the `n` tasks both were scored on: the difference of their mean scores,
    its paired interval, the test's p-value, and the p-value once corrected for the rest of its family."""

    first: str
    second: str
    delta: float
    interval: Interval
    n: int
    p: float
    family: str = "secondary"  # "primary": named before the run; "secondary": the rest
    adjusted: float | None = None  # Holm's, over the family; None until corrected
    note: str = ""  # how it was measured, where that differs from the rest ("on the held-out half")
    repeats_holding: tuple[int, int] | None = None  # (repeats in which it holds alone, repeats): with --repeat

    @property
    def holds(self) -> bool:
        """One really did better: the corrected p-value is below 0.05 (the raw one, before correction)."""
        p = self.adjusted if self.adjusted is not None else self.p
        return p < ALPHA and self.delta != 0

    def verdict(self) -> str:
        if not self.holds:
            return f"{self.first} vs {self.second}: no clear difference"
        better, worse = (self.first, self.second) if self.delta > 0 else (self.second, self.first)
        return f"{better} beats {worse}"

    def as_json(self) -> dict[str, object]:
        return {
            "first": self.first,
            "second": self.second,
            "family": self.family,
            "delta": self.delta,
            "interval": [self.interval.low, self.interval.high],
            "n": self.n,
            "p": self.p,
            "p_adjusted": self.adjusted,
            "holds": self.holds,
            "verdict": self.verdict(),
            "note": self.note or None,
            "repeats_holding": list(self.repeats_holding) if self.repeats_holding else None,
        }


def compare(
    first: str, a: Sequence[float], second: str, b: Sequence[float], *, family: str = "secondary", note: str = ""
) -> Comparison:
    """`first` against `second`, their scores on the same tasks in the same order."""
    n = min(len(a), len(b))
    differences = [x - y for x, y in zip(a[:n], b[:n], strict=True)]
    delta = sum(differences) / n if n else 0.0
    interval = paired_interval(a[:n], b[:n])
    return Comparison(first, second, delta, interval, n, sign_flip_p(differences), family=family, note=note)


def corrected(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """The comparisons with Holm's adjusted p-values, each family corrected on its own."""
    out = list(comparisons)
    for family in sorted({c.family for c in comparisons}):
        members = [i for i, c in enumerate(out) if c.family == family]
        for i, p in zip(members, holm([out[i].p for i in members]), strict=True):
            out[i] = dataclasses.replace(out[i], adjusted=p)
    return out
