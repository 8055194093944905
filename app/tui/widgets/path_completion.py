"""`@path` completion in the prompt: the names in the working folder that the word at the cursor could become,
and the dropdown that lists them over the prompt.

Only what a mention can attach is offered (session/attachments.py): a path inside the working folder, with no
whitespace and no `@` in it. Hidden names show once the typed name starts with a dot; version control, virtual
environments and caches never do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from textual.content import Content
from textual.geometry import Offset
from textual.widgets import OptionList
from textual.widgets.option_list import Option

IGNORED = frozenset({".git", "node_modules", ".venv", "__pycache__"})
MAX_SHOWN = 200  # a folder with thousands of names: the first ones, and a note to type more


@dataclass(frozen=True)
class Mention:
    """The `@word` that ends at the cursor: where its path starts on the line, and the path typed so far."""

    start: int  # column just after the @
    typed: str


@dataclass(frozen=True)
class Candidates:
    folder: str  # the typed path's folder part, "" or ending in "/"
    typed: str  # the name typed so far in that folder
    names: tuple[str, ...]  # the names it can become, folders ending in "/"
    more: int = 0  # matching names past MAX_SHOWN

    @property
    def common(self) -> str:
        """The longest name all candidates start with (the typed name itself when they share no more)."""
        common = os.path.commonprefix(list(self.names))  # noqa: RUF071 (names in one folder: by character is right)
        return common if len(common) > len(self.typed) else self.typed


def mention_at(line: str, column: int) -> Mention | None:
    """The @mention the cursor is at the end of, if the word before it is one."""
    start = column
    while start > 0 and not line[start - 1].isspace():
        start -= 1
    word = line[start:column]
    if not word.startswith("@") or "@" in word[1:]:
        return None
    return Mention(start + 1, word[1:])


def candidates(typed: str, base: Path) -> Candidates | None:
    """What `typed` (the path after an @) can complete to in `base`; None if it points outside the folder."""
    folder, slash, name = typed.rpartition("/")
    folder += slash
    parts = PurePosixPath(folder).parts
    if typed.startswith(("/", "~")) or ".." in parts:
        return None  # completion stays in the working folder, where attachments come from
    try:
        entries = list(os.scandir(base / folder))
    except OSError:
        return Candidates(folder, name, ())
    shown: list[str] = []
    for exact in (True, False):  # case-sensitive matches first; any case only when there are none
        for entry in entries:
            entry_name = entry.name
            if entry_name in IGNORED or (entry_name.startswith(".") and not name.startswith(".")):
                continue
            if "@" in entry_name or any(c.isspace() for c in entry_name):
                continue
            if exact and not entry_name.startswith(name):
                continue
            if not exact and not entry_name.casefold().startswith(name.casefold()):
                continue
            try:
                is_folder = entry.is_dir()
            except OSError:
                continue
            shown.append(entry_name + ("/" if is_folder else ""))
        if shown:
            break
    shown.sort(key=lambda n: (n.casefold(), n))
    return Candidates(folder, name, tuple(shown[:MAX_SHOWN]), max(0, len(shown) - MAX_SHOWN))


class PathCompletion(OptionList, can_focus=False):
    """The candidates, laid over the screen next to the @word; the prompt keeps focus and drives it."""

    DEFAULT_CSS = """
    PathCompletion {
        overlay: screen;
        constrain: inside inflect;
        display: none;
        width: auto;
        min-width: 24;
        max-width: 60;
        height: auto;
        max-height: 12;
        margin: 1 0;
        padding: 0 1;
        border: round $accent;
        background: $surface;
    }
    """

    def show(self, found: Candidates, at: Offset) -> None:
        """List `found` with its top-left corner by `at` (screen cells), flipped above when there is no room."""
        options: list[Option | None] = [
            Option(Content.assemble((found.folder, "$text-muted"), (name, "bold" if name.endswith("/") else "")))
            for name in found.names
        ]
        if found.more:
            options.append(Option(Content(f"… {found.more:,} more: type more of the name"), disabled=True))
        self.set_options(options)
        self.highlighted = 0
        self.absolute_offset = at
        self.display = True

    def hide(self) -> None:
        self.display = False
        self.clear_options()

    @property
    def is_open(self) -> bool:
        return bool(self.display) and self.option_count > 0
