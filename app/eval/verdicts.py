"""Which comparisons a run makes, and which of them it may call.

Each preset has one **primary** comparison, named before the run and kept in its spec: the preset against its
best single model. Its single models are the ones the run asks alone (`--solo`, `--members`); without them
its `--baseline`s; without those, its members as they answered as references. With one candidate the
comparison uses every task. With several, picking the best after seeing the scores would favour whichever got
lucky, so the best is chosen on one half of the tasks (a split by the run's seed) and compared on the other.
`--primary SYSTEM` names the comparison instead.

Everything else is **secondary**: every other pair of systems, and each preset's lift over its best member as
a reference (chosen on one half, measured on the other) and over its average member. Each family is corrected
with Holm's method on its own (paired.py), so the primary verdict keeps its full power and the many secondary
ones cannot produce a "beats" by chance. With `--repeat`, the scores are each task's mean over the repeats,
and each verdict also says in how many of the repeats, alone, it would have held.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..config import ConfigError
from .paired import Comparison, compare, corrected
from .systems import System, member_names

Scores = Mapping[str, float]  # task id → score


def primary_candidates(systems: Sequence[System], named: str | None = None) -> dict[str, list[str]]:
    """Each preset's candidates for its best single model (see the module's docstring), decided before the
    run; `named`: one system every preset is compared with instead."""
    plan: dict[str, list[str]] = {}
    for system in systems:
        if system.kind != "preset":
            continue
        if named is not None:
            plan[system.name] = [named] if named != system.name else []
            continue
        singles = [s.name for s in systems if s.kind in ("solo", "alone") and system.name in s.serves]
        singles = singles or [s.name for s in systems if s.kind == "baseline"]
        plan[system.name] = singles or member_names(system.preset)
    return plan


def named_primary(systems: Sequence[System], named: str | None) -> dict[str, list[str]]:
    """The primary comparisons a run names before it starts (`--primary SYSTEM`, else each preset's best single
    model), checked: a ConfigError names the systems there are."""
    if named is not None:
        names = [s.name for s in systems] + [m for s in systems if s.kind == "preset" for m in member_names(s.preset)]
        if named not in names:
            raise ConfigError(f"--primary {named!r}: not a system of this run; it has {', '.join(names)}")
    return primary_candidates(systems, named)


def halves(task_ids: Sequence[str], seed: int | None) -> tuple[set[str], set[str]]:
    """The tasks split in two by the run's seed: (the half a best system is chosen on, the half it is measured on)."""
    ordered = sorted(task_ids)
    random.Random(f"{seed}/halves").shuffle(ordered)
    middle = len(ordered) // 2
    return set(ordered[:middle]), set(ordered[middle:])


@dataclass(frozen=True)
class Pair:
    """A comparison to make: `first` against `second`, on the tasks in `only` (None: every task both have)."""

    first: str
    second: str
    family: str
    only: frozenset[str] | None = None
    note: str = ""

    def measure(self, scores: Callable[[str], Scores]) -> Comparison:
        a, b = scores(self.first), scores(self.second)
        shared = [t for t in a if t in b and (self.only is None or t in self.only)]
        return compare(
            self.first,
            [a[t] for t in shared],
            self.second,
            [b[t] for t in shared],
            family=self.family,
            note=self.note,
        )


@dataclass(frozen=True)
class Lift:
    preset: str
    best: Comparison  # over its best member as a reference (chosen on one half, measured on the other)
    average: Comparison  # over its average member

    def as_json(self) -> dict[str, object]:
        return {
            "preset": self.preset,
            "over_best_member": self.best.as_json(),
            "over_average_member": self.average.as_json(),
        }


def _best(names: Sequence[str], scores: Callable[[str], Scores], on: set[str]) -> str:
    def mean(name: str) -> float:
        seen = [v for t, v in scores(name).items() if t in on]
        return sum(seen) / len(seen) if seen else -1.0

    return max(names, key=mean)  # the first of equals: the order the run lists them in


def plan_pairs(
    names: Sequence[str],
    kinds: Mapping[str, str],
    candidates: Mapping[str, list[str]],
    members: Mapping[str, list[str]],
    scores: Callable[[str], Scores],
    split: tuple[set[str], set[str]],
) -> tuple[list[Pair], dict[str, tuple[Pair, Pair]]]:
    """Every comparison of the run (primary first), and each preset's two lift pairs."""
    choose, measure = split
    held_out = frozenset(measure)
    pairs: list[Pair] = []
    for preset, wanted in candidates.items():
        present = [c for c in wanted if scores(c)]
        if preset not in names or not present:
            continue
        if len(present) == 1:
            pairs.append(Pair(preset, present[0], "primary"))
            continue
        best = _best(present, scores, choose)
        what = "members as references" if all(kinds.get(c) == "member" for c in present) else "single models"
        note = f"the best of {len(present)} {what}, chosen on the other half of the tasks"
        pairs.append(Pair(preset, best, "primary", held_out, note))
    whole = {(p.first, p.second) for p in pairs if p.only is None}
    tops = [n for n in names if kinds[n] != "member"]
    for i, first in enumerate(tops):
        for second in tops[i + 1 :]:
            if (first, second) not in whole and (second, first) not in whole and scores(first) and scores(second):
                pairs.append(Pair(first, second, "secondary"))
    lifts: dict[str, tuple[Pair, Pair]] = {}
    for preset, seated in members.items():
        present = [m for m in seated if scores(m)]
        if not present or not scores(preset):
            continue
        best = _best(present, scores, choose)
        note = "its best member as a reference, chosen on the other half of the tasks"
        # The same comparison as the primary one (a preset with no single model run alone) is made once.
        same = [p for p in pairs if (p.first, p.second, p.only) == (preset, best, held_out)]
        lift = same[0] if same else Pair(preset, best, "secondary", held_out, note)
        average = Pair(preset, average_name(preset), "secondary")
        pairs += [average] if same else [lift, average]
        lifts[preset] = (lift, average)
    return pairs, lifts


def average_name(preset: str) -> str:
    return f"{preset} average member"


def judge_pairs(
    pairs: Sequence[Pair], pooled: Callable[[str], Scores], repeats: Sequence[Callable[[str], Scores]]
) -> dict[Pair, Comparison]:
    """Each pair measured on the pooled scores and corrected by family; with several repeats, each also says in
    how many repeats, measured and corrected alone, it would have held."""
    found = corrected([pair.measure(pooled) for pair in pairs])
    if len(repeats) > 1:
        holding = [0] * len(pairs)
        for scores in repeats:
            for i, comparison in enumerate(corrected([pair.measure(scores) for pair in pairs])):
                holding[i] += comparison.holds and (comparison.delta > 0) == (found[i].delta > 0)
        found = [
            dataclasses.replace(comparison, repeats_holding=(held, len(repeats)))
            for comparison, held in zip(found, holding, strict=True)
        ]
    return dict(zip(pairs, found, strict=True))
