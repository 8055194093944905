"""One turn at a time on a stored session, across processes: a lock file per session beside the database.

Two `ask -c` at once on one session (or an `ask -c` while the chat runs a turn on it) would both be answered,
the second without having seen the first's exchange, though the store places it after that exchange. So a
turn on a stored session holds the session's lock (an exclusive `flock` on `locks/SESSION.lock` in the data
folder) from before it reads its context until it is stored; another waits for it, up to `WAIT` seconds,
then reads the conversation again, the first exchange included. The kernel lets go of an flock when its
process ends, however it ends (`kill -9` included), so a crash never leaves a session locked. The file holds
the holder's process id, for the message of the one that waits.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from pathlib import Path

WAIT = 600.0  # seconds a turn waits for another turn on its session before it gives up
LOCKS = "locks"


def new_session_id() -> str:
    """An id for a session not stored yet: its turn locks it before the session is stored, so that no other
    process can start a turn on it in between."""
    return uuid.uuid4().hex[:12]


class SessionLock:
    def __init__(self, folder: Path, session_id: str) -> None:
        """The lock of `session_id`, whose file lives in `folder`/locks (the session database's folder)."""
        self.path = folder / LOCKS / f"{session_id}.lock"
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        """Take the lock if no other process holds it; True when held (also when already held here)."""
        if self._fd is not None:
            return True
        self.path.parent.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        with contextlib.suppress(OSError):  # only for the waiting one's message
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return True

    def holder(self) -> int | None:
        """The process id of the one holding it, as it wrote it (None when unknown)."""
        with contextlib.suppress(OSError, ValueError):
            return int(self.path.read_text().strip())
        return None

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor lets go of the flock
