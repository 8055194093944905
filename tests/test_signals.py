"""Processes and signals: moa-chat in a real terminal (tmux), against the loopback test server.

SIGTERM and SIGHUP must end the app the way Ctrl+Q does: a command the model started is killed with its
whole process group, MCP servers stop, and the terminal gets its normal screen, mouse and cursor back.
Ctrl+Q with an MCP server configured must quit promptly and leave no server behind, even one still
starting.

Bounds here are generous on purpose (a shared, loaded machine; MOA_TEST_STOP_BOUND raises them): the
assertions prove *that* things stop. How fast they stop is measured and reported, not asserted.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import WIRE_CONFIG, write_config
from moa_chat.config import McpServerConfig
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall
from moa_chat.tools.mcp_bridge import McpHub
from tui_helpers import Tmux
from waiting import alive, proc_stat, seconds_until

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to watch processes")
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

MCP_SERVER = str(Path(__file__).with_name("mcp_tiny_server.py"))
# How long anything may take to go away once told to: far above what it needs (seconds, not tens).
STOP_BOUND = float(os.environ.get("MOA_TEST_STOP_BOUND", "10"))
# A server that takes this long to start (longer than STOP_BOUND): quitting must not wait for it.
SLOW_START = 60
SESSION = "sig"
FOOTER = "wire · wire:agg ·"  # under each reply, once its turn has ended
EXITED = "moa-chat exited with status "


# --------------------------------------------------------------------------- processes, via /proc


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def _pids() -> Iterator[tuple[int, list[str]]]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := proc_stat(int(entry.name))) is not None:
            yield int(entry.name), fields


def group_alive(pgid: int) -> list[int]:
    """The live processes of process group `pgid`."""
    return [pid for pid, fields in _pids() if fields[2] == str(pgid) and fields[0] not in ("Z", "X")]


def children_running(parent: int, marker: str) -> list[int]:
    """The live children of `parent` whose command line contains `marker`."""
    return [
        pid
        for pid, fields in _pids()
        if fields[1] == str(parent) and fields[0] not in ("Z", "X") and marker in _cmdline(pid)
    ]


def one_child(parent: int, marker: str, timeout: float = 30) -> int:
    found: list[int] = []
    took = seconds_until(lambda: found.extend(children_running(parent, marker)) or found, timeout)
    assert took is not None, f"no child of {parent} running {marker!r}"
    return found[0]


def read_pid(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


# --------------------------------------------------------------------------- the terminal


class AppTerminal(Tmux):
    """The test's tmux session, and the apps started in it: killed at the end if still there (a failed test must
    not leave one)."""

    def __init__(self, socket: str) -> None:
        super().__init__(socket, SESSION)
        self.apps: list[int] = []


def modes(tmux: Tmux) -> dict[str, str]:
    """The pane's modes: the alternate screen, mouse reporting, the cursor shown."""
    names = ("alternate_on", "mouse_any_flag", "cursor_flag")
    return dict(zip(names, tmux.display(" ".join(f"#{{{name}}}" for name in names)).split(), strict=True))


def reply_ended(tmux: Tmux, text: str) -> bool:
    """Whether the last reply showing `text` has its footer under it (its turn has ended)."""
    lines = tmux.screen().splitlines()
    at = [n for n, line in enumerate(lines) if text in line]
    return bool(at) and any(FOOTER in line for line in lines[at[-1] :])


APP_RUNNING = {"alternate_on": "1", "mouse_any_flag": "1", "cursor_flag": "0"}
TERMINAL_RESTORED = {"alternate_on": "0", "mouse_any_flag": "0", "cursor_flag": "1"}


def start(tmux: AppTerminal, home: Path, cwd: Path) -> int:
    """Start moa-chat on the `wire` preset in a 120×40 pane; returns its pid.

    A shell stays in the pane after the app ends, so the pane's modes are still the ones the app left
    (with remain-on-exit, tmux's own "Pane is dead" line would hide the cursor itself)."""
    env = {
        "MOA_CHAT_HOME": str(home),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "PATH": os.environ.get("PATH", ""),
    }
    command = (
        "env -i "
        + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        + f" {shlex.quote(sys.executable)} -m moa_chat --preset wire; echo {EXITED}$?; exec sleep 600"
    )
    tmux("new-session", "-d", "-s", SESSION, "-x", "120", "-y", "40", "-c", str(cwd), command)
    app = one_child(int(tmux.display("#{pane_pid}")), "moa_chat", timeout=10)
    tmux.apps.append(app)
    return app


def assert_quit_cleanly(tmux: Tmux, app: int, server: int) -> None:
    """The app exited with status 0, took its MCP server (and that one's process group) with it, and left
    the terminal as it found it."""
    assert seconds_until(lambda: not alive(app), STOP_BOUND) is not None, "the app did not exit"
    assert seconds_until(lambda: not group_alive(server), STOP_BOUND) is not None, "the MCP server outlived the app"
    screen = tmux.wait_for(EXITED, STOP_BOUND)
    assert f"{EXITED}0" in screen and "Traceback" not in screen
    assert modes(tmux) == TERMINAL_RESTORED


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


