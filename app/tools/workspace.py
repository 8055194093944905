"""The working directory tools are confined to: paths that resolve outside it are refused.

Checking a path and then opening it leaves a gap: a symlink swapped in between would send the open
outside. So the path is walked a folder at a time, each opened relative to the one before (dir_fd) and
none of them, nor the file, through a symlink (O_NOFOLLOW): a folder on the way swapped for a link fails
the open instead of leading it outside, where O_CREAT would already have made an (empty) file. The file
actually opened is checked again by its descriptor (/proc/self/fd on Linux) before a byte is read or
written.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from .registry import ToolError

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NO_LINK = os.O_NOFOLLOW | os.O_CLOEXEC


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

    def open(self, raw: str, flags: int, mode: int = 0o644, *, make_folders: bool = False) -> tuple[int, Path]:
        """A file descriptor for `raw`, opened inside the workspace and proven to be there; and its path.
        `make_folders`: create the folders on the way that are missing (as safely as the open).

        Raises ToolError for anything else, including a swap of the path to a symlink mid-way."""
        path = self.resolve(raw)
        # resolve() followed every link, so the real path has none: one found on the way was swapped in.
        parts = path.relative_to(self.root).parts
        try:
            folder = os.open(self.root, _FOLDER)
        except OSError as exc:
            raise ToolError(f"cannot open {self.relative(path)}: {exc.strerror}") from exc
        try:
            for name in parts[:-1]:
                inner = self._enter(folder, name, raw, path, make_folders)
                os.close(folder)
                folder = inner
            # Non-blocking: a FIFO swapped in must not hang the open (it fails the regular-file check below).
            fd = os.open(parts[-1] if parts else ".", flags | _NO_LINK | os.O_NONBLOCK, mode, dir_fd=folder)
        except OSError as exc:
            raise ToolError(f"cannot open {self.relative(path)}: {exc.strerror}") from exc
        finally:
            os.close(folder)
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

    def _enter(self, folder: int, name: str, raw: str, path: Path, make: bool) -> int:
        """The folder `name` in the open `folder`, opened (made first if missing and `make`), never a link."""
        try:
            return self._open_folder(folder, name, raw)
        except FileNotFoundError:
            if not make:
                raise
        except NotADirectoryError as exc:  # a file where a folder should be
            if make:
                raise ToolError(f"cannot create the folder for {self.relative(path)}: {exc.strerror}") from exc
            raise
        try:
            os.mkdir(name, 0o777, dir_fd=folder)
        except FileExistsError:
            pass  # made meanwhile: it is opened below like any other, and refused if it is a link
        except OSError as exc:
            raise ToolError(f"cannot create the folder for {self.relative(path)}: {exc.strerror or exc}") from exc
        return self._open_folder(folder, name, raw)

    @staticmethod
    def _open_folder(folder: int, name: str, raw: str) -> int:
        try:
            return os.open(name, _FOLDER | os.O_NOFOLLOW, dir_fd=folder)
        except OSError as exc:
            # A link refused by O_NOFOLLOW reads as ELOOP or, with O_DIRECTORY on some kernels, ENOTDIR.
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(folder, name):
                raise ToolError(
                    f"refused: a folder on the way to {raw!r} changed to a link while opening; "
                    "tools may only touch files inside the working directory"
                ) from exc
            raise

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


def _is_link(folder: int, name: str) -> bool:
    with contextlib.suppress(OSError):
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    return False
