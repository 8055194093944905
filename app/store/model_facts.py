"""`ModelFacts`: what moa-chat learns about each model, kept in the session database (migration 8).

Two facts, per provider and model: the context window an overflow error named (so that it is learned
once, not at every start), and how the provider's count of a prompt compares with moa-chat's estimate
(the calibration of `llm.tokens`). It implements the llm layer's `WindowMemory` and `CalibrationMemory`:
`SessionStore.model_facts` is one, sharing the store's connection; `ModelFacts.reader(path)` reads a
database without writing to it (for `doctor` and `presets`).
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from ..llm.tokens import Calibration
from ..llm.windows import LearnedWindow
from .database import StoreError

Connection = Callable[[], AbstractContextManager[sqlite3.Connection]]


class ModelFacts:
    """Learned windows and calibrations; `writing()` gives a connection for one write (a transaction), `reading()`
    one for a read."""

    def __init__(self, writing: Connection, reading: Connection) -> None:
        self._writing, self._reading = writing, reading

    @classmethod
    def reader(cls, path: Path) -> ModelFacts:
        """Facts read from the database at `path`, opened read-only for each read (nothing is written; a
        database without the table, or none at all, knows nothing)."""

        @contextlib.contextmanager
        def read_only() -> Iterator[sqlite3.Connection]:
            with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as connection:
                connection.row_factory = sqlite3.Row
                yield connection

        return cls(read_only, read_only)

    def _row(self, provider: str, model: str) -> sqlite3.Row | None:
        try:
            with self._reading() as db:
                row: sqlite3.Row | None = db.execute(
                    "SELECT * FROM model_facts WHERE provider = ? AND model = ?", (provider, model)
                ).fetchone()
                return row
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc) or "unable to open" in str(exc):
                return None
            raise
        except StoreError:  # a damaged database (store/health.py): nothing is known
            return None

    def learned_window(self, provider: str, model: str) -> LearnedWindow | None:
        row = self._row(provider, model)
        if row is None or row["learned_window"] is None:
            return None
        return LearnedWindow(
            tokens=row["learned_window"],
            prompt_tokens=row["learned_prompt_tokens"],
            provider_said=row["learned_provider_said"],
            learned_at=row["learned_at"] or 0.0,
        )

    def learn_window(self, provider: str, model: str, learned: LearnedWindow) -> None:
        self._keep(
            provider,
            model,
            {
                "learned_window": learned.tokens,
                "learned_prompt_tokens": learned.prompt_tokens,
                "learned_provider_said": learned.provider_said,
                "learned_at": learned.learned_at,
            },
        )

    def calibration(self, provider: str, model: str) -> Calibration | None:
        row = self._row(provider, model)
        if row is None or row["token_ratio"] is None:
            return None
        return Calibration(ratio=row["token_ratio"], samples=row["token_samples"], updated=row["calibrated_at"])

    def calibrate(self, provider: str, model: str, calibration: Calibration) -> None:
        self._keep(
            provider,
            model,
            {
                "token_ratio": calibration.ratio,
                "token_samples": calibration.samples,
                "calibrated_at": calibration.updated or time.time(),
            },
        )

    def _keep(self, provider: str, model: str, values: dict[str, object]) -> None:
        """Write `values` (columns of model_facts, named here, never by a caller's input) into the model's row."""
        columns = ", ".join(values)
        updates = ", ".join(f"{column} = excluded.{column}" for column in values)
        marks = ", ".join("?" for _ in values)
        with contextlib.suppress(StoreError), self._writing() as db:  # damaged: kept for this run only
            db.execute(
                f"INSERT INTO model_facts (provider, model, {columns}) VALUES (?, ?, {marks})"
                f" ON CONFLICT (provider, model) DO UPDATE SET {updates}",
                (provider, model, *values.values()),
            )
