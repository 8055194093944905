"""Opening the session database: where it lives, who may read it, and how it is kept consistent.

WAL mode lets the UI read while a turn writes, and a crash (even `kill -9`) loses at most the last
uncommitted write; foreign keys keep a deleted session from leaving orphans. The folder is 0700 and the
file 0600: conversations are private.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
from pathlib import Path

from ..config import data_home
from .migrations import SchemaTooNew, migrate

DB_NAME = "sessions.db"


class StoreError(Exception):
    """The session database cannot be used; the message says why and what to do."""


# SQLite's primary result codes for a file whose pages are damaged, or that is not a database at all.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26


def damaged(path: Path, exc: sqlite3.DatabaseError) -> StoreError | None:
    """The StoreError to raise for `exc` when it says the file is damaged, else None."""
    if exc.sqlite_errorcode & 0xFF not in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return None
    return StoreError(
        f"the session database {path} is damaged ({exc}); nothing was written to it. `moa-chat doctor` checks it "
        "and says how to recover what it still holds"
    )


def default_path() -> Path:
    return data_home() / DB_NAME


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) and migrate the database at `path`."""
    folder = path.parent
    try:
        if not folder.exists():
            folder.mkdir(parents=True, mode=0o700)
        _restrict(folder, 0o700)
        if not path.exists():
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        _restrict(path, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot create the session database {path}: {exc.strerror}") from exc
    try:
        # Autocommit: every write is its own transaction unless a `with store.transaction()` groups them.
        connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10)
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute("PRAGMA synchronous = NORMAL")
        migrate(connection)
    except SchemaTooNew as exc:
        raise StoreError(f"{path}: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is not a usable session database ({exc}); move it aside to start a new one") from exc
    connection.row_factory = sqlite3.Row
    return connection


def _restrict(path: Path, mode: int) -> None:
    """Tighten permissions the user (or an older moa-chat) left wider; never loosen them."""
    current = stat.S_IMODE(path.stat().st_mode)
    if current & ~mode:
        with contextlib.suppress(PermissionError):  # a folder we do not own: keep going, read-only rules
            path.chmod(current & mode)