@pytest.fixture
def tmux(request: pytest.FixtureRequest) -> Iterator[AppTerminal]:
    tmux = AppTerminal(f"moa-signals-{os.getpid()}-{abs(hash(request.node.name)) % 10**6}")
    yield tmux
    tmux.kill_server()
    for app in tmux.apps:
        if alive(app) and "moa_chat" in _cmdline(app):
            os.kill(app, signal.SIGKILL)


def tiny_server(*, slow: bool = False) -> tuple[str, list[str]]:
    """The command and arguments of the tiny MCP server; `slow`: one that takes SLOW_START s to come up
    (it sleeps first, deaf to its stdin, as a server busy installing or loading would be)."""
    if slow:
        wait = (
            f"import os, sys, time; time.sleep({SLOW_START}); os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
        )
        return sys.executable, ["-c", wait, MCP_SERVER]
    return sys.executable, [MCP_SERVER]


def configure(home: Path, base_url: str, *, slow: bool = False) -> None:
    command, args = tiny_server(slow=slow)
    servers = f"mcp_servers:\n  tiny:\n    command: {json.dumps(command)}\n    args: {json.dumps(args)}\n"
    write_config(home, WIRE_CONFIG.format(base_url=base_url, extra="") + servers)


def call(name: str, arguments: dict[str, object]) -> ScriptedToolCall:
    return ScriptedToolCall(name, json.dumps(arguments))


# --------------------------------------------------------------------------- signals


class LongCommand:
    """The model runs `sh` leading its own process group with a background `sleep` in it (both must go,
    not only the process the tool started); each writes its pid to a file."""

    def __init__(self, tmp_path: Path, llm_server: Any) -> None:
        self.leader_file, self.background_file = tmp_path / "leader.pid", tmp_path / "background.pid"
        script = f"sleep 300 & echo $! > {self.background_file}; echo $$ > {self.leader_file}; wait"
        command = call("run_command", {"command": ["sh", "-c", script]})
        llm_server.script("agg", [Reply(text="Running it.", tool_calls=[command]), Reply()])
        self.leader: int | None = None
        self.background: int | None = None

    def run(self, tmux: Tmux) -> int:
        """Ask for it, allow it, wait until it runs; returns the process group."""
        tmux.type("Run the long job")
        tmux.answer_approval("y")
        assert seconds_until(lambda: read_pid(self.leader_file) and read_pid(self.background_file), 30) is not None
        self.leader, self.background = read_pid(self.leader_file), read_pid(self.background_file)
        assert self.leader is not None and self.background is not None
        assert set(group_alive(self.leader)) >= {self.leader, self.background}
        return self.leader

    def kill_leftovers(self) -> None:
        for pid in (self.leader, self.background):
            if pid is not None and alive(pid):  # never leave a stray sleep behind a failed test
                os.kill(pid, signal.SIGKILL)


@needs_tmux
@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGHUP"])
def test_a_signal_kills_the_running_command_group_and_stops_the_mcp_server(
    home, tmp_path, project, llm_server, tmux, signal_name
):
    command = LongCommand(tmp_path, llm_server)
    configure(home, llm_server.base_url)
    app = start(tmux, home, project)
    try:
        tmux.wait_for("Ask the panel")
        server = one_child(app, "mcp_tiny_server.py")
        assert modes(tmux) == APP_RUNNING
        group = command.run(tmux)
        assert alive(app)

        os.kill(app, getattr(signal, signal_name))
        took = seconds_until(lambda: not group_alive(group), STOP_BOUND)
        print(f"\n{signal_name}: the command's process group was gone {took}s after the signal")
        assert took is not None, f"still running in the command's group: {group_alive(group)}"
        assert_quit_cleanly(tmux, app, server)
    finally:
        command.kill_leftovers()


@needs_tmux
def test_a_closed_terminal_kills_the_running_command_group_and_the_app_exits(home, tmp_path, project, llm_server, tmux):
    """A real hangup: the terminal goes away (SIGHUP, with a SIGCONT, and a dead tty)."""
    command = LongCommand(tmp_path, llm_server)
    configure(home, llm_server.base_url)
    app = start(tmux, home, project)
    try:
        tmux.wait_for("Ask the panel")
        server = one_child(app, "mcp_tiny_server.py")
        group = command.run(tmux)
        tmux("kill-server")
        assert seconds_until(lambda: not group_alive(group), STOP_BOUND) is not None, group_alive(group)
        assert seconds_until(lambda: not alive(app), STOP_BOUND) is not None, "the app outlived its terminal"
        assert seconds_until(lambda: not group_alive(server), STOP_BOUND) is not None, "the MCP server outlived the app"
    finally:
        command.kill_leftovers()


