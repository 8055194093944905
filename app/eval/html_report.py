"""report.html: a run readable in a browser. A matrix of every task against every system (right, wrong,
unreadable, failed), each cell a link to the task, and per task every system's reply side by side with what
was read from it and how, so a score can be checked against the words that earned it. One file, no script."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from .results import MARKS, Summary, answer_state
from .tasks import Task

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em; color: #1d1d1f; background: #fff; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 2em; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 4px 6px; vertical-align: top; }
th { background: #f3f3f3; text-align: left; }
.matrix td { text-align: center; } .matrix td a { text-decoration: none; color: inherit; display: block; }
.matrix th { font-size: 0.8em; min-width: 3.5em; max-width: 10em; overflow-wrap: anywhere; }
.matrix tr > th:first-child { white-space: nowrap; }
.right { background: #dff3e0; } .wrong { background: #fbe0e0; } .unreadable { background: #fff1c9; }
.failed { background: #e6e6e6; } .unscored { background: #f7f7f7; }
.replies { display: flex; gap: 8px; overflow-x: auto; align-items: flex-start; }
.reply { flex: 0 0 22em; border: 1px solid #ccc; border-radius: 6px; padding: 6px; }
.reply h3 { font-size: 0.95em; margin: 0 0 4px; } .read { font-size: 0.9em; margin-bottom: 4px; }
pre { white-space: pre-wrap; word-break: break-word; font: 12px/1.4 ui-monospace, monospace; margin: 0; }
.prompt { background: #f7f7f7; padding: 6px; border-radius: 6px; }
"""


def _columns(names: list[str], answers: Mapping[tuple[str, str], Mapping[str, Any]], tasks: list[Task]) -> list[str]:
    """Every job (a system in a repeat), each followed by its preset's members as references."""
    columns: list[str] = []
    for name in names:
        columns.append(name)
        for task in tasks:
            record = answers.get((task.id, name))
            if record is not None and record.get("members"):
                columns += [f"{name}\0{m['name']}" for m in record["members"]]
                break
    return columns


def _record(answers: Mapping[tuple[str, str], Mapping[str, Any]], task: str, column: str) -> Mapping[str, Any] | None:
    job, _, member = column.partition("\0")
    record = answers.get((task, job))
    if record is None or not member:
        return record
    return next((m for m in record.get("members") or [] if m["name"] == member), None)


def _title(column: str) -> str:
    job, _, member = column.partition("\0")
    return member or job


def html_report(
    run_id: str,
    spec: Mapping[str, Any],
    tasks: list[Task],
    names: list[str],
    answers: Mapping[tuple[str, str], Mapping[str, Any]],
    summary: Summary,
) -> str:
    e = html.escape
    columns = _columns(names, answers, tasks)
    kept, asked = summary.answers
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>moa-chat eval {e(run_id)}</title><style>{STYLE}</style></head><body>",
        f"<h1>moa-chat eval {e(run_id)}</h1>",
        f"<p>Tasks: <code>{e(str(spec.get('tasks')))}</code> · status: <b>{e(summary.status)}</b> · "
        f"{kept} of {asked} answers · repeats: {summary.repeats} · seed: {e(str(spec.get('seed')))}</p>",
        "<p>✓ right · ✗ wrong · ? unreadable (no answer the check could trust; scored wrong) · ! failed. "
        "A cell links to its task.</p>",
        '<table class="matrix"><tr><th>task</th>',
        *(f"<th>{e(_title(c))}</th>" for c in columns),
        "</tr>",
    ]
    for task in tasks:
        out.append(f'<tr><th><a href="#{e(task.id)}">{e(task.id)}</a></th>')
        for column in columns:
            record = _record(answers, task.id, column)
            if record is None:
                out.append("<td></td>")
                continue
            state = answer_state(record)
            out.append(f'<td class="{state}"><a href="#{e(task.id)}" title="{state}">{MARKS[state]}</a></td>')
        out.append("</tr>")
    out.append("</table>")
    for task in tasks:
        check = task.check.describe() if task.check is not None else "judged"
        out += [
            f'<h2 id="{e(task.id)}">{e(task.id)} <small>({e(check)})</small></h2>',
            f'<div class="prompt"><pre>{e(task.text())}</pre></div>',
            '<div class="replies">',
        ]
        for column in columns:
            record = _record(answers, task.id, column)
            if record is None:
                continue
            state = answer_state(record)
            read = record.get("extracted")
            how = record.get("read") or record.get("error") or ""
            out += [
                f'<div class="reply {state}"><h3>{MARKS[state]} {e(_title(column))}</h3>',
                f'<div class="read">read: <b>{e(str(read)) if read is not None else "nothing"}</b>'
                f"{' — ' + e(str(how)) if how else ''}</div>",
                f"<pre>{e(str(record.get('answer') or ''))}</pre></div>",
            ]
        out.append("</div>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
