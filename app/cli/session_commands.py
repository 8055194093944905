"""`moa-chat sessions` and `moa-chat export`: what was said, from the session store."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO

from ..config.pricing import format_cost
from ..store import SessionStore, StoreError
from ..store.export import as_json, as_markdown
from ..text.inert import inert, inert_json
from ..text.wording import plural
from .exit_codes import EXIT_OK


def list_sessions(store: SessionStore, out: TextIO, *, as_json: bool = False, search: str | None = None) -> int:
    found = store.sessions(search)
    if as_json:
        out.write(inert_json([s.as_json() for s in found], indent=2, ensure_ascii=False) + "\n")
        return EXIT_OK
    if not found:
        print("No stored sessions yet." if not search else f"No session matches {search!r}.", file=out)
        return EXIT_OK
    for session in found:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(session.updated))
        turns = plural(session.turns, "turn")
        cost = format_cost(session.cost) if session.cost is not None else ""
        out.write(f"{session.id}  {when}  {session.preset:<12}  {turns:>8}  {cost:>8}  {inert(session.title)}\n")
    return EXIT_OK


def export_session(store: SessionStore, session_id: str, fmt: str, output: Path | None) -> int:
    if fmt == "json":
        text = inert_json(as_json(store, session_id), indent=2, ensure_ascii=False) + "\n"
    else:
        text = as_markdown(store, session_id)
    if output is None:
        # A terminal must not act on what a model wrote; a pipe or a file gets the text exactly.
        sys.stdout.write(inert(text) if sys.stdout.isatty() else text)
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise StoreError(f"cannot write {output}: {exc.strerror or exc}") from exc
    return EXIT_OK
