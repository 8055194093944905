"""`moa-chat sessions` and `moa-chat export`: what was said, from the session store."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TextIO

from ..store import SessionStore
from ..store.export import as_json, as_markdown, dumps
from .exit_codes import EXIT_OK


def list_sessions(store: SessionStore, out: TextIO, *, as_json: bool = False, search: str | None = None) -> int:
    found = store.sessions(search)
    if as_json:
        json.dump([s.as_json() for s in found], out, indent=2, ensure_ascii=False)
        out.write("\n")
        return EXIT_OK
    if not found:
        print("No stored sessions yet." if not search else f"No session matches {search!r}.", file=out)
        return EXIT_OK
    for session in found:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(session.updated))
        turns = f"{session.turns} turn{'s' if session.turns != 1 else ''}"
        out.write(f"{session.id}  {when}  {session.preset:<12}  {turns:>8}  {session.title}\n")
    return EXIT_OK


def export_session(store: SessionStore, session_id: str, fmt: str, output: Path | None) -> int:
    text = dumps(as_json(store, session_id)) if fmt == "json" else as_markdown(store, session_id)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
    return EXIT_OK
