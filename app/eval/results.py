"""A run's results, summed up per system: accuracy or win rate with its interval, latency, tokens, cost,
and the differences between systems with theirs (stats.py).

Checked tasks give an accuracy; judged ones a win rate against the run's baseline (or a rubric score).
A failed answer counts as wrong on a checked task and as a loss on a judged one: a panel that fails often
is worse, not smaller. A preset's members are its first-layer references, scored as their models' own
single answers; the preset's lift over its best and its average member costs no extra call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .runner import System, member_names
from .stats import Difference, Interval, difference, percentile, wilson
from .tasks import Task


@dataclass
class SystemResult:
    name: str
    kind: str
    scores: dict[str, float] = field(default_factory=dict)  # task id → score, on the tasks scored
    judged: bool = False  # scores are win rates (or rubric scores), not accuracy
    failed: int = 0
    answered: int = 0
    seconds: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)
    cost_complete: bool = True
    layers: list[int] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.scores)

    @property
    def quality(self) -> float | None:
        return sum(self.scores.values()) / self.n if self.n else None

    @property
    def interval(self) -> Interval:
        return wilson(sum(self.scores.values()), self.n)

    @property
    def metric(self) -> str:
        return "win rate" if self.judged else "accuracy"

    def per_task(self, values: list[float] | list[int]) -> float | None:
        return sum(values) / len(values) if values else None

    def as_json(self) -> dict[str, Any]:
        interval = self.interval
        return {
            "name": self.name,
            "kind": self.kind,
            "metric": self.metric,
            "n": self.n,
            "quality": self.quality,
            "interval": [interval.low, interval.high],
            "answered": self.answered,
            "failed": self.failed,
            "median_seconds": percentile(self.seconds, 50),
            "p90_seconds": percentile(self.seconds, 90),
            "tokens_per_task": self.per_task(self.tokens),
            "cost_per_task": self.per_task(self.costs),
            "cost_complete": self.cost_complete,
            "layers_run": self.per_task(self.layers),
        }


@dataclass(frozen=True)
class Failure:
    """A task a system gave no answer to (its turn failed), and why."""

    task: str
    system: str
    error: str

    def as_json(self) -> dict[str, str]:
        return {"task": self.task, "system": self.system, "error": self.error}


@dataclass
class Summary:
    results: list[SystemResult]
    differences: list[Difference]
    lifts: list[tuple[str, Difference, Difference]]  # preset, vs its best member, vs its average member
    judge_cost: float = 0.0
    # (task, system, why) of each answer the judge was asked about and gave no verdict for
    unjudged: list[tuple[str, str, str]] = field(default_factory=list)
    judged: int = 0  # answers the judge was asked about
    failures: list[Failure] = field(default_factory=list)  # the turns that gave no answer, in task order

    def unjudged_line(self) -> str | None:
        """What the judge left unscored, in one line, or None when it judged every answer it was given."""
        if not self.unjudged:
            return None
        task, system, why = self.unjudged[0]
        return (
            f"the judge gave no verdict for {len(self.unjudged)} of {self.judged} answers, which are not scored "
            f"(first: task {task}, {system}: {why})"
        )

    def by_name(self, name: str) -> SystemResult:
        return next(r for r in self.results if r.name == name)

    def as_json(self) -> dict[str, Any]:
        def diff(d: Difference) -> dict[str, Any]:
            return {
                "first": d.first,
                "second": d.second,
                "delta": d.delta,
                "interval": [d.interval.low, d.interval.high],
                "n": d.n,
                "holds": d.holds,
                "verdict": d.verdict(),
            }

        return {
            "systems": [r.as_json() for r in self.results],
            "differences": [diff(d) for d in self.differences],
            "lifts": [
                {"preset": p, "over_best_member": diff(b), "over_average_member": diff(a)} for p, b, a in self.lifts
            ],
            "judge_cost": self.judge_cost,
            "unjudged": [{"task": t, "system": n, "error": why} for t, n, why in self.unjudged],
            "failed": [failure.as_json() for failure in self.failures],
        }


def summarise(
    tasks: list[Task],
    systems: list[System],
    answers: Mapping[tuple[str, str], Mapping[str, Any]],
    verdicts: Mapping[tuple[str, str], Mapping[str, Any]],
    *,
    against: str | None = None,
    rubric: bool = False,
) -> Summary:
    checked = [t for t in tasks if not t.judged]
    judged_only = not checked  # a set of judged tasks is summed up by its win rate
    scored_tasks = checked or tasks
    results: list[SystemResult] = []
    for system in systems:
        top = SystemResult(system.name, system.kind, judged=judged_only)
        members = [SystemResult(name, "member", judged=judged_only) for name in member_names(system.preset)]
        for task in scored_tasks:
            record = answers.get((task.id, system.name))
            if record is None:
                continue
            _add(top, task, record, verdicts, against=against, rubric=rubric)
            if system.kind == "preset":
                for member, stored in zip(members, record.get("members") or [], strict=False):
                    _add(member, task, stored, verdicts, against=against, rubric=rubric)
        results.append(top)
        if system.kind == "preset":
            results += [m for m in members if m.answered or m.failed]
    judge_cost = sum(float(v.get("cost") or 0.0) for v in verdicts.values())
    unjudged = [
        (task, system, str(v.get("error") or "no verdict"))
        for (task, system), v in sorted(verdicts.items())
        if v.get("score") is None
    ]
    failures = [
        Failure(task.id, system.name, str(record.get("error") or "no answer"))
        for task in tasks
        for system in systems
        if (record := answers.get((task.id, system.name))) is not None and record.get("status") != "ok"
    ]
    differences, lifts = _differences(results, systems), _lifts(results, systems)
    return Summary(results, differences, lifts, judge_cost, unjudged, judged=len(verdicts), failures=failures)


def _add(
    result: SystemResult,
    task: Task,
    record: Mapping[str, Any],
    verdicts: Mapping[tuple[str, str], Mapping[str, Any]],
    *,
    against: str | None,
    rubric: bool,
) -> None:
    ok = record.get("status") == "ok"
    result.answered += ok
    result.failed += not ok
    if ok:
        result.seconds.append(float(record.get("seconds") or 0.0))
        if record.get("tokens") is not None:  # None: no provider reported any (not 0)
            result.tokens.append(int(record["tokens"]))
    if record.get("cost") is not None:
        result.costs.append(float(record["cost"]))
    elif ok:
        result.cost_complete = False
    if record.get("layers_run") is not None:
        result.layers.append(int(record["layers_run"]))
    if not task.judged:
        if record.get("score") is not None:
            result.scores[task.id] = float(record["score"])
        return
    if result.name == against and not rubric:
        result.scores[task.id] = 0.5  # the baseline against itself
        return
    verdict = verdicts.get((task.id, result.name))
    if verdict is not None and verdict.get("score") is not None:
        result.scores[task.id] = float(verdict["score"])
    elif not ok:
        result.scores[task.id] = 0.0


def _paired(a: SystemResult, b: SystemResult) -> Difference:
    shared = [t for t in a.scores if t in b.scores]
    return difference(a.name, [a.scores[t] for t in shared], b.name, [b.scores[t] for t in shared])


def _differences(results: list[SystemResult], systems: list[System]) -> list[Difference]:
    top = [r for r in results if r.kind != "member"]
    return [_paired(a, b) for i, a in enumerate(top) for b in top[i + 1 :]]


def _lifts(results: list[SystemResult], systems: list[System]) -> list[tuple[str, Difference, Difference]]:
    lifts = []
    for system in systems:
        if system.kind != "preset":
            continue
        preset = next(r for r in results if r.name == system.name)
        members = [r for r in results if r.kind == "member" and r.name.startswith(system.name + "/") and r.n]
        if not members or not preset.n:
            continue
        best = max(members, key=lambda m: m.quality or 0.0)
        average = SystemResult(f"{system.name} average member", "member")
        for task_id in preset.scores:
            seen = [m.scores[task_id] for m in members if task_id in m.scores]
            if seen:
                average.scores[task_id] = sum(seen) / len(seen)
        lifts.append((system.name, _paired(preset, best), _paired(preset, average)))
    return lifts
