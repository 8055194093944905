"""Files attached to a prompt as context: `ask -a FILE`, or `@path` in the chat's prompt.

An attachment is the file's text, placed after the prompt between markers that name it, so the models
see where each file starts and ends, the stored conversation keeps exactly what was sent, and the chat
can show a compact chip instead of the whole file. Text only, capped in size: every reference gets a
copy, so a large file costs many times over.

Attachments come from the working folder (an eval task's, from its task file's folder): a path that
resolves outside it, through `..`, an absolute path or a symlink, is refused, since whatever is attached is
sent to every model of the panel. A path the user allows by name (`ask --allow-path`) may be outside. The
file is opened as the file tools open one (tools/workspace.py), so a path swapped for a link mid-way reads
nothing outside either.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..tools import ToolError, Workspace

MAX_FILE_CHARACTERS = 50_000  # per file; the rest is cut with a note the models can read
MAX_TOTAL_CHARACTERS = 200_000  # per prompt

_OPEN = '<attached-file path="{path}" characters="{size}"{cut}>'
_CLOSE = "</attached-file>"
_BLOCK = re.compile(
    r'\n\n<attached-file path="(?P<path>[^"\n]*)" characters="(?P<size>\d+)"(?P<cut> cut="\d+")?>\n'
    r"(?P<text>.*?)\n</attached-file>",
    re.DOTALL,
)
# `@path` in a prompt: at the start or after whitespace, up to the next whitespace (quotes not needed).
_MENTION = re.compile(r"(?:(?<=\s)|^)@(?P<path>[^\s@]+)")


class AttachmentError(ValueError):
    """A file that cannot be attached, phrased for the person who named it."""


@dataclass(frozen=True)
class Attachment:
    path: str  # as the user named it
    text: str  # what is sent (cut to the cap)
    characters: int  # the whole file's length
    cut: bool = False


@dataclass(frozen=True)
class Chip:
    """An attachment as the chat shows it, read back from a message."""

    path: str
    characters: int
    cut: bool


def read_attachment(
    path: str | Path, *, base: Path, allowed: Sequence[Path] = (), hint: str = "", limit: int = MAX_FILE_CHARACTERS
) -> Attachment:
    """The file at `path` (relative to `base`), which must resolve inside `base` or inside one of `allowed`
    (files or folders); `hint` ends the refusal of one outside ("pass --allow-path PATH to allow it")."""
    named = str(path)
    file = Path(path).expanduser()
    if not file.is_absolute():
        file = base / file
    try:
        resolved, root = file.resolve(), base.resolve()
    except OSError as exc:
        raise AttachmentError(f"cannot attach {named}: {exc.strerror or exc}") from exc
    if not resolved.is_relative_to(root) and not any(_within(resolved, other) for other in allowed):
        via = f" (it resolves to {resolved})" if resolved != file else ""
        raise AttachmentError(
            f"cannot attach {named}: it is outside the working folder {root}{via}; attachments come from that "
            f"folder{hint}"
        )
    if not file.exists():
        raise AttachmentError(f"cannot attach {named}: no such file")
    if not file.is_file():
        raise AttachmentError(f"cannot attach {named}: not a regular file")
    try:
        data = _read(resolved, root)
    except (OSError, ToolError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise AttachmentError(f"cannot attach {named}: {reason}") from exc
    if b"\0" in data[:8192]:
        raise AttachmentError(f"cannot attach {named}: it looks binary; only text files can be attached")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise AttachmentError(f"cannot attach {named}: it is not UTF-8 text") from None
    text = text.replace("\r\n", "\n")
    if len(text) > limit:
        return Attachment(named, text[:limit], len(text), cut=True)
    return Attachment(named, text, len(text))


def _within(path: Path, allowed: Path) -> bool:
    allowed = allowed.expanduser().resolve()
    return path == allowed or path.is_relative_to(allowed)


def _read(resolved: Path, root: Path) -> bytes:
    """The bytes of a file checked to be where it may be: inside `root` opened as the file tools open one (no
    link followed on the way, the file checked again once open); a path allowed by name, as it is."""
    if not resolved.is_relative_to(root):
        return resolved.read_bytes()
    descriptor, _ = Workspace(root).open(str(resolved), os.O_RDONLY)
    with os.fdopen(descriptor, "rb") as handle:
        return handle.read()


def attach(prompt: str, attachments: list[Attachment]) -> str:
    """The message content: the prompt, then each file between markers (cut ones say how much was sent)."""
    total = sum(len(a.text) for a in attachments)
    if total > MAX_TOTAL_CHARACTERS:
        raise AttachmentError(
            f"the attached files hold {total:,} characters, more than {MAX_TOTAL_CHARACTERS:,} per prompt; "
            "attach fewer, or the parts that matter"
        )
    blocks = []
    for a in attachments:
        cut = f' cut="{len(a.text)}"' if a.cut else ""
        opening = _OPEN.format(path=a.path.replace('"', "'").replace("\n", " "), size=a.characters, cut=cut)
        blocks.append(f"\n\n{opening}\n{a.text}\n{_CLOSE}")
    return prompt + "".join(blocks)


def split_attachments(content: str) -> tuple[str, list[Chip]]:
    """A stored message as (what the user typed, the files attached to it)."""
    chips = [Chip(m.group("path"), int(m.group("size")), m.group("cut") is not None) for m in _BLOCK.finditer(content)]
    return (_BLOCK.sub("", content), chips) if chips else (content, [])


def mentioned_files(prompt: str, base: Path) -> list[str]:
    """The `@path` mentions in a prompt that name an existing file, in order, once each."""
    found: list[str] = []
    for match in _MENTION.finditer(prompt):
        path = match.group("path").rstrip(".,;:!?)")
        candidate = Path(path).expanduser()
        candidate = candidate if candidate.is_absolute() else base / candidate
        if path not in found and candidate.is_file():
            found.append(path)
    return found


def describe(chip: Chip) -> str:
    """A chip's words: "README.md · 2,140 chars" (and "cut" when only part of it was sent)."""
    return f"{chip.path} · {chip.characters:,} chars{' · cut' if chip.cut else ''}"
