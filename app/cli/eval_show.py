"""`moa-chat eval show RUN [TASK]`: a stored run, task by task. Without TASK, every task against every system
(✓ right, ✗ wrong, ? unreadable, ! failed); with TASK, that task's prompt and each system's reply, with what was
read from it and how. The same as the run's report.html, in the terminal."""

from __future__ import annotations

import sys
from typing import Any

from ..text.inert import inert
from .exit_codes import EXIT_OK, EXIT_USAGE


def _prompts(spec: dict[str, Any]) -> dict[str, str]:
    """Each task's prompt as it was sent, when the task file can still be read (else none)."""
    from ..config import ConfigError
    from ..eval.answer_key import arranged
    from ..eval.tasks import load_tasks

    try:
        tasks = arranged(load_tasks(spec["tasks"]).tasks, spec.get("seed"))
    except ConfigError:
        return {}
    return {task.id: task.text() for task in tasks}


KINDS = ("preset", "solo", "alone", "baseline")


def _order(job: str, answers: dict[tuple[str, str], dict[str, Any]]) -> tuple[int, int, str]:
    """Repeat by repeat, presets first, then single models, as the table lists them."""
    record = next(r for (_, j), r in answers.items() if j == job)
    kind = record.get("kind")
    return int(record.get("repeat") or 1), KINDS.index(kind) if kind in KINDS else len(KINDS), job


def show(run: str, task: str | None) -> int:
    from ..eval.results import MARKS, answer_state
    from ..store.eval_runs import EvalRunStore

    store = EvalRunStore()
    stored = store.run(run)
    answers = store.results(stored.id, "answer")
    jobs = sorted(dict.fromkeys(job for _, job in answers), key=lambda job: _order(job, answers))
    tasks = list(dict.fromkeys(t for t, _ in answers))
    out = sys.stdout
    if task is None:
        width = max((len(t) for t in tasks), default=4)
        out.write(inert(f"eval {stored.id} · {stored.status} · {stored.spec.get('tasks')}") + "\n")
        for number, job in enumerate(jobs, 1):
            out.write(inert(f"  {number}: {job}") + "\n")
        out.write(" " * width + "  " + " ".join(f"{n:>2}" for n in range(1, len(jobs) + 1)) + "\n")
        for task_id in tasks:
            marks = [MARKS[answer_state(answers[(task_id, j)])] if (task_id, j) in answers else " " for j in jobs]
            out.write(inert(task_id.ljust(width)) + "  " + " ".join(f"{m:>2}" for m in marks) + "\n")
        out.write("✓ right · ✗ wrong · ? unreadable (scored wrong) · ! failed\n")
        return EXIT_OK
    if task not in tasks:
        print(f"moa-chat: error: run {stored.id} has no task {task!r}; it has {', '.join(tasks)}", file=sys.stderr)
        return EXIT_USAGE
    prompt = _prompts(stored.spec).get(task)
    out.write(inert(f"task {task} of eval {stored.id}") + "\n")
    if prompt is not None:
        out.write("\n" + inert(prompt) + "\n")
    for job in jobs:
        record = answers.get((task, job))
        if record is None:
            continue
        for name, answer in [(job, record), *((m["name"], m) for m in record.get("members") or [])]:
            state = answer_state(answer)
            read = answer.get("extracted")
            how = answer.get("read") or answer.get("error") or ""
            out.write(f"\n── {MARKS[state]} {inert(name)}: {state}, read {read if read is not None else 'nothing'}")
            out.write(inert(f" ({how})") if how else "")
            out.write("\n" + inert(str(answer.get("answer") or "")).rstrip() + "\n")
    return EXIT_OK
