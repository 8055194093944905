"""What a run shows: the terminal table, the quality-against-cost picture (plotext), and the report folder
(results.jsonl with every answer, score and verdict; summary.json; report.md; the picture as text)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..config.pricing import format_cost
from .results import Summary, SystemResult
from .stats import Difference, percentile
from .tasks import Task

PLOT_WIDTH, PLOT_HEIGHT = 72, 20
SHOWN_FAILURES = 10  # failed turns listed under the table


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}s"


def _row(result: SystemResult) -> list[str]:
    interval = result.interval
    tokens = result.per_task(result.tokens)
    cost = result.per_task(result.costs)
    shown = "—" if cost is None else format_cost(cost) + ("" if result.cost_complete else "+")
    return [
        result.name,
        _percent(result.quality),
        f"{_percent(interval.low)}–{_percent(interval.high)}" if result.n else "—",
        f"{result.n}" + (f" ({result.failed} failed)" if result.failed else ""),
        _seconds(percentile(result.seconds, 50)),
        _seconds(percentile(result.seconds, 90)),
        ("n/a" if result.answered else "—") if tokens is None else f"{tokens:,.0f}",  # n/a: none reported, as ask
        shown,
    ]


def table(summary: Summary) -> str:
    """The results as an aligned text table, then each preset's lift and each difference that holds."""
    metric = summary.results[0].metric if summary.results else "accuracy"
    header = ["system", metric, "95% CI", "n", "p50", "p90", "tokens/task", "cost/task"]
    rows = [header, *(_row(r) for r in summary.results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("─" * w for w in widths))
    for preset, best, average in summary.lifts:
        lines.append(f"{preset}: lift over its best member ({best.second}) {_delta(best)}")
        lines.append(f"{preset}: lift over its average member {_delta(average)}")
    for diff in summary.differences:
        lines.append(f"{diff.verdict()} — {_delta(diff)}")
    if summary.judge_cost:
        lines.append(f"judge: {format_cost(summary.judge_cost)} (not in the cost per task)")
    if (unjudged := summary.unjudged_line()) is not None:
        lines.append(f"judge: {unjudged}")
    lines += failed_lines(summary)
    return "\n".join(lines)


def failed_lines(summary: Summary, most: int = SHOWN_FAILURES) -> list[str]:
    """The tasks a system gave no answer to, each with why (the first `most`; results.jsonl has every one)."""
    failures = summary.failures
    if not failures:
        return []
    lines = [f"failed: {len(failures)} {'turn' if len(failures) == 1 else 'turns'} gave no answer (counted as wrong)"]
    lines += [f"  task {f.task} × {f.system}: {f.error}" for f in failures[:most]]
    if len(failures) > most:
        lines.append(f"  … and {len(failures) - most} more (results.jsonl in the report folder has each)")
    return lines


def _delta(diff: Difference) -> str:
    points = 100 * diff.delta
    low, high = 100 * diff.interval.low, 100 * diff.interval.high
    return f"{points:+.0f} points (95% CI {low:+.0f} to {high:+.0f}, n={diff.n})"


def plot(summary: Summary, *, width: int = PLOT_WIDTH, height: int = PLOT_HEIGHT) -> str:
    """Quality against cost per task, one point per system, drawn by plotext as plain text."""
    import plotext

    points = [(r.per_task(r.costs) or 0.0, r.quality, r.name) for r in summary.results if r.quality is not None]
    if not points:
        return ""
    figure = plotext.figure
    figure.clear()
    figure.plot_size(width, height)
    figure.theme("colorless")
    metric = summary.results[0].metric
    figure.title(f"{metric} against cost per task")
    figure.label("cost per task ($)", axis=0)
    figure.label(metric, axis=1)
    xs = [p[0] for p in points]
    low, high = min(xs), max(xs)
    spread = high - low if high > low else (high or 0.001)
    figure.ruler(axis=0).lim(max(0.0, low - 0.1 * spread), high + 0.5 * spread)
    figure.ruler(axis=1).lim(0.0, 1.05)
    places: dict[tuple[float, float], list[int]] = {}
    for number, (x, y, _name) in enumerate(points, 1):
        places.setdefault((x, y), []).append(number)
    for (x, y), numbers in places.items():  # systems at the same place share one point
        figure.draw(figure.text(x, y, "●" + ",".join(str(n) for n in numbers)))
    built = figure.build().string(colorless=True)
    figure.clear()
    key = "\n".join(f"  {n}: {name}" for n, (_x, _y, name) in enumerate(points, 1))
    return f"{built.rstrip()}\n{key}"


def write_report(
    folder: Path,
    *,
    run_id: str,
    spec: dict[str, Any],
    tasks: list[Task],
    names: list[str],
    answers: dict[tuple[str, str], dict[str, Any]],
    verdicts: dict[tuple[str, str], dict[str, Any]],
    summary: Summary,
) -> list[Path]:
    """The report folder's files; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    results = folder / "results.jsonl"
    with results.open("w", encoding="utf-8") as out:
        for task in tasks:
            line = {
                **task.as_json(),
                "answers": {name: answers[(task.id, name)] for name in names if (task.id, name) in answers},
                "verdicts": {key[1]: v for key, v in verdicts.items() if key[0] == task.id},
            }
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
    data = folder / "summary.json"
    data.write_text(json.dumps({"run": run_id, "spec": spec, **summary.as_json()}, indent=2) + "\n", encoding="utf-8")
    picture = plot(summary)
    chart = folder / "quality_vs_cost.txt"
    chart.write_text(picture + "\n", encoding="utf-8")
    markdown = folder / "report.md"
    markdown.write_text(_markdown(run_id, spec, summary, picture), encoding="utf-8")
    return [results, data, chart, markdown]


def _markdown(run_id: str, spec: dict[str, Any], summary: Summary, picture: str) -> str:
    lines = [
        f"# moa-chat eval {run_id}",
        "",
        f"Tasks: `{spec.get('tasks')}` · systems: {', '.join(r.name for r in summary.results if r.kind != 'member')}",
        "",
    ]
    metric = summary.results[0].metric if summary.results else "accuracy"
    lines += [
        f"| system | {metric} | 95% CI | n | failed | p50 | p90 | tokens/task | cost/task |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in summary.results:
        row = _row(r)
        lines.append(
            f"| {row[0]} | {row[1]} | {row[2]} | {r.n} | {r.failed} | {row[4]} | {row[5]} | {row[6]} | {row[7]} |"
        )
    lines.append("")
    for preset, best, average in summary.lifts:
        lines.append(
            f"- **{preset}**: lift over its best member ({best.second}) {_delta(best)}; "
            f"over its average member {_delta(average)}."
        )
    for diff in summary.differences:
        lines.append(f"- {diff.verdict()} — {_delta(diff)}.")
    if summary.judge_cost:
        lines.append(f"- The judge cost {format_cost(summary.judge_cost)}, not counted in the cost per task.")
    if (unjudged := summary.unjudged_line()) is not None:
        lines.append(f"- **{unjudged[:1].upper()}{unjudged[1:]}**: each one's `error` is in `results.jsonl`.")
    lines += ["", "A difference is called only when its 95 % interval leaves out zero (Newcombe).", ""]
    if summary.failures:
        lines += ["## Failed turns", "", *(f"- {line.strip()}" for line in failed_lines(summary)[1:]), ""]
    if picture:
        lines += ["## Quality against cost", "", "```", picture, "```", ""]
    lines += ["Every answer, score and verdict: `results.jsonl`; the figures: `summary.json`.", ""]
    return "\n".join(lines)
