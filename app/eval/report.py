"""What a run shows: the terminal table and its verdicts, the quality-against-cost picture (plotext), and the
report folder (results.jsonl with every answer, score and verdict; summary.json; report.md; report.html, each
task's replies side by side; the picture as text)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..config.pricing import format_cost
from .html_report import html_report
from .paired import Comparison
from .results import Summary, SystemResult
from .stats import percentile
from .tasks import Task

PLOT_WIDTH, PLOT_HEIGHT = 72, 20
PARTIAL = "+: some calls reported no tokens (or had no price), so the figure leaves them out"
SHOWN_FAILURES = 10  # failed turns listed under the table


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}s"


def _tokens(result: SystemResult) -> str:
    tokens = result.per_task(result.tokens)
    if tokens is None:
        return "n/a" if result.answered else "—"  # n/a: no call reported any, as `ask` says
    return f"{tokens:,.0f}" + ("" if result.tokens_complete else "+")


def _cost(result: SystemResult) -> str:
    cost = result.per_task(result.costs)
    if cost is None:
        return "n/a" if result.answered else "—"
    return format_cost(cost) + ("" if result.cost_complete else "+")


def _n(result: SystemResult) -> str:
    shown = f"{result.n}"
    if result.kept < result.expected:
        shown += f" ({result.kept} of {result.expected} answers)"
    if result.failed:
        shown += f" ({result.failed} failed)"
    return shown


def _spread(result: SystemResult) -> str:
    qualities = result.repeat_qualities
    if len(qualities) < 2:
        return "—"
    return f"{_percent(min(qualities))}–{_percent(max(qualities))}"


def _layers(result: SystemResult) -> str:
    layers = result.per_task(result.layers)
    return "—" if layers is None else f"{layers:.1f}"


def _columns(summary: Summary) -> list[str]:
    metric = summary.results[0].metric if summary.results else "accuracy"
    header = [
        "system",
        metric,
        "95% CI",
        "n",
        "unreadable",
        "p50",
        "p90",
        "tokens/task",
        "cost/task",
        "layers",
    ]
    if summary.repeats > 1:
        header.insert(3, f"{summary.repeats} repeats")
    return header


def _row(summary: Summary, result: SystemResult) -> list[str]:
    interval = result.interval
    row = [
        result.name,
        _percent(result.quality),
        f"{_percent(interval.low)}–{_percent(interval.high)}" if result.n else "—",
        _n(result),
        f"{result.unreadable}" if result.answered else "—",
        _seconds(percentile(result.seconds, 50)),
        _seconds(percentile(result.seconds, 90)),
        _tokens(result),
        _cost(result),
        _layers(result),
    ]
    if summary.repeats > 1:
        row.insert(3, _spread(result))
    return row


def _delta(comparison: Comparison) -> str:
    points = 100 * comparison.delta
    low, high = 100 * comparison.interval.low, 100 * comparison.interval.high
    p = f"p={comparison.p:.3g}"
    if comparison.family != "primary" and comparison.adjusted is not None:
        p += f", Holm p={comparison.adjusted:.3g}"
    text = f"{points:+.0f} points (paired 95% CI {low:+.0f} to {high:+.0f}, {p}, n={comparison.n})"
    if comparison.repeats_holding is not None:
        held, of = comparison.repeats_holding
        text += f"; holds in {held} of {of} repeats alone"
    return text


def verdict_lines(summary: Summary) -> list[str]:
    """The lines under the table: the floor a constant answer sets, the primary verdicts, the lifts, the rest."""
    lines = [f"a constant answer: {baseline.describe()}" for baseline in summary.constants]
    echoed = [f"{r.name} {r.echoed} of {r.answered}" for r in summary.results if r.echoed]
    if echoed:
        lines.append(f"replies that copied moa-chat's markers (taken out before reading): {', '.join(echoed)}")
    primary = summary.primary
    if len(primary) > 1:
        lines.append(f"primary comparisons (named before the run; Holm-corrected over {len(primary)}):")
    elif primary:
        lines.append("primary comparison (named before the run):")
    for comparison in primary:
        note = f" [{comparison.note}]" if comparison.note else ""
        lines.append(f"  {comparison.verdict()} — {_delta(comparison)}{note}")
    for lift in summary.lifts:
        lines.append(
            f"{lift.preset}: lift over its best member as a reference ({lift.best.second}, chosen on the other half "
            f"of the tasks) {_delta(lift.best)}"
        )
        lines.append(f"{lift.preset}: lift over its average member {_delta(lift.average)}")
    lifted = {id(c) for lift in summary.lifts for c in (lift.best, lift.average)}
    rest = [c for c in summary.secondary if id(c) not in lifted]
    if rest:
        count = len(summary.secondary)
        lines.append(f"the other comparisons (Holm-corrected over {count}, with the lifts above):")
    for comparison in rest:
        lines.append(f"  {comparison.verdict()} — {_delta(comparison)}")
    return lines


def table(summary: Summary) -> str:
    """The results as an aligned text table, then what the run can and cannot say."""
    header = _columns(summary)
    rows = [header, *(_row(summary, r) for r in summary.results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("─" * w for w in widths))
    if any((not r.tokens_complete and r.tokens) or not r.cost_complete for r in summary.results):
        lines.append(PARTIAL)
    lines += verdict_lines(summary)
    if not summary.whole:
        kept, asked = summary.answers
        lines.append(f"status: {summary.status}, {kept} of {asked} answers: the figures are of what finished")
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
    """The report folder's files; returns their paths. `names`: the job names (each system, each repeat)."""
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
    page = folder / "report.html"
    page.write_text(html_report(run_id, spec, tasks, names, answers, summary), encoding="utf-8")
    return [results, data, chart, markdown, page]


