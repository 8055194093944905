"""The built-in tools, each confined to the working directory and capped in size and time."""

from __future__ import annotations

import contextlib
import difflib
import fnmatch
import io
import math
import os
import re
import shlex
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from ..engine.cancel import Cancelled, CancelToken
from .fetch import Resolver, fetch
from .fetch import approval_reason as fetch_approval_reason
from .registry import JsonSchema, Tool, ToolArguments, ToolError, optional, required
from .workspace import Workspace

MAX_READ_BYTES = 200_000
MAX_READ_LINES = 2_000
MAX_COUNT_BYTES = 50_000_000  # past this, read_file does not read to the end just to count lines
MAX_LIST_ENTRIES = 500
MAX_SEARCH_RESULTS = 200
MAX_SEARCH_FILE_BYTES = 2_000_000
MAX_COMMAND_OUTPUT = 20_000
MAX_COMMAND_TIMEOUT = 300.0
MAX_FETCH_BYTES = 1_000_000
MAX_FETCH_TIMEOUT = 30.0
SKIP_DIRS = {
    ".git",
    ".hg",
    ".svn",
    "node_modules",
    ".venv",
    "venv",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".tox",
    "dist",
    "build",
}


def _is_binary(data: bytes) -> bool:
    return b"\x00" in data[:8192]


# --------------------------------------------------------------------------- read_file


def _read_file(ws: Workspace, args: ToolArguments, cancel: CancelToken) -> str:
    raw_path = required(args, "path")
    path = ws.resolve(raw_path)
    if not path.is_file():
        raise ToolError(f"{ws.relative(path)} is not a file" if path.exists() else f"no such file: {args['path']}")
    start = optional(args, "start_line", int, 1)
    end = optional(args, "end_line", int, 0)
    if start < 1 or (end and end < start):
        raise ToolError("start_line must be >= 1 and end_line >= start_line")
    fd, path = ws.open(raw_path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    rel = ws.relative(path)
    chosen: list[str] = []
    used = 0
    last = start - 1
    cut = False  # lines in the asked range left out by the caps
    count = 0
    counted_all = True
    with os.fdopen(fd, "rb") as handle:
        if _is_binary(handle.read(8192)):
            raise ToolError(f"{rel} is a binary file ({size:,} bytes); not shown")
        handle.seek(0)
        # Line by line from the top, so any part of a large file can be read, not only its first bytes.
        for count, raw in enumerate(handle, 1):
            if count < start:
                continue
            if cut or (end and count > end):
                if size > MAX_COUNT_BYTES:  # the total is not worth reading a huge file for
                    counted_all = False
                    break
                continue
            if count % 1000 == 0:
                cancel.raise_if_cancelled()
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if len(chosen) >= MAX_READ_LINES or used + len(line) > MAX_READ_BYTES:
                cut = True
                continue
            chosen.append(line)
            used += len(line) + 1
            last = count
    total = f"{count:,}{'' if counted_all else '+'}"
    if count == 0:
        return f"{rel} is empty (0 bytes)"
    if start > count and counted_all:
        raise ToolError(f"start_line {start} is past the end of {rel} ({total} lines)")
    notes = []
    if cut:
        notes.append(
            f"[cut: showing lines {start}–{last}; the file has {size:,} bytes, {total} lines. "
            f"Ask for start_line={last + 1} to read on.]"
        )
    return "\n".join([f"{rel} (lines {start}–{last} of {total})", *chosen, *notes])


# --------------------------------------------------------------------------- list_directory


def _list_directory(ws: Workspace, args: ToolArguments, cancel: CancelToken) -> str:
    path = ws.resolve(optional(args, "path", str, "."))
    if not path.is_dir():
        raise ToolError(f"not a directory: {args.get('path', '.')}")
    entries = sorted(path.iterdir(), key=lambda p: (not p.is_dir(), p.name.lower()))
    lines = [f"{ws.relative(path)}/ ({len(entries)} entries)"]
    for entry in entries[:MAX_LIST_ENTRIES]:
        if entry.is_symlink():
            target = entry.resolve()
            where = ws.relative(target) if ws.inside(target) else "(outside the working directory)"
            lines.append(f"{entry.name} -> {where}")
        elif entry.is_dir():
            lines.append(f"{entry.name}/")
        else:
            lines.append(f"{entry.name}  ({entry.stat().st_size:,} bytes)")
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"[… {len(entries) - MAX_LIST_ENTRIES:,} more entries not shown]")
    return "\n".join(lines)


