"""An eval run: every task as a fresh turn of every system, concurrently, each result kept as it arrives.

A system is a preset (a MoA turn, whose first-layer references are scored too, as their models' single
answers), a preset's aggregator alone (`--solo`), or any one model (`--baseline`). Each task runs in a
new conversation, with tools off unless the task asks for them. Turns run on `concurrency` worker threads,
at most `provider_cap` at a time per provider (limiter.py); a 429 slows its provider, and the turn asks again
as any turn does (`max_retries`, `max_retry_wait`), so a task makes at most the requests a turn makes.
Before each turn its cost is reserved against `max_cost` (`Budget`). Judged tasks are judged once every
answer is in.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Config, Preset
from ..engine import CallRecord, CancelToken, clock
from ..engine.cost import estimate_turn
from ..llm import CallLLM, call_llm_request
from ..llm.messages import user
from ..providers import ServerStarter, start_server
from ..session import ChatSession, TurnResult
from ..session.attachments import AttachmentError, attach, read_attachment
from ..store.eval_runs import EvalRunStore
from .budget import Budget
from .judge import Judge
from .limiter import ProviderLimiter
from .systems import System, job_name, member_names, one_at_a_time, systems_for
from .tasks import Task

__all__ = ["EvalRunner", "Snapshot", "System", "answer_record", "member_names", "one_at_a_time", "systems_for"]

ANSWER, JUDGE = "answer", "judge"


@dataclass
class Snapshot:
    """How far a run has got, for the progress bar."""

    total: int
    done: int = 0
    failed: int = 0
    rate_limited: int = 0  # 429s the providers answered
    cost: float = 0.0
    judge_cost: float = 0.0
    started: float = field(default_factory=clock.monotonic)
    phase: str = "answers"


@dataclass
class _Job:
    task: Task
    system: System
    repeat: int = 1  # 1..repeats: the same task and system asked again (--repeat)


class EvalRunner:
    def __init__(
        self,
        config: Config,
        tasks: list[Task],
        systems: list[System],
        *,
        concurrency: int = 4,
        provider_cap: int | None = None,
        max_cost: float | None = None,
        store: EvalRunStore | None = None,
        run_id: str | None = None,
        judge: Judge | None = None,
        against: str | None = None,
        rubric: bool = False,
        call: CallLLM = call_llm_request,
        servers: ServerStarter | None = start_server,
        on_progress: Callable[[Snapshot], None] | None = None,
        repeats: int = 1,
        allowed_paths: Sequence[Path] = (),
    ) -> None:
        """`allowed_paths`: files and folders outside a task file's folder its tasks may attach (--allow-path)."""
        self.config, self.tasks, self.systems = config, tasks, systems
        self.repeats = max(1, repeats)
        self.allowed_paths = tuple(allowed_paths)
        self.concurrency = max(1, concurrency)
        self.limiter = ProviderLimiter(
            provider_cap or self.concurrency,
            ceilings=one_at_a_time(systems),
            longest_wait=lambda provider: config.limits(provider).max_retry_wait,
        )
        self.max_cost = max_cost
        self.store, self.run_id = store, run_id
        self.judge, self.against, self.rubric = judge, against, rubric
        self._call, self._servers = call, servers
        self._on_progress = on_progress
        self.cancel = CancelToken()
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self.budget = Budget(max_cost, self.stop)
        self.answers: dict[tuple[str, str], dict[str, Any]] = {}
        self.verdicts: dict[tuple[str, str], dict[str, Any]] = {}
        if store is not None and run_id is not None:
            self.answers = store.results(run_id, ANSWER)
            self.verdicts = store.results(run_id, JUDGE)
        self.snapshot = Snapshot(total=0)

    # ------------------------------------------------------------------ the run

    @property
    def budget_stopped(self) -> bool:
        return self.budget.stopped

    def interrupt(self) -> None:
        """Stop taking work and cancel the turns in flight (Ctrl+C, a signal): nothing unfinished is kept, and
        every wait ends at once (a provider's pause, a turn waiting for the budget)."""
        self.stop.set()
        self.cancel.cancel()
        self.limiter.wake()
        self.budget.wake()

    def run(self) -> None:
        jobs = [
            _Job(t, s, repeat=r)
            for r in range(1, self.repeats + 1)  # each repeat whole before the next: a stopped run has whole ones
            for t in self.tasks
            for s in self.systems
            if (t.id, job_name(s.name, r)) not in self.answers
        ]
        self.snapshot = Snapshot(total=len(jobs))
        self.snapshot.cost = sum(float(r.get("cost") or 0.0) for r in self.answers.values())
        self.budget.spent = self.snapshot.cost
        for record in self.answers.values():  # a resumed run's turns say what one costs
            if record.get("cost") is not None and record.get("status") == "ok":
                self.budget.observe(str(record["system"]), float(record["cost"]))
        self._report()
        self._pool(jobs, self._answer_job)
        if self.store is not None and self.run_id is not None:
            self.answers = self.store.results(self.run_id, ANSWER)  # whole again, texts included
        if self.judge is not None and not self.stop.is_set():
            pending = self._judge_jobs()
            self.snapshot.phase, self.snapshot.total, self.snapshot.done = "judge", len(pending), 0
            self._pool(pending, self._judge_job)
        self._report()

    def _pool(self, jobs: list[Any], work: Callable[[Any, queue.Queue[Any]], None]) -> None:
        pending: queue.Queue[Any] = queue.Queue()
        for job in jobs:
            pending.put(job)

        def worker() -> None:
            while not self.stop.is_set():
                try:
                    job = pending.get_nowait()
                except queue.Empty:
                    return
                work(job, pending)

        threads = [
            threading.Thread(target=worker, name=f"moa-eval-{n}", daemon=True)
            for n in range(min(self.concurrency, len(jobs)))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _report(self) -> None:
        self.snapshot.rate_limited = sum(self.limiter.rate_limits.values())
        if self._on_progress is not None:
            self._on_progress(self.snapshot)

    # ------------------------------------------------------------------ answers

    def _answer_job(self, job: _Job, _pending: queue.Queue[_Job]) -> None:
        task, system = job.task, job.system
        try:
            content = _content(task, self.allowed_paths)
        except AttachmentError as exc:
            self._keep_answer(job, _failed_record(task, system, str(exc), job.repeat))
            return
        preset = system.preset if task.tools else dataclasses.replace(system.preset, tools=())
        worst = estimate_turn(self.config, preset, [user(content)], solo=system.solo).dollars
        reserved = self.budget.reserve(system.name, worst)
        if reserved is None:
            return
        providers = {preset.aggregator.provider} if system.solo else preset.providers
        if not self.limiter.acquire(providers, self.stop):
            self.budget.release(system.name, reserved, None)
            return
        limited = threading.Event()
        try:
            result = self._turn(preset, content, system.solo, limited, task.extractor)
        finally:
            self.limiter.release(providers, rate_limited=limited.is_set())
        cost = result.ledger.cost()
        self.budget.release(system.name, reserved, cost if result.status == "ok" else None, spent=cost or 0.0)
        with self._lock:
            self.snapshot.cost = self.budget.spent
        if result.status == "cancelled":
            return  # not kept: --resume runs it again
        self._keep_answer(job, answer_record(task, system, result, job.repeat))

    def _turn(
        self,
        preset: Preset,
        content: str,
        solo: bool,
        limited: threading.Event,
        extractor: Callable[[str], str | None] | None,
    ) -> TurnResult:
        call = self.limiter.wrap(self._call, self.stop, limited.set)
        # `layers: auto` compares the references' answers as the task's check reads them.
        session = ChatSession(self.config, preset, call=call, servers=self._servers, answer_extractor=extractor)
        token = self.cancel.child()
        try:
            return session.send(content, cancel=token, solo=solo)
        finally:
            token.release()  # the run's token keeps no finished turn (and what it holds) alive
            session.close()

    def _keep_answer(self, job: _Job, record: dict[str, Any]) -> None:
        key = (job.task.id, job_name(job.system.name, job.repeat))
        if self.store is not None and self.run_id is not None:
            self.store.add(self.run_id, ANSWER, *key, record)
            record = _without_texts(record)  # the store has them: a long run's memory stays flat
        with self._lock:
            self.answers[key] = record
            self.snapshot.done += 1
            self.snapshot.failed += record["status"] != "ok"
        self._report()

    # ------------------------------------------------------------------ the judge

    def answer_of(self, task_id: str, name: str, repeat: int = 1) -> str | None:
        """What a system or a preset's member answered a task (None: no usable answer)."""
        record = self.answers.get((task_id, job_name(name, repeat)))
        if record is not None:
            return str(record["answer"]) if record["status"] == "ok" else None
        preset, _, _ = name.partition("/")
        parent = self.answers.get((task_id, job_name(preset, repeat)))
        for member in (parent or {}).get("members", []):
            if member["name"] == name:
                return str(member["answer"]) if member["status"] == "ok" else None
        return None

    def judged_names(self) -> list[str]:
        names = []
        for system in self.systems:
            names.append(system.name)
            if system.kind == "preset":
                names += member_names(system.preset)
        return names

    def _judge_jobs(self) -> list[tuple[Task, str, int]]:
        names = self.judged_names()
        return [
            (task, name, repeat)
            for repeat in range(1, self.repeats + 1)
            for task in self.tasks
            if task.judged
            for name in names
            if (task.id, job_name(name, repeat)) not in self.verdicts and (self.rubric or name != self.against)
        ]

    def _judge_job(self, job: tuple[Task, str, int], _pending: queue.Queue[Any]) -> None:
        task, name, repeat = job
        judge = self.judge
        assert judge is not None
        answer = self.answer_of(task.id, name, repeat)
        baseline = self.answer_of(task.id, self.against, repeat) if self.against else None
        if answer is None or (not self.rubric and baseline is None):
            return  # nothing to judge: the answer (or the baseline's) failed; it is counted as failed
        with self._lock:
            if self.max_cost is not None and self.snapshot.cost + self.snapshot.judge_cost > self.max_cost:
                self.budget.stopped = True
                self.stop.set()
                return
        if not self.limiter.acquire({judge.provider}, self.stop):
            return
        limited = threading.Event()
        call = self.limiter.wrap(self._call, self.stop, limited.set)
        try:
            if self.rubric:
                verdict = judge.rubric(task.text(), answer, task.rubric, call)
            else:
                assert baseline is not None
                verdict = judge.pairwise(task.text(), answer, baseline, call)
        finally:
            self.limiter.release({judge.provider}, rate_limited=limited.is_set())
        record = {
            "task": task.id,
            "system": name,
            "repeat": repeat,
            "against": None if self.rubric else self.against,
            **verdict.as_json(),
        }
        key = (task.id, job_name(name, repeat))
        if self.store is not None and self.run_id is not None:
            self.store.add(self.run_id, JUDGE, *key, record)
        with self._lock:
            self.verdicts[key] = record
            self.snapshot.done += 1
            self.snapshot.failed += verdict.score is None
            self.snapshot.judge_cost += verdict.cost or 0.0
        self._report()


def _without_texts(record: dict[str, Any]) -> dict[str, Any]:
    """A result without its answers' texts, for the figures kept in memory while a stored run goes on."""
    members = [{**m, "answer": "", "error": None} for m in record.get("members", [])]
    return {**record, "answer": "", "error": None, "members": members}


def _content(task: Task, allowed: Sequence[Path]) -> str:
    hint = ", or allow one outside with --allow-path PATH"
    files = [read_attachment(path, base=Path(task.folder), allowed=allowed, hint=hint) for path in task.attachments]
    return attach(task.text(), files) if files else task.text()


def _score(task: Task, text: str, ok: bool) -> dict[str, Any]:
    """A reply's score and how its answer was read: `unreadable` when the check reads a format and found no
    answer it could trust (scored wrong, and counted apart)."""
    if task.check is None:
        return {"score": None, "extracted": None, "read": None, "unreadable": False}
    if not ok:
        return {"score": 0.0, "extracted": None, "read": None, "unreadable": False}
    reading = task.check.read(text)
    score = 1.0 if task.check.score(text) else 0.0
    unreadable = not reading.readable and task.check.kind in ("choice", "number", "expected")
    return {"score": score, "extracted": reading.value, "read": reading.how, "unreadable": unreadable}


def _tokens(records: tuple[CallRecord, ...]) -> tuple[int | None, bool]:
    """The tokens the turn's calls reported, and whether every call reported them. None when none did
    (llama.cpp's server sends none in a stream): unknown, not a count of 0."""
    reported = [r.usage for r in records if r.usage is not None]
    total = sum(u.total_tokens for u in reported) if reported else None
    return total, len(reported) == len(records)


def answer_record(task: Task, system: System, result: TurnResult, repeat: int = 1) -> dict[str, Any]:
    """One task's result for one system, as the store and the report keep it: the answer, its score and how it
    was read, and (for a MoA turn) each first-layer reference's answer scored as it answered in the turn."""
    ok = result.status == "ok"
    tokens, tokens_complete = _tokens(result.ledger.records)
    members = []
    if system.kind == "preset":
        names = member_names(system.preset)
        firsts = sorted((r for r in result.references if r.record.layer == 1), key=lambda r: r.index)
        for name, reference in zip(names, firsts, strict=False):
            member_ok = reference.status == "ok" and bool(reference.text.strip())
            members.append(
                {
                    "name": name,
                    "label": reference.label,
                    "status": "ok" if member_ok else "failed",
                    "answer": reference.text,
                    "error": reference.error,
                    **_score(task, reference.text, member_ok),
                    "seconds": reference.seconds,
                    "tokens": reference.usage.total_tokens if reference.usage else None,  # None: none reported
                    "cost": reference.record.cost,
                }
            )
    return {
        "task": task.id,
        "system": system.name,
        "repeat": repeat,
        "kind": system.kind,
        "status": "ok" if ok else "failed",
        "answer": result.text,
        "error": result.error,
        **_score(task, result.text, ok),
        "seconds": result.seconds,
        "tokens": tokens,
        "tokens_complete": tokens_complete,
        "cost": result.ledger.cost(),
        "cost_complete": result.ledger.cost_complete(),
        "markers_removed": result.echoes_removed,  # moa-chat's markers the reply copied, taken out before reading
        "layers_run": result.layers_run if system.kind == "preset" and ok else None,
        "layers_reason": result.layers_reason,
        "members": members,
    }


def _failed_record(task: Task, system: System, error: str, repeat: int = 1) -> dict[str, Any]:
    return {
        "task": task.id,
        "system": system.name,
        "repeat": repeat,
        "kind": system.kind,
        "status": "failed",
        "answer": "",
        "error": error,
        **_score(task, "", False),
        "seconds": 0.0,
        "tokens": None,
        "tokens_complete": True,
        "cost": None,
        "cost_complete": True,
        "layers_run": None,
        "layers_reason": None,
        "members": [],
    }
