"""`moa-chat eval`: run a task set against presets and baselines, and say which does better, with intervals.

The run is kept in the session store as it goes (`--resume RUN` continues one), the table goes to stdout
(or JSON with `--json`), the progress bar to stderr, and the report to a folder (`--report`, by default
`evals/RUN` in the data folder).

Exit status: 0 every turn answered; 1 some turns failed (each named under the table) or the budget stopped the
run; 2 a usage, task-file or configuration error; 130 Ctrl+C, 128 + N signal N (SIGTERM, SIGHUP), the run
then marked interrupted for `--resume`, as `ask` exits when stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import ConfigError
from .exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from .stopping import Signalled, exit_status, signals_raise

if TYPE_CHECKING:  # the run's modules load when a run starts, so `moa-chat --help` stays quick
    from ..eval.runner import EvalRunner, System
    from ..store.eval_runs import EvalRunStore

DEFAULT_CONCURRENCY = 4
DEFAULT_SEED = 1  # eval/answer_key.DEFAULT_SEED, without loading the run's modules for --help
STOP_WAIT = 10.0  # seconds the turns in flight get to end once cancelled (they end in well under one)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "tasks",
        metavar="TASKS",
        nargs="*",
        help="a JSONL or YAML task file, or a bundled set: arithmetic, multiple_choice, open_ended; "
        "or `show RUN [TASK]`: a stored run task by task, each system's reply and what was read from it",
    )
    parser.add_argument("--config", metavar="PATH", type=Path, default=argparse.SUPPRESS, help="config file to use")
    parser.add_argument(
        "--preset",
        metavar="NAME",
        action="append",
        default=argparse.SUPPRESS,
        help="a preset to measure; repeat to compare several",
    )
    parser.add_argument("--solo", action="store_true", help="also run each preset's aggregator alone")
    parser.add_argument(
        "--members",
        action="store_true",
        help="also run each preset's reference models alone, as --solo runs its aggregator",
    )
    parser.add_argument(
        "--baseline", metavar="PROVIDER:MODEL", action="append", default=[], help="also run this single model"
    )
    parser.add_argument("--judge", metavar="PROVIDER:MODEL", help="the judge for tasks with no check")
    parser.add_argument(
        "--against",
        metavar="SYSTEM",
        help="what the judge compares answers with (default: the first --baseline, else the first preset's "
        "aggregator alone with --solo, else the first preset's first member)",
    )
    parser.add_argument("--rubric", action="store_true", help="the judge scores each answer against a rubric instead")
    parser.add_argument("--concurrency", metavar="N", type=int, help=f"turns at once (default {DEFAULT_CONCURRENCY})")
    parser.add_argument("--provider-concurrency", metavar="N", type=int, help="turns at once per provider")
    parser.add_argument("--max-cost", metavar="DOLLARS", type=float, help="stop before the run's cost exceeds this")
    parser.add_argument("--limit", metavar="N", type=int, help="only the first N tasks")
    parser.add_argument("--repeat", metavar="N", type=int, help="run every system N times and report the spread")
    parser.add_argument(
        "--seed",
        metavar="N",
        help=f"shuffles multiple-choice options and splits tasks in halves (default {DEFAULT_SEED}; "
        "`none`: the file's order)",
    )
    parser.add_argument(
        "--primary",
        metavar="SYSTEM",
        help="the one system each preset is compared with first (default: its best single model)",
    )
    parser.add_argument(
        "--allow-path",
        metavar="PATH",
        action="append",
        default=[],
        help="let tasks attach PATH (a file, or any file in a folder) outside the task file's folder; repeatable",
    )
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    parser.add_argument(
        "--report", metavar="DIR", type=Path, help="the report folder (default: evals/RUN in the data folder)"
    )
    parser.add_argument("--resume", metavar="RUN", help="continue a run (its id, the start of one, or `last`)")
    parser.add_argument("--runs", action="store_true", help="list the stored eval runs, newest first")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")


def run_eval(args: argparse.Namespace) -> int:
    from ..store import StoreError

    try:
        return _run(args)
    except (ConfigError, StoreError) as exc:
        print(f"moa-chat: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _spec(args: argparse.Namespace, store: EvalRunStore) -> tuple[dict[str, Any], str | None]:
    """What the run does: from the command line, or as stored for --resume (whose command line may change
    only the concurrency and the budget)."""
    if args.resume:
        stored = store.run(args.resume)
        spec = dict(stored.spec)
        for key in ("concurrency", "provider_concurrency", "max_cost"):
            if getattr(args, key) is not None:
                spec[key] = getattr(args, key)
        return spec, stored.id
    if not args.tasks:
        raise ConfigError(
            "name a task file or a bundled set (arithmetic, multiple_choice, open_ended), or --resume RUN"
        )
    if (args.rubric or args.against) and not args.judge:
        raise ConfigError(f"{'--rubric' if args.rubric else '--against'} is for the judge: give --judge PROVIDER:MODEL")
    presets = getattr(args, "preset", None)
    tasks = args.tasks if not Path(args.tasks).exists() else str(Path(args.tasks).resolve())
    config = getattr(args, "config", None)
    return {
        "tasks": tasks,
        "presets": [presets] if isinstance(presets, str) else list(presets or []),
        "solo": args.solo,
        "baselines": list(args.baseline),
        "judge": args.judge,
        "against": args.against,
        "rubric": args.rubric,
        "limit": args.limit,
        "members": args.members,
        "repeats": max(1, args.repeat or 1),
        "seed": _seed(args.seed),
        "primary_named": args.primary,
        "config": str(Path(config).resolve()) if config else None,
        "concurrency": args.concurrency or DEFAULT_CONCURRENCY,
        "provider_concurrency": args.provider_concurrency,
        "max_cost": args.max_cost,
        "allow_paths": [str(Path(path).expanduser().resolve()) for path in args.allow_path],
    }, None


def _seed(text: str | None) -> int | None:
    if text is None:
        return DEFAULT_SEED
    if text.strip().lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"--seed {text!r}: expected a whole number, or `none` for the file's order") from None


def _against(spec: dict[str, Any], systems: list[System]) -> str | None:
    from ..eval.runner import member_names

    if spec.get("against"):
        names = [s.name for s in systems] + [m for s in systems if s.kind == "preset" for m in member_names(s.preset)]
        if spec["against"] not in names:
            raise ConfigError(f"--against {spec['against']!r}: not a system of this run; it has {', '.join(names)}")
        return str(spec["against"])
    baselines = [s for s in systems if s.kind == "baseline"]
    solos = [s for s in systems if s.kind == "solo"]
    if baselines:
        return baselines[0].name
    if solos:
        return solos[0].name
    members = member_names(systems[0].preset)
    return members[0] if members else None


def _list_runs() -> int:
    import time

    from ..store.eval_runs import EvalRunStore

    store = EvalRunStore()
    for run in store.runs():
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.created))
        kept = len(store.results(run.id, "answer"))
        presets = ", ".join(run.spec.get("presets") or [])
        print(f"{run.id}  {when}  {run.status:<11}  {kept:>5} results  {run.spec.get('tasks')} × {presets}")
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    if args.runs:
        return _list_runs()
    words = list(args.tasks or [])
    if words[:1] == ["show"] and not Path("show").exists():
        if not 2 <= len(words) <= 3:
            raise ConfigError("eval show RUN [TASK]: name a run (its id, the start of one, or `last`)")
        from .eval_show import show

        return show(words[1], words[2] if len(words) == 3 else None)
    if len(words) > 1:
        raise ConfigError(f"one task file at a time, got {len(words)}: {', '.join(words)}")
    args.tasks = words[0] if words else None
    from ..config import load_config
    from ..config.paths import data_home
    from ..config.pricing import format_cost
    from ..engine import clock
    from ..eval.answer_key import arranged
    from ..eval.judge import Judge
    from ..eval.progress import ProgressBar
    from ..eval.report import plot, table, write_report
    from ..eval.results import summarise
    from ..eval.runner import EvalRunner, systems_for
    from ..eval.systems import job_name
    from ..eval.tasks import load_tasks
    from ..eval.verdicts import named_primary
    from ..store.eval_runs import EvalRunStore
    from ..text.inert import inert

    store = EvalRunStore()
    spec, run_id = _spec(args, store)
    config = load_config(spec.get("config"))
    task_set = load_tasks(spec["tasks"])
    tasks = task_set.tasks[: spec["limit"]] if spec.get("limit") else task_set.tasks
    tasks = arranged(tasks, spec.get("seed"))  # an older run's spec has no seed: the file's order
    names = spec["presets"] or [config.default_preset or "demo"]
    presets = [config.preset(name) for name in names]
    systems = systems_for(
        config, presets, solo=spec["solo"], baselines=spec["baselines"], members=bool(spec.get("members"))
    )
    repeats = int(spec.get("repeats") or 1)
    if "primary" not in spec:  # named before the run, and kept: a resumed run compares what it said it would
        spec["primary"] = named_primary(systems, spec.get("primary_named"))
    judge = Judge(config, spec["judge"]) if spec.get("judge") else None
    against = _against(spec, systems) if judge is not None else None
    if any(t.judged for t in tasks) and judge is None and not args.quiet:
        print("moa-chat: tasks with no check are answered but not scored: give --judge PROVIDER:MODEL", file=sys.stderr)
    if run_id is None:
        run_id = store.create(spec)
    bar = ProgressBar(sys.stderr, enabled=not args.quiet, terminal=_is_terminal(sys.stderr))
    runner = EvalRunner(
        config,
        tasks,
        systems,
        concurrency=int(spec.get("concurrency") or DEFAULT_CONCURRENCY),
        provider_cap=spec.get("provider_concurrency"),
        max_cost=spec.get("max_cost"),
        store=store,
        run_id=run_id,
        judge=judge,
        against=against,
        rubric=bool(spec.get("rubric")),
        on_progress=bar,
        repeats=repeats,
        allowed_paths=[Path(path) for path in spec.get("allow_paths") or ()],
    )
    if not args.quiet:
        what = ", ".join(s.name for s in systems)
        times = f" × {repeats} repeats" if repeats > 1 else ""
        print(
            inert(f"moa-chat: eval {run_id}: {len(tasks)} tasks from {task_set.name} × {what}{times}"), file=sys.stderr
        )
        for preset, against_ in spec["primary"].items():
            print(inert(f"moa-chat: primary comparison: {preset} vs {' or '.join(against_)}"), file=sys.stderr)
        if args.resume:
            print(_resumed(runner), file=sys.stderr)
    started = clock.monotonic()
    bar.start()
    signalled = _run_interruptibly(runner)
    interrupted = signalled is not None
    bar.end()
    status = "interrupted" if interrupted else "budget" if runner.budget_stopped else "done"
    store.set_status(run_id, status)
    wall = store.add_session(run_id, clock.monotonic() - started, status)
    summary = summarise(
        tasks,
        systems,
        runner.answers,
        runner.verdicts,
        against=against,
        rubric=bool(spec.get("rubric")),
        repeats=repeats,
        primary=spec["primary"],
        seed=spec.get("seed"),
        status=status,
        seconds=wall,
    )
    names_all = [job_name(s.name, r) for r in range(1, repeats + 1) for s in systems]
    folder = args.report or data_home() / "evals" / run_id
    write_report(
        folder,
        run_id=run_id,
        spec=spec,
        tasks=tasks,
        names=names_all,
        answers=runner.answers,
        verdicts=runner.verdicts,
        summary=summary,
    )
    if args.json:
        out = {"run": run_id, "status": status, "report": str(folder), **summary.as_json()}
        sys.stdout.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(inert(table(summary)) + "\n")
        picture = plot(summary)
        if picture:
            sys.stdout.write("\n" + picture + "\n")
    sys.stdout.flush()
    seconds = clock.monotonic() - started
    if not args.quiet:
        spent = format_cost(runner.snapshot.cost)
        print(f"moa-chat: {status} in {seconds:.1f}s · {spent} · report {folder}", file=sys.stderr)
    if signalled is not None:
        how = "interrupted" if signalled == signal.SIGINT else f"stopped by {signal.Signals(signalled).name}"
        print(f"moa-chat: {how}; `moa-chat eval --resume {run_id}` continues it", file=sys.stderr)
        return exit_status(signalled)
    if runner.budget_stopped:
        print(
            f"moa-chat: stopped before exceeding --max-cost {format_cost(spec['max_cost'])}; "
            f"`moa-chat eval --resume {run_id} --max-cost MORE` continues it",
            file=sys.stderr,
        )
        return EXIT_FAILED
    failed = len(summary.failures)
    if failed:
        print(
            f"moa-chat: {failed} {'turn' if failed == 1 else 'turns'} failed and gave no answer (named under the "
            "table; counted as wrong)",
            file=sys.stderr,
        )
    if (unjudged := summary.unjudged_line()) is not None:
        # Scores are missing: the run is not whole, whatever the table shows.
        print(inert(f"moa-chat: error: {unjudged}; each one's error is in {folder}/results.jsonl"), file=sys.stderr)
    return EXIT_FAILED if failed or unjudged is not None else EXIT_OK


def _resumed(runner: EvalRunner) -> str:
    """What a resumed run kept and what is left: "moa-chat: resumed: 37 of 64 answers kept, 27 to run"."""
    from ..eval.systems import job_name

    asked = [
        (task.id, job_name(system.name, repeat))
        for repeat in range(1, runner.repeats + 1)
        for task in runner.tasks
        for system in runner.systems
    ]
    total, kept = len(asked), sum(key in runner.answers for key in asked)
    line = f"moa-chat: resumed: {kept} of {total} answers kept, {total - kept} to run"
    if runner.verdicts:
        line += f"; {len(runner.verdicts)} judge verdicts kept"
    return line


def _is_terminal(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except (OSError, ValueError):
        return False


def _run_interruptibly(runner: EvalRunner) -> int | None:
    """Run on a worker so Ctrl+C, SIGTERM and SIGHUP (the terminal closed) cancel the turns in flight cleanly;
    the signal's number when one came (SIGINT for Ctrl+C), None when the run ended on its own."""
    done = threading.Event()

    def work() -> None:
        try:
            runner.run()
        finally:
            done.set()

    threading.Thread(target=work, name="moa-eval", daemon=True).start()
    with signals_raise():
        try:
            while not done.wait(0.2):
                pass
            return None
        except (KeyboardInterrupt, Signalled) as stop:
            runner.interrupt()
            with contextlib.suppress(KeyboardInterrupt, Signalled):  # a second one: stop waiting
                done.wait(STOP_WAIT)
            return stop.number if isinstance(stop, Signalled) else int(signal.SIGINT)
