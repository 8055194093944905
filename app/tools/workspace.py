"""The working directory tools are confined to: paths that resolve outside it are refused.

Checking a path and then opening it leaves a gap: a symlink swapped in between would send the open
outside. So files are opened without following a final symlink (O_NOFOLLOW), and the file actually opened
is checked again by its descriptor (/proc/self/fd on Linux) before a byte is read or written.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from .registry import ToolError


class Workspace:
    def __init__(self, root: Path | str, *, environment: dict[str, str] | None = None) -> None:
        self.root = Path(root).resolve()
        # What commands started here see: the process's environment without its secrets (tools.environment).
        self.environment = environment

    def resolve(self, raw: str) -> Path:
        """An absolute path inside the workspace, symlinks followed; anything that escapes is refused."""
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError("a path is required")
        if "\x00" in raw:
            raise ToolError("a path cannot contain a NUL character")
        candidate = Path(raw.strip()).expanduser()
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            resolved = candidate.resolve()  # follows symlinks, so a link pointing outside is caught too
        except OSError as exc:  # a component vanished while it was being resolved
            raise ToolError(f"cannot resolve {raw!r}: {exc.strerror or exc}") from exc
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise ToolError(
                f"refused: {raw!r} resolves to {resolved}, outside the working directory {self.root}; "
                "tools may only touch files inside it"
            )
        return resolved

    def inside(self, path: Path) -> bool:
        return path == self.root or path.is_relative_to(self.root)

    def open(self, raw: str, flags: int, mode: int = 0o644) -> tuple[int, Path]:
        """A file descriptor for `raw`, opened inside the workspace and proven to be there; and its path.

        Raises ToolError for anything else, including a swap of the path to a symlink mid-way."""
        path = self.resolve(raw)
        try:
            # Non-blocking: a FIFO swapped in must not hang the open (it fails the regular-file check below).
            fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode)
        except OSError as exc:
            raise ToolError(f"cannot open {self.relative(path)}: {exc.strerror}") from exc
        try:
            opened = self._opened_path(fd)
            if opened is not None and not self.inside(opened):
                raise ToolError(f"refused: {raw!r} changed to point outside the working directory while opening")
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ToolError(f"{self.relative(path)} is not a regular file")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd, path

    @staticmethod
    def _opened_path(fd: int) -> Path | None:
        with contextlib.suppress(OSError):
            return Path(os.readlink(f"/proc/self/fd/{fd}"))
        return None  # no /proc: O_NOFOLLOW and the earlier resolve are the guard

    def relative(self, path: Path) -> str:
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return str(path)
        return str(rel) if str(rel) != "." else "."
