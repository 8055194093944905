"""The Node clients the agent tests drive for real: Claude Code (`claude`) and the MCP Inspector's CLI.

Each is found in $MOA_CHAT_TEST_NODE (a folder with node_modules/.bin), else installed once from npm into a
cache folder outside the repository (~/.cache/moa-chat-tests/node); a machine without Node or npm, or one
that cannot install them, skips the tests that need them, saying why. They run with only the loopback
interface where this machine lets a process have a network namespace of its own (`unshare -n`), and always
with Claude Code's non-essential traffic (updates, telemetry, error reports) switched off.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGES = ("@anthropic-ai/claude-code", "@modelcontextprotocol/inspector")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "moa-chat-tests" / "node"
QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
}


@functools.cache
def _folder() -> tuple[Path | None, str]:
    given = os.environ.get("MOA_CHAT_TEST_NODE")
    if given:
        return Path(given), ""
    if (CACHE / "node_modules" / ".bin" / "claude").exists() and (
        CACHE / "node_modules" / ".bin" / "mcp-inspector"
    ).exists():
        return CACHE, ""
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        return None, "Node.js and npm are not installed here (Claude Code and the MCP Inspector come from npm)"
    CACHE.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(CACHE), *PACKAGES],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        return None, f"npm could not install {', '.join(PACKAGES)}: {done.stderr.strip()[-300:]}"
    return CACHE, ""


def node_bin(name: str) -> Path:
    """The installed command `name` (claude, mcp-inspector), or the test is skipped with the reason."""
    folder, why = _folder()
    if folder is None:
        pytest.skip(why)
    path = folder / "node_modules" / ".bin" / name
    if not path.exists():
        pytest.skip(f"{name} is not in {path.parent}")
    check = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=120)
    if name == "claude" and check.returncode != 0:  # the native binary's postinstall did not run
        pytest.skip(f"{path} does not run here: {(check.stderr or check.stdout).strip()[-200:]}")
    return path


@functools.cache
def loopback_only() -> list[str]:
    """The command prefix that runs a command in a network namespace with only the loopback interface up, or
    [] where this machine does not allow one (then Claude Code's non-essential traffic is off all the same)."""
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if unshare is None or ip is None:
        return []
    for prefix in ([unshare, "-n"], [unshare, "-rn"]):
        probe = subprocess.run([*prefix, ip, "link", "set", "lo", "up"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return [*prefix, "sh", "-c", f'{ip} link set lo up && exec "$@"', "loopback-only"]
    return []
