"""A run's results, summed up per system: accuracy or win rate with its interval, the spread over repeats,
unreadable answers, latency, tokens, cost and layers, and the comparisons between systems (verdicts.py).

Checked tasks give an accuracy; judged ones a win rate against the run's baseline (or a rubric score). A
failed answer counts as wrong on a checked task and as a loss on a judged one: a panel that fails often is
worse, not smaller. An answer the check could not read is wrong too, and counted as unreadable. With
`--repeat`, a task's score is its mean over the repeats that answered it. Tokens and cost are what providers
reported: unknown is "n/a", never 0, and a count that leaves some calls out says so (`tokens_complete`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .answer_key import ConstantBaseline, constant_baselines
from .paired import Comparison
from .stats import Interval, percentile, wilson
from .systems import System, job_name, member_names
from .tasks import Task
from .verdicts import Lift, Scores, average_name, halves, judge_pairs, plan_pairs, primary_candidates

# How one answer came out, and its mark in report.html and `eval show`.
MARKS = {"right": "✓", "wrong": "✗", "unreadable": "?", "failed": "!", "unscored": "·"}


def answer_state(record: Mapping[str, Any]) -> str:
    """right, wrong, unreadable (wrong, with no answer the check could trust), failed, or unscored (judged)."""
    if record.get("status") != "ok":
        return "failed"
    if record.get("score") is None:
        return "unscored"
    if record.get("unreadable"):
        return "unreadable"
    return "right" if float(record["score"]) >= 1.0 else "wrong"


@dataclass
class SystemResult:
    name: str
    kind: str
    judged: bool = False  # scores are win rates (or rubric scores), not accuracy
    runs: dict[int, dict[str, float]] = field(default_factory=dict)  # repeat → task id → score
    expected: int = 0  # answers the run asks of it (tasks × repeats)
    failed: int = 0
    answered: int = 0
    unreadable: int = 0  # answered, but the check could not read an answer in the reply
    echoed: int = 0  # replies that copied moa-chat's markers (taken out before they were read)
    seconds: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    tokens_complete: bool = True  # every answer's every call reported its tokens
    costs: list[float] = field(default_factory=list)
    cost_complete: bool = True
    layers: list[int] = field(default_factory=list)

    @property
    def scores(self) -> dict[str, float]:
        """Task id → score: the mean over the repeats that scored it."""
        seen: dict[str, list[float]] = {}
        for run in self.runs.values():
            for task, score in run.items():
                seen.setdefault(task, []).append(score)
        return {task: sum(values) / len(values) for task, values in seen.items()}

    @property
    def n(self) -> int:
        return len(self.scores)

    @property
    def quality(self) -> float | None:
        scores = self.scores
        return sum(scores.values()) / len(scores) if scores else None

    @property
    def interval(self) -> Interval:
        scores = self.scores
        return wilson(sum(scores.values()), len(scores))

    @property
    def metric(self) -> str:
        return "win rate" if self.judged else "accuracy"

    @property
    def repeat_qualities(self) -> list[float]:
        """The quality of each repeat on its own, in repeat order."""
        return [sum(run.values()) / len(run) for _, run in sorted(self.runs.items()) if run]

    @property
    def kept(self) -> int:
        return self.answered + self.failed

    def per_task(self, values: list[float] | list[int]) -> float | None:
        return sum(values) / len(values) if values else None

    def as_json(self) -> dict[str, Any]:
        interval = self.interval
        qualities = self.repeat_qualities
        return {
            "name": self.name,
            "kind": self.kind,
            "metric": self.metric,
            "n": self.n,
            "quality": self.quality,
            "interval": [interval.low, interval.high],
            "repeats": qualities if len(qualities) > 1 else None,
            "answers": self.kept,
            "of": self.expected,
            "answered": self.answered,
            "failed": self.failed,
            "unreadable": self.unreadable,
            "echoed_markers": self.echoed,
            "median_seconds": percentile(self.seconds, 50),
            "p90_seconds": percentile(self.seconds, 90),
            "tokens_per_task": self.per_task(self.tokens),
            "tokens_complete": self.tokens_complete,
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
    comparisons: list[Comparison]  # the primary ones first; each family corrected on its own
    lifts: list[Lift]  # each preset's lift over its best and its average member (also among the comparisons)
    constants: list[ConstantBaseline] = field(default_factory=list)
    judge_cost: float = 0.0
    # (task, system, why) of each answer the judge was asked about and gave no verdict for
    unjudged: list[tuple[str, str, str]] = field(default_factory=list)
    judged: int = 0  # answers the judge was asked about
    repeats: int = 1
    status: str = "done"
    seconds: float | None = None  # the run's wall time
    failures: list[Failure] = field(default_factory=list)  # the turns that gave no answer, in task order

    @property
    def differences(self) -> list[Comparison]:
        return self.comparisons

    @property
    def primary(self) -> list[Comparison]:
        return [c for c in self.comparisons if c.family == "primary"]

    @property
    def secondary(self) -> list[Comparison]:
        return [c for c in self.comparisons if c.family != "primary"]

    @property
    def answers(self) -> tuple[int, int]:
        """(answers kept, answers the run asks for) over the systems run (members come with their preset)."""
        runs = [r for r in self.results if r.kind != "member"]
        return sum(r.kept for r in runs), sum(r.expected for r in runs)

    @property
    def whole(self) -> bool:
        kept, asked = self.answers
        return kept >= asked

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
        kept, asked = self.answers
        return {
            "status": self.status,
            "answers": {"kept": kept, "of": asked},
            "seconds": self.seconds,
            "repeats": self.repeats,
            "systems": [r.as_json() for r in self.results],
            "primary": [c.as_json() for c in self.primary],
            "differences": [c.as_json() for c in self.comparisons],
            "lifts": [lift.as_json() for lift in self.lifts],
            "constant_baselines": [c.as_json() for c in self.constants],
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
    repeats: int = 1,
    primary: Mapping[str, list[str]] | None = None,
    seed: int | None = None,
    status: str = "done",
    seconds: float | None = None,
) -> Summary:
    """The run's figures. `primary`: each preset's candidates for its primary comparison, as named before the
    run (by default, as verdicts.primary_candidates names them); `seed` splits the tasks in halves."""
    checked = [t for t in tasks if not t.judged]
    judged_only = not checked  # a set of judged tasks is summed up by its win rate
    scored_tasks = checked or tasks
    results: list[SystemResult] = []
    for system in systems:
        top = SystemResult(system.name, system.kind, judged=judged_only, expected=len(scored_tasks) * repeats)
        members = [
            SystemResult(name, "member", judged=judged_only, expected=len(scored_tasks) * repeats)
            for name in member_names(system.preset)
        ]
        for repeat in range(1, repeats + 1):
            for task in scored_tasks:
                record = answers.get((task.id, job_name(system.name, repeat)))
                if record is None:
                    continue
                _add(top, task, repeat, record, verdicts, against=against, rubric=rubric)
                if system.kind == "preset":
                    for member, stored in zip(members, record.get("members") or [], strict=False):
                        _add(member, task, repeat, stored, verdicts, against=against, rubric=rubric)
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
        Failure(task.id, name, str(record.get("error") or "no answer"))
        for task in tasks
        for system in systems
        for name in (job_name(system.name, repeat) for repeat in range(1, repeats + 1))
        if (record := answers.get((task.id, name))) is not None and record.get("status") != "ok"
    ]
    comparisons, lifts = _compare(results, systems, primary, halves([t.id for t in scored_tasks], seed), repeats)
    return Summary(
        results,
        comparisons,
        lifts,
        constant_baselines(scored_tasks),
        judge_cost,
        unjudged,
        judged=len(verdicts),
        repeats=repeats,
        status=status,
        seconds=seconds,
        failures=failures,
    )


def _add(
    result: SystemResult,
    task: Task,
    repeat: int,
    record: Mapping[str, Any],
    verdicts: Mapping[tuple[str, str], Mapping[str, Any]],
    *,
    against: str | None,
    rubric: bool,
) -> None:
    ok = record.get("status") == "ok"
    result.answered += ok
    result.failed += not ok
    result.unreadable += bool(record.get("unreadable"))
    result.echoed += bool(record.get("markers_removed"))
    if ok:
        result.seconds.append(float(record.get("seconds") or 0.0))
        if record.get("tokens") is not None:
            result.tokens.append(int(record["tokens"]))
        if record.get("tokens") is None or record.get("tokens_complete") is False:
            result.tokens_complete = False
    if record.get("cost") is not None:
        result.costs.append(float(record["cost"]))
    elif ok:
        result.cost_complete = False
    if record.get("layers_run") is not None:
        result.layers.append(int(record["layers_run"]))
    scores = result.runs.setdefault(repeat, {})
    if not task.judged:
        if record.get("score") is not None:
            scores[task.id] = float(record["score"])
        return
    if result.name == against and not rubric:
        scores[task.id] = 0.5  # the baseline against itself
        return
    verdict = verdicts.get((task.id, job_name(result.name, repeat)))
    if verdict is not None and verdict.get("score") is not None:
        scores[task.id] = float(verdict["score"])
    elif not ok:
        scores[task.id] = 0.0


def _average(preset: str, members: list[SystemResult]) -> SystemResult:
    """A preset's average member: each task's mean over its members, repeat by repeat."""
    average = SystemResult(average_name(preset), "member")
    for repeat in sorted({r for m in members for r in m.runs}):
        runs = [m.runs.get(repeat, {}) for m in members]
        for task in sorted({t for run in runs for t in run}):
            seen = [run[task] for run in runs if task in run]
            average.runs.setdefault(repeat, {})[task] = sum(seen) / len(seen)
    return average


def _compare(
    results: list[SystemResult],
    systems: list[System],
    primary: Mapping[str, list[str]] | None,
    split: tuple[set[str], set[str]],
    repeats: int,
) -> tuple[list[Comparison], list[Lift]]:
    by_name = {r.name: r for r in results}
    members: dict[str, list[str]] = {}
    for system in systems:
        if system.kind == "preset":
            seated = [m for m in member_names(system.preset) if m in by_name and by_name[m].n]
            if seated:
                members[system.name] = seated
                by_name[average_name(system.name)] = _average(system.name, [by_name[m] for m in seated])

    def pooled(name: str) -> Scores:
        return by_name[name].scores if name in by_name else {}

    def of_repeat(repeat: int) -> Any:
        return lambda name: by_name[name].runs.get(repeat, {}) if name in by_name else {}

    candidates = dict(primary) if primary is not None else primary_candidates(systems)
    names = [r.name for r in results]
    kinds = {r.name: r.kind for r in results}
    pairs, lift_pairs = plan_pairs(names, kinds, candidates, members, pooled, split)
    judged = judge_pairs(pairs, pooled, [of_repeat(r) for r in range(1, repeats + 1)])
    lifts = [Lift(preset, judged[best], judged[average]) for preset, (best, average) in lift_pairs.items()]
    return [judged[p] for p in pairs], lifts
