"""Traces: every request a model received and every answer, per turn, as owner-only JSON lines.

With `save_traces: true` each finished model call appends one line to `traces/<session id>.jsonl` beside
the session database: the request's body as sent (model, messages, settings; never headers or keys, which
are not part of it), the answer, usage, timings, cost and how the call ended. The folder is 0700 and the
files 0600, like the database. `privacy_filter` (display or full) has already redacted what is written.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ..config import data_home

TRACE_FOLDER = "traces"
# The request fields worth keeping; `config`, callbacks and anything else local never leave the process.
REQUEST_FIELDS = ("task", "provider", "model", "messages", "tools", "temperature", "max_tokens", "reasoning_effort")


def trace_path(session_id: str, folder: Path | None = None) -> Path:
    return (folder or data_home()) / TRACE_FOLDER / f"{session_id}.jsonl"


class TraceWriter:
    """Appends call traces for one session; safe to call from the reference pool's threads."""

    def __init__(self, session_id: str, *, folder: Path | None = None, scrub: Callable[[str], str] | None = None):
        self.path = trace_path(session_id, folder)
        self._scrub = scrub
        self._lock = threading.Lock()

    def write(self, entry: Mapping[str, object], *, turn: int | None) -> None:
        """One call's trace, under the stored turn it belongs to."""
        record: dict[str, object] = {"time": round(time.time(), 3), "turn": turn, **entry}
        request = record.get("request")
        if isinstance(request, dict):
            record["request"] = {k: v for k, v in request.items() if k in REQUEST_FIELDS and v is not None}
        line = json.dumps(record, ensure_ascii=False, default=str)
        if self._scrub is not None:
            line = json.dumps(_scrubbed(json.loads(line), self._scrub), ensure_ascii=False)
        with self._lock:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.path.parent, 0o700)
            descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(descriptor, "a", encoding="utf-8") as file:
                file.write(line + "\n")


def read_traces(session_id: str, folder: Path | None = None) -> list[dict[str, object]]:
    path = trace_path(session_id, folder)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _scrubbed(value: object, scrub: Callable[[str], str]) -> object:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [_scrubbed(v, scrub) for v in value]
    if isinstance(value, dict):
        return {k: _scrubbed(v, scrub) for k, v in value.items()}
    return value