# --------------------------------------------------------------------------- search_files


def _search_files(ws: Workspace, args: ToolArguments, cancel: CancelToken) -> str:
    query = required(args, "query")
    root = ws.resolve(optional(args, "path", str, "."))
    pattern = optional(args, "glob", str, "*")
    limit = max(1, min(optional(args, "max_results", int, 50), MAX_SEARCH_RESULTS))
    flags = 0 if optional(args, "case_sensitive", bool, False) else re.IGNORECASE
    try:
        matcher = re.compile(query if optional(args, "regex", bool, False) else re.escape(query), flags)
    except re.error as exc:
        raise ToolError(f"invalid regular expression: {exc}") from exc
    results: list[str] = []
    files_seen = 0
    walk = [(root.parent, [], [root.name])] if root.is_file() else os.walk(root)
    for folder, dirs, names in walk:
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(names):
            cancel.raise_if_cancelled()
            file = Path(str(folder)) / name
            if not fnmatch.fnmatch(name, pattern) or file.is_symlink():
                continue
            try:
                info = file.stat()
                # Only regular files: reading a FIFO or a device would block or never end.
                if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SEARCH_FILE_BYTES:
                    continue
                data = file.read_bytes()
            except OSError:
                continue
            if _is_binary(data):
                continue
            files_seen += 1
            for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                if matcher.search(line):
                    results.append(f"{ws.relative(file)}:{number}: {line.strip()[:200]}")
                    if len(results) >= limit:
                        return "\n".join([*results, f"[stopped at {limit} matches; narrow the query or path]"])
    if not results:
        return f"no matches for {query!r} in {files_seen} files under {ws.relative(root)}"
    return "\n".join([*results, f"[{len(results)} matches in {files_seen} files searched]"])


# --------------------------------------------------------------------------- write_file


def _write_preview(ws: Workspace, args: ToolArguments) -> str:
    path = ws.resolve(required(args, "path"))
    content = required(args, "content")
    name = ws.relative(path)
    if path.exists() and not path.is_file():
        return f"{name} is not a regular file: it will not be written"
    if not path.exists():
        lines = content.splitlines()
        return "\n".join(
            [
                f"new file {name} ({len(content):,} characters)",
                "--- /dev/null",
                f"+++ {name}",
                *(f"+{line}" for line in lines[:400]),
            ]
        )
    old = path.read_text(encoding="utf-8", errors="replace")
    diff = difflib.unified_diff(old.splitlines(), content.splitlines(), f"a/{name}", f"b/{name}", lineterm="")
    text = "\n".join(diff)
    return text or f"{name}: no change"


def _write_file(ws: Workspace, args: ToolArguments, cancel: CancelToken) -> str:
    path = ws.resolve(required(args, "path"))
    content = required(args, "content")
    if path.is_dir():
        raise ToolError(f"{ws.relative(path)} is a directory")
    if path.exists() and not path.is_file():
        raise ToolError(f"{ws.relative(path)} is not a regular file")
    try:
        data = content.encode("utf-8")  # before anything is touched: a bad string must not empty the file
    except UnicodeEncodeError as exc:
        raise ToolError(f"the content is not valid text ({exc.reason} at character {exc.start})") from exc
    existed = path.exists()
    # Opened without truncating, checked, then truncated: a path swapped to a link outside is never written.
    # Missing folders are made on the way, each inside the last one opened: never through a swapped link.
    fd, path = ws.open(required(args, "path"), os.O_WRONLY | os.O_CREAT, make_folders=True)
    with os.fdopen(fd, "wb") as handle:
        handle.truncate(0)
        handle.write(data)
    return f"{'replaced' if existed else 'created'} {ws.relative(path)} ({len(content.encode()):,} bytes)"


# --------------------------------------------------------------------------- run_command


def _command_argv(args: ToolArguments) -> tuple[list[str] | str, bool]:
    command = args.get("command")
    shell = optional(args, "shell", bool, False)
    if isinstance(command, list) and command and all(isinstance(part, str) for part in command):
        return (shlex.join(command) if shell else command), shell
    if isinstance(command, str) and command.strip():
        if shell:
            return command, True
        try:
            return shlex.split(command), False
        except ValueError as exc:
            raise ToolError(f"cannot split the command: {exc}") from exc
    raise ToolError("command must be a non-empty string or list of strings")


