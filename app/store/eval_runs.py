"""`EvalRunStore`: eval runs and their results, in the session database beside the conversations.

A run's spec (its tasks, what it compares, its options) is written when it starts, and each result the
moment it arrives, one row per (kind, task, job) in its own transaction: a run killed at any point keeps
everything that had finished, and `moa-chat eval --resume RUN` redoes none of it.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .database import StoreError, connect, default_path, is_damage
from .health import StoreDamaged, StoreHealth

SESSION = "session"  # a result kind of its own: one invocation's wall time


@dataclass(frozen=True)
class EvalRunSummary:
    id: str
    created: float
    updated: float
    status: str
    spec: dict[str, Any]


class EvalRunStore:
    def __init__(self, path: Path | None = None) -> None:
        self.file = path or default_path()
        self._db = connect(self.file)
        self._lock = threading.Lock()
        self.health = StoreHealth.watching(self.file)  # as the session store's: nothing written once damaged

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _write(self, sql: str, args: tuple[object, ...]) -> None:
        self.health.writable()
        with self._lock:
            try:
                self._db.execute(sql, args)
            except sqlite3.Error as exc:
                self._raise_if_damaged(exc)
                raise StoreError(f"could not save the eval result to {self.file} ({exc})") from exc

    def _rows(self, sql: str, args: tuple[object, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                return list(self._db.execute(sql, args))
            except sqlite3.Error as exc:
                self._raise_if_damaged(exc)
                raise

    def _raise_if_damaged(self, exc: sqlite3.Error) -> None:
        if isinstance(exc, sqlite3.DatabaseError) and is_damage(exc):
            self.health.found(str(exc))
            raise StoreDamaged(self.health.message) from exc

    def create(self, spec: dict[str, Any], *, run_id: str | None = None) -> str:
        now = time.time()
        run_id = run_id or time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        self._write(
            "INSERT INTO eval_runs (id, created, updated, spec, status) VALUES (?, ?, ?, ?, 'running')",
            (run_id, now, now, json.dumps(spec, ensure_ascii=False)),
        )
        return run_id

    def run(self, wanted: str) -> EvalRunSummary:
        """A run by its id or the start of one (the latest run for `last`)."""
        if wanted == "last":
            rows = self._rows("SELECT * FROM eval_runs ORDER BY created DESC LIMIT 1")
        else:
            rows = self._rows("SELECT * FROM eval_runs WHERE id LIKE ? ORDER BY created DESC", (wanted + "%",))
        if not rows:
            raise StoreError(f"no eval run {wanted!r}; `moa-chat eval --runs` lists them")
        if len(rows) > 1 and rows[0]["id"] != wanted:
            raise StoreError(f"{wanted!r} names {len(rows)} eval runs; give more of the id")
        row = rows[0]
        return EvalRunSummary(row["id"], row["created"], row["updated"], row["status"], json.loads(row["spec"]))

    def runs(self, limit: int = 50) -> list[EvalRunSummary]:
        rows = self._rows("SELECT * FROM eval_runs ORDER BY created DESC LIMIT ?", (limit,))
        return [EvalRunSummary(r["id"], r["created"], r["updated"], r["status"], json.loads(r["spec"])) for r in rows]

    def set_status(self, run_id: str, status: str) -> None:
        self._write("UPDATE eval_runs SET status = ?, updated = ? WHERE id = ?", (status, time.time(), run_id))

    def add(self, run_id: str, kind: str, task_id: str, job: str, record: dict[str, Any]) -> None:
        """Keep one result (kind `answer` or `judge`); the same key again replaces it."""
        self._write(
            "INSERT OR REPLACE INTO eval_results (run_id, kind, task_id, job, record, created)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (run_id, kind, task_id, job, json.dumps(record, ensure_ascii=False), time.time()),
        )

    def add_session(self, run_id: str, seconds: float, status: str) -> float:
        """Keep one invocation's wall time (a run and each resume of it); returns the run's total so far."""
        earlier = self.results(run_id, SESSION)
        self.add(run_id, SESSION, str(len(earlier) + 1), "wall", {"seconds": seconds, "status": status})
        return seconds + sum(float(r.get("seconds") or 0.0) for r in earlier.values())

    def results(self, run_id: str, kind: str) -> dict[tuple[str, str], dict[str, Any]]:
        """(task id, job) → the stored record, for one kind."""
        rows = self._rows(
            "SELECT task_id, job, record FROM eval_results WHERE run_id = ? AND kind = ? ORDER BY created",
            (run_id, kind),
        )
        return {(r["task_id"], r["job"]): json.loads(r["record"]) for r in rows}