# --------------------------------------------------------------------------- Ctrl+Q with MCP servers


@needs_tmux
def test_ctrl_q_after_a_turn_that_used_an_mcp_tool_quits_and_stops_the_server(home, project, llm_server, tmux):
    def aggregator(body: dict[str, Any]) -> Reply:
        """Adds with the MCP tool once it is offered (the server starts in the background) and answers
        with its result; until then says it is not there yet, naming the try."""
        messages = body["messages"]
        assistants = [m for m in messages if m.get("role") == "assistant"]
        if assistants and assistants[-1].get("tool_calls"):
            return Reply(text=f"The sum is {[m for m in messages if m.get('role') == 'tool'][-1]['content']}.")
        if "tiny__add" in [tool["function"]["name"] for tool in body.get("tools", [])]:
            return Reply(tool_calls=[call("tiny__add", {"a": 40, "b": 2})])
        tries = re.findall(r"try (\d+)", json.dumps(messages))
        return Reply(text=f"Not there yet (try {max(map(int, tries), default=0)}).")

    llm_server.script("agg", aggregator)
    configure(home, llm_server.base_url)
    app = start(tmux, home, project)
    tmux.wait_for("Ask the panel")
    server = one_child(app, "mcp_tiny_server.py")
    for attempt in range(1, 30):
        tmux.type(f"Add forty and two, try {attempt}")
        endings = (f"(try {attempt}).", "The sum is 42.")
        ended = seconds_until(lambda endings=endings: any(reply_ended(tmux, e) for e in endings), 30, 0.1)
        assert ended is not None, tmux.screen()
        if reply_ended(tmux, "The sum is 42."):
            break
        time.sleep(1)  # the server is still starting
    else:
        raise AssertionError("the MCP tool was never offered")
    sent = time.monotonic()
    tmux.keys("C-q")
    assert seconds_until(lambda: not alive(app), STOP_BOUND, 0.005) is not None, "the app did not exit after Ctrl+Q"
    print(f"\nCtrl+Q after a turn, one MCP server: the app exited after {time.monotonic() - sent:.3f}s")
    assert_quit_cleanly(tmux, app, server)


@needs_tmux
def test_ctrl_q_while_an_mcp_server_is_still_starting_does_not_wait_for_it(home, project, llm_server, tmux):
    configure(home, llm_server.base_url, slow=True)
    app = start(tmux, home, project)
    tmux.wait_for("Ask the panel")
    server = one_child(app, "mcp_tiny_server.py")
    sent = time.monotonic()
    tmux.keys("C-q")
    # Waiting for the start (up to mcp_bridge.START_TIMEOUT, 20 s) would blow this bound.
    assert seconds_until(lambda: not alive(app), STOP_BOUND, 0.005) is not None, (
        "the app waited for the server to start"
    )
    print(f"\nCtrl+Q while the MCP server starts: the app exited after {time.monotonic() - sent:.3f}s")
    assert_quit_cleanly(tmux, app, server)


@needs_tmux
def test_the_terminal_closing_while_the_app_winds_down_does_not_keep_it_running(home, project, llm_server, tmux):
    """Ctrl+Q, then the window is closed while an MCP server is still being stopped: the SIGCONT that
    comes with the hangup must not restart the screen (which left a thread spinning on the dead terminal
    and the process never exiting)."""
    configure(home, llm_server.base_url, slow=True)  # stopping it takes the SDK's 2 s grace: a window
    app = start(tmux, home, project)
    tmux.wait_for("Ask the panel")
    server = one_child(app, "mcp_tiny_server.py")
    tmux.keys("C-q")
    assert seconds_until(lambda: modes(tmux)["alternate_on"] == "0", STOP_BOUND) is not None  # the app is winding down
    assert alive(app)
    tmux("kill-server")
    assert seconds_until(lambda: not alive(app), STOP_BOUND) is not None, "the app never exited"
    assert seconds_until(lambda: not group_alive(server), STOP_BOUND) is not None, "the MCP server outlived the app"


# --------------------------------------------------------------------------- the hub on its own


def test_closing_the_hub_abandons_a_start_in_progress_without_reporting_a_failure():
    command, args = tiny_server(slow=True)
    hub = McpHub({"tiny": McpServerConfig("tiny", command, tuple(args))})
    reports: list[str] = []
    starting = threading.Thread(target=hub.start, args=(reports.append,), daemon=True)
    starting.start()
    server = one_child(os.getpid(), "mcp_tiny_server.py")
    hub.close()
    starting.join(STOP_BOUND)
    assert not starting.is_alive(), "start() kept waiting for a server the hub had closed"
    assert seconds_until(lambda: not group_alive(server), STOP_BOUND) is not None, "the server outlived close()"
    assert reports == [] and hub.failures == {} and hub.tools() == []
    hub.start()  # a closed hub starts nothing again
    assert hub.servers == []