def _run_preview(ws: Workspace, args: ToolArguments) -> str:
    argv, shell = _command_argv(args)
    shown = argv if isinstance(argv, str) else shlex.join(argv)
    return f"$ {shown}\n(in {ws.root}{', through the shell' if shell else ''})"


def _run_command(ws: Workspace, args: ToolArguments, cancel: CancelToken) -> str:
    argv, shell = _command_argv(args)
    timeout = args.get("timeout", 30) or 30
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout) or timeout <= 0:
        raise ToolError("timeout must be a positive number of seconds")
    timeout = min(float(timeout), MAX_COMMAND_TIMEOUT)
    try:
        process = subprocess.Popen(
            argv,
            cwd=ws.root,
            env=ws.environment,
            shell=shell,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise ToolError(f"command not found: {exc.filename}") from exc
    except OSError as exc:
        raise ToolError(f"cannot start the command: {exc}") from exc
    # Drain both pipes as the command runs, keeping only a head and a tail: `yes` for 30 s must not
    # fill the memory before the cap applies.
    out, err = _Capture(process.stdout, MAX_COMMAND_OUTPUT), _Capture(process.stderr, MAX_COMMAND_OUTPUT // 2)
    started = time.monotonic()
    stopped = None
    while True:
        try:
            process.wait(timeout=0.1)
            break
        except subprocess.TimeoutExpired:
            if cancel.cancelled:
                stopped = "cancelled by the user"
            elif time.monotonic() - started > timeout:
                stopped = f"timed out after {timeout:g}s"
            if stopped:
                _kill_group(process)
                process.wait()
                break
    # A grandchild outside the group may still hold the pipes: take what came, do not wait for EOF.
    out.join(5)
    err.join(5)
    if stopped == "cancelled by the user":
        raise Cancelled()
    parts = [f"exit status {process.returncode}" + (f" ({stopped})" if stopped else "")]
    if out.total:
        parts += ["--- stdout ---", out.text()]
    if err.total:
        parts += ["--- stderr ---", err.text()]
    return "\n".join(parts)


class _Capture:
    """Reads a pipe to its end on a daemon thread, keeping the first 3/4 and the last 1/4 of `limit`."""

    def __init__(self, pipe: IO[bytes] | None, limit: int) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._head_limit, self._tail_limit = limit * 3 // 4, limit // 4
        self._thread = threading.Thread(target=self._drain, args=(pipe,), daemon=True, name="run-command-pipe")
        self._thread.start()

    def _drain(self, pipe: IO[bytes] | None) -> None:
        if pipe is None:
            return
        # read1: what is there now, up to the size, without waiting for the whole size to arrive.
        read = pipe.read1 if isinstance(pipe, io.BufferedIOBase) else pipe.read
        with contextlib.suppress(OSError, ValueError):
            while chunk := read(65_536):
                self.total += len(chunk)
                room = self._head_limit - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail += chunk
                    del self.tail[: max(0, len(self.tail) - self._tail_limit)]

    def join(self, seconds: float) -> None:
        self._thread.join(seconds)

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        cut = self.total - len(self.head) - len(self.tail)
        if cut <= 0:
            return head + tail
        return f"{head}\n… [{cut:,} bytes cut; {self.total:,} in all] …\n{tail}"


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()


# --------------------------------------------------------------------------- fetch_url


def _text_of_html(html: str) -> str:
    """The readable text of a page: no scripts or styles, a line break per block. html.parser is imported here,
    on the first page fetched, not with the tools at every start-up."""
    from html.parser import HTMLParser

    class TextOfHtml(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.parts: list[str] = []
            self._skip = 0

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag in ("script", "style", "noscript"):
                self._skip += 1
            elif tag in ("p", "br", "div", "li", "h1", "h2", "h3", "h4", "tr", "pre"):
                self.parts.append("\n")

        def handle_endtag(self, tag: str) -> None:
            if tag in ("script", "style", "noscript") and self._skip:
                self._skip -= 1

        def handle_data(self, data: str) -> None:
            if not self._skip:
                self.parts.append(data)

    parser = TextOfHtml()
    parser.feed(html)
    return re.sub(r"\n\s*\n+", "\n\n", re.sub(r"[ \t]+", " ", "".join(parser.parts))).strip()


def _fetch_url(resolver: Resolver, args: ToolArguments, cancel: CancelToken) -> str:
    url = required(args, "url")
    if not re.match(r"^https?://", url, re.I):
        raise ToolError("only http:// and https:// URLs can be fetched")
    limit = max(1_000, min(optional(args, "max_bytes", int, 200_000), MAX_FETCH_BYTES))
    status, kind, data, cut = fetch(resolver, url, limit=limit, timeout=MAX_FETCH_TIMEOUT, cancel=cancel)
    if _is_binary(data) and "text" not in kind and "json" not in kind:
        return f"HTTP {status}, {kind or 'unknown type'}: binary content ({len(data):,} bytes) not shown"
    text = data.decode("utf-8", errors="replace")
    if "html" in kind.lower():
        text = _text_of_html(text)
    note = f"\n[cut at {limit:,} bytes]" if cut else ""
    return f"HTTP {status} {kind}\n{text}{note}"


# --------------------------------------------------------------------------- the table


def _path_param(description: str) -> JsonSchema:
    return {"type": "string", "description": description}


def builtin_tools(workspace: Workspace) -> list[Tool]:
    ws = workspace
    resolver = Resolver()  # one per tool set: fetch_url's approval check and its fetch share answers

    def bind(
        function: Callable[[Workspace, ToolArguments, CancelToken], str],
    ) -> Callable[[ToolArguments, CancelToken], str]:
        return lambda args, cancel: function(ws, args, cancel)

    return [
        Tool(
            "read_file",
            "Read a text file inside the working directory, optionally a range of lines. Large files are cut "
            "with a note saying how to read on.",
            {
                "type": "object",
                "properties": {
                    "path": _path_param("File path, relative to the working directory"),
                    "start_line": {"type": "integer", "description": "First line to read (1-based)", "minimum": 1},
                    "end_line": {"type": "integer", "description": "Last line to read (inclusive)", "minimum": 1},
                },
                "required": ["path"],
            },
            read_only=True,
            run=bind(_read_file),
        ),
        Tool(
            "list_directory",
            "List the entries of a directory inside the working directory (folders first, with file sizes).",
            {
                "type": "object",
                "properties": {
                    "path": _path_param("Directory, relative to the working directory (default: '.')"),
                },
            },
            read_only=True,
            run=bind(_list_directory),
        ),
        Tool(
            "search_files",
            "Search the text of files under a directory for a string or regular expression; returns "
            "path:line: text for each match, capped.",
            {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Text (or regex, with regex=true) to find"},
                    "path": _path_param("Directory or file to search (default: '.')"),
                    "glob": {"type": "string", "description": "Only files whose name matches, e.g. '*.py'"},
                    "regex": {"type": "boolean", "description": "Treat query as a regular expression"},
                    "case_sensitive": {"type": "boolean"},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_RESULTS},
                },
                "required": ["query"],
            },
            read_only=True,
            run=bind(_search_files),
        ),
        Tool(
            "write_file",
            "Create or replace a text file inside the working directory with the given content. The user "
            "sees a diff and must approve.",
            {
                "type": "object",
                "properties": {
                    "path": _path_param("File path, relative to the working directory"),
                    "content": {"type": "string", "description": "The complete new content of the file"},
                },
                "required": ["path", "content"],
            },
            read_only=False,
            run=bind(_write_file),
            make_preview=lambda args: _write_preview(ws, args),
        ),
        Tool(
            "run_command",
            "Run a program in the working directory and return its exit status and output (capped). No "
            "shell unless shell=true. The user must approve.",
            {
                "type": "object",
                "properties": {
                    "command": {
                        "description": "The command: a list of arguments, or a string split like a shell "
                        "would (no pipes or globbing unless shell=true)",
                        "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                    },
                    "shell": {"type": "boolean", "description": "Run through /bin/sh (pipes, redirects)"},
                    "timeout": {"type": "number", "description": "Seconds before it is killed (default 30)"},
                },
                "required": ["command"],
            },
            read_only=False,
            run=bind(_run_command),
            make_preview=lambda args: _run_preview(ws, args),
        ),
        Tool(
            "fetch_url",
            "Fetch an http(s) URL and return its text (HTML reduced to text), capped in size and time.",
            {
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "An http:// or https:// URL"},
                    "max_bytes": {"type": "integer", "description": "Most bytes to read (default 200000)"},
                },
                "required": ["url"],
            },
            read_only=True,
            run=lambda args, cancel: _fetch_url(resolver, args, cancel),
            asks_when=lambda args: fetch_approval_reason(resolver, args),
        ),
    ]


BUILTIN_NAMES = ("read_file", "list_directory", "search_files", "write_file", "run_command", "fetch_url")