def _markdown(run_id: str, spec: dict[str, Any], summary: Summary, picture: str) -> str:
    kept, asked = summary.answers
    wall = f" · wall time {summary.seconds:.0f}s" if summary.seconds is not None else ""
    seed = spec.get("seed")
    lines = [
        f"# moa-chat eval {run_id}",
        "",
        f"Tasks: `{spec.get('tasks')}` · systems: {', '.join(r.name for r in summary.results if r.kind != 'member')}",
        "",
        f"Status: **{summary.status}** · {kept} of {asked} answers{wall} · repeats: {summary.repeats}"
        f" · seed: {'none (the file order)' if seed is None else seed}",
        "",
    ]
    header = _columns(summary)
    lines += ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for r in summary.results:
        lines.append("| " + " | ".join(_row(summary, r)) + " |")
    lines.append("")
    if any((not r.tokens_complete and r.tokens) or not r.cost_complete for r in summary.results):
        lines += [PARTIAL, ""]
    lines += [f"- {line.strip()}" for line in verdict_lines(summary)]
    if summary.judge_cost:
        lines.append(f"- The judge cost {format_cost(summary.judge_cost)}, not counted in the cost per task.")
    if (unjudged := summary.unjudged_line()) is not None:
        lines.append(f"- **{unjudged[:1].upper()}{unjudged[1:]}**: each one's `error` is in `results.jsonl`.")
    lines += [
        "",
        "Each comparison is paired (the same tasks, both systems): an exact sign-flip test (McNemar's on 0/1 "
        "scores) and Newcombe's paired interval. A difference is called only when its p-value, corrected by "
        "Holm's method over its family, is below 0.05: the primary comparisons named before the run are one "
        "family, everything else another.",
        "",
    ]
    if summary.failures:
        lines += ["## Failed turns", "", *(f"- {line.strip()}" for line in failed_lines(summary)[1:]), ""]
    if picture:
        lines += ["## Quality against cost", "", "```", picture, "```", ""]
    lines += [
        "Every answer, score and verdict: `results.jsonl`; each task's replies side by side: `report.html`; "
        "the figures: `summary.json`.",
        "",
    ]
    return "\n".join(lines)
