"""Copying text to the system clipboard, and saying truthfully whether it got there.

The TUI also sends every copy to the terminal as OSC 52, but that reaches a clipboard only if the terminal
allows it, and under tmux only with `set -g set-clipboard on` (tmux's default, "external", drops it). So where
a clipboard tool exists it is used as well, and the message names what was done rather than saying "Copied".
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

TIMEOUT = 2.0  # seconds for a clipboard tool (the UI waits for it on a worker, not on its own thread)


@dataclass(frozen=True)
class Tool:
    name: str
    command: tuple[str, ...]
    display: str | None  # the variable a display server sets, without which the tool cannot work


# Wayland first: under XWayland DISPLAY is set too, and xclip would fill a clipboard Wayland apps do not read.
TOOLS = (
    Tool("wl-copy", ("wl-copy",), "WAYLAND_DISPLAY"),
    Tool("xclip", ("xclip", "-selection", "clipboard"), "DISPLAY"),
    Tool("xsel", ("xsel", "--clipboard", "--input"), "DISPLAY"),
    Tool("pbcopy", ("pbcopy",), None),
)


@dataclass(frozen=True)
class CopyOutcome:
    """What became of a copy: the tool that took it (if any), why others did not, and tmux's setting."""

    tool: str | None = None
    failures: tuple[str, ...] = ()  # "xclip: exit status 1"
    tmux: str | None = None  # inside tmux: its set-clipboard value ("on", "external", "off"; "" if unknown)

    def message(self, what: str) -> tuple[str, str]:
        """(sentence, severity) for a notification: `what` is e.g. "the last reply (1,234 characters)"."""
        tried = f" ({'; '.join(self.failures)})" if self.failures else ""
        if self.tool:
            return f"Copied {what} with {self.tool}.", "information"
        here = "Ctrl+V pastes it in the prompt."
        if self.tmux is None:
            return (
                f"Sent {what} to the terminal's clipboard (OSC 52){tried}: copied if the terminal allows it. {here}",
                "information",
            )
        if self.tmux == "on":
            return (
                f"Sent {what} to the terminal's clipboard (OSC 52){tried}; tmux passes it on (set-clipboard on): "
                f"copied if the terminal outside tmux allows it. {here}",
                "information",
            )
        setting = f" (it is {self.tmux!r} here)" if self.tmux else ""
        return (
            f"Sent {what} to the terminal's clipboard (OSC 52){tried} — tmux passes it on only with "
            f"`set -g set-clipboard on`{setting}. {here}",
            "warning",
        )


def usable_tools(env: Mapping[str, str]) -> list[tuple[Tool, str]]:
    """(tool, its path) for each clipboard tool on PATH whose display server is there."""
    found: list[tuple[Tool, str]] = []
    for tool in TOOLS:
        if tool.display is not None and not env.get(tool.display):
            continue
        path = shutil.which(tool.name, path=env.get("PATH", os.defpath))
        if path:
            found.append((tool, path))
    return found


def copy(text: str, env: Mapping[str, str] | None = None, timeout: float = TIMEOUT) -> CopyOutcome:
    """Put `text` on the system clipboard with the first tool that takes it; blocks up to `timeout` per tool."""
    env = dict(os.environ if env is None else env)
    failures: list[str] = []
    for tool, path in usable_tools(env):
        try:
            # No pipes back: xclip and wl-copy stay behind to serve the clipboard, holding any output open.
            result = subprocess.run(
                [path, *tool.command[1:]],
                input=text.encode("utf-8"),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            failures.append(f"{tool.name}: no answer in {timeout:g}s")
            continue
        except OSError as exc:
            failures.append(f"{tool.name}: {exc.strerror or exc}")
            continue
        if result.returncode == 0:
            return CopyOutcome(tool=tool.name, failures=tuple(failures))
        failures.append(f"{tool.name}: exit status {result.returncode}")
    return CopyOutcome(failures=tuple(failures), tmux=tmux_set_clipboard(env))


def tmux_set_clipboard(env: Mapping[str, str], timeout: float = 1.0) -> str | None:
    """Inside tmux (TMUX is set): its set-clipboard option, or "" if tmux would not say. Outside: None."""
    if not env.get("TMUX"):
        return None
    tmux = shutil.which("tmux", path=env.get("PATH", os.defpath))
    if tmux is None:
        return ""
    try:
        result = subprocess.run(
            [tmux, "show-options", "-gv", "set-clipboard"],
            capture_output=True,
            text=True,
            env=dict(env),
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return result.stdout.strip() if result.returncode == 0 else ""
