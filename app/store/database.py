"""Opening the session database: where it lives, who may read it, and how it is kept consistent.

WAL mode lets the UI read while a turn writes, and a crash (even `kill -9`) loses at most the last
uncommitted write; foreign keys keep a deleted session from leaving orphans. The folder is 0700 and the
file 0600: conversations are private.

An error at opening says what it is. A file that is not a database is one to move aside; a damaged one is
`moa-chat doctor`'s; a lock, or a disk I/O error (which another process using the file can cause, one whose
`-wal` file was removed for instance), passes: it is tried again, and if it stays, said to be passing, with
no advice to move a healthy file aside.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
from pathlib import Path

from ..config import data_home
from .migrations import SchemaTooNew, migrate

DB_NAME = "sessions.db"


class StoreError(Exception):
    """The session database cannot be used; the message says why and what to do."""


# SQLite's primary result codes: a file whose pages are damaged, or that is not a database at all; and faults
# that pass (a lock held, a disk I/O error).
_CORRUPT, _NOTADB = 11, 26
_BUSY, _LOCKED, _IOERR = 5, 6, 10
OPEN_ATTEMPTS = 3  # tries at opening when the fault passes, 0.2 then 0.4 s apart


def error_code(exc: sqlite3.DatabaseError) -> int:
    """SQLite's primary result code of `exc` (0 when it names none)."""
    return int(getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF


def is_damage(exc: sqlite3.DatabaseError) -> bool:
    return error_code(exc) in (_CORRUPT, _NOTADB)


def damaged(path: Path, exc: sqlite3.DatabaseError) -> StoreError | None:
    """The StoreError to raise for `exc` when it says the file is damaged, else None."""
    if not is_damage(exc):
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
    for attempt in range(1, OPEN_ATTEMPTS + 1):
        try:
            return _open(path)
        except SchemaTooNew as exc:
            raise StoreError(f"{path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:
            if error_code(exc) in (_BUSY, _LOCKED, _IOERR) and attempt < OPEN_ATTEMPTS:
                time.sleep(0.2 * attempt)
                continue
            raise _open_error(path, exc, attempt) from exc
    raise AssertionError("unreachable: the last attempt returns or raises")


def _open(path: Path) -> sqlite3.Connection:
    # Autocommit: every write is its own transaction unless a `with store.transaction()` groups them.
    connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute("PRAGMA synchronous = NORMAL")
        migrate(connection)
    except BaseException:
        connection.close()
        raise
    connection.row_factory = sqlite3.Row
    return connection


def _open_error(path: Path, exc: sqlite3.DatabaseError, attempts: int) -> StoreError:
    code = error_code(exc)
    if code == _NOTADB:
        return StoreError(f"{path} is not a usable session database ({exc}); move it aside to start a new one")
    if code == _CORRUPT:
        return damaged(path, exc) or StoreError(str(exc))
    if code in (_BUSY, _LOCKED, _IOERR):
        return StoreError(
            f"cannot open the session database {path} just now ({exc}; tried {attempts} times): a passing fault, "
            "of the disk or of another moa-chat process using it at the same time (one whose -wal file was "
            "removed, for instance). The file is not known to be damaged: try again once other moa-chat "
            "processes have ended; `moa-chat doctor` checks it"
        )
    return StoreError(f"cannot open the session database {path} ({exc})")


def _restrict(path: Path, mode: int) -> None:
    """Tighten permissions the user (or an older moa-chat) left wider; never loosen them."""
    current = stat.S_IMODE(path.stat().st_mode)
    if current & ~mode:
        with contextlib.suppress(PermissionError):  # a folder we do not own: keep going, read-only rules
            path.chmod(current & mode)
