"""Nothing sent is lost under kill: `moa-chat ask` is killed with SIGKILL at random points of a turn, 50
times with a fixed seed, sometimes with a second instance writing to the same data folder at the same
time. After each kill the database passes integrity_check, and every prompt that reached the provider is
in it (a prompt is committed before any request goes out).

The interactive app gets the same treatment, 12 times: run in a real terminal (tmux), sent a prompt with
Enter, and killed before its reply starts, while it streams, or after it ended, sometimes with an `ask`
writing to the same data folder at the same moment and sometimes after resuming the session the previous
kill cut short."""

from __future__ import annotations

import contextlib
import os
import random
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from moa_chat.providers.loopback_server import RecordedRequest, Reply
from moa_chat.store import SessionStore
from scripted_server import ScriptedServer
from waiting import seconds_until, wait_until

ITERATIONS = 50
SEED = 20261201
# Streamed over about 1.2 s: long enough for a kill to land inside it, and for a partial save (every
# FLUSH_SECONDS) to happen first.
LONG_REPLY = Reply(text=" ".join(f"w{n}" for n in range(300)), piece_delay=0.004)


def test_sigkill_at_random_points_loses_no_prompt_that_was_sent(home, wire_config, llm_server):
    wire_config()
    llm_server.script("agg", LONG_REPLY)
    rng = random.Random(SEED)
    database = home / "sessions.db"
    env = dict(os.environ)
    reached: set[str] = set()
    sdk_import = _sdk_import_seconds()
    for iteration in range(ITERATIONS):
        prompts = [f"prompt {iteration}"] + ([f"prompt {iteration} twin"] if iteration % 5 == 0 else [])
        processes = [
            subprocess.Popen(
                [sys.executable, "-m", "moa_chat", "ask", prompt, "-q"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
            )
            for prompt in prompts
        ]
        # Start-up (imports) is not where the kills aim, and takes seconds on a busy machine: the clock starts
        # when the store is opened, so the kills land in the first writes, the fan-out, the stream and after.
        # Between the first writes and the first request, the turn loads the SDK (0.5-1.5 s, by machine):
        # a quarter of the kills land in that stretch, the rest in the 1.7 s after it.
        _wait_until_open(processes[0], database)
        first = rng.random() < 0.25
        time.sleep(rng.uniform(0.0, sdk_import) if first else sdk_import + rng.uniform(0.0, 1.7))
        for process in processes:
            process.send_signal(signal.SIGKILL)
        for process in processes:
            process.wait(10)
        if not database.exists():
            continue
        with sqlite3.connect(database) as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", iteration
            stored = {row[0] for row in db.execute("SELECT content FROM messages WHERE role = 'user'")}
        reached = {
            message["content"]
            for request in llm_server.requests
            for message in request.messages
            if message.get("role") == "user" and str(message.get("content", "")).startswith("prompt ")
        }
        missing = reached - stored
        assert not missing, f"iteration {iteration}: sent but not stored: {sorted(missing)}"
    # The loop did exercise what it claims: prompts reached the provider and were kept, some kills landed
    # mid-stream (a partial reply was saved), and some turns had finished before theirs.
    assert len(reached) >= ITERATIONS // 2, f"only {len(reached)} prompts reached the provider"
    with sqlite3.connect(database) as db:
        partial = db.execute("SELECT COUNT(*) FROM messages WHERE partial = 1").fetchone()[0]
        finished = db.execute("SELECT COUNT(*) FROM turns WHERE status = 'ok'").fetchone()[0]
        running = db.execute("SELECT COUNT(*) FROM turns WHERE status = 'running'").fetchone()[0]
    assert partial > 0 and running > 0, (partial, finished, running)
    print(
        f"kill loop: {len(reached)} prompts reached the provider, {partial} partial replies, "
        f"{finished} turns finished, {running} killed mid-turn"
    )


def _sdk_import_seconds() -> float:
    """How long a fresh process takes to import the openai SDK on this machine."""
    code = "import time; t = time.perf_counter(); import openai; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def _wait_until_open(process: subprocess.Popen[bytes], database: Path, timeout: float = 30.0) -> None:
    """Until `process` has `database` open, or has ended."""

    def opened() -> bool:
        with contextlib.suppress(OSError):  # it may end, or close a descriptor, while we look
            folder = Path(f"/proc/{process.pid}/fd")
            return any(Path(os.readlink(folder / fd)).name == database.name for fd in os.listdir(folder))
        return False

    seconds_until(lambda: process.poll() is not None or opened(), timeout, interval=0.01)


TUI_ITERATIONS = 12
TUI_SEED = 20261202
OURS = re.compile(r"tui (?:prompt|twin) \d\d")
PLACEHOLDER = "Ask the panel"  # the empty prompt box: on screen at start, and again once Enter was taken
# Where each kill lands after the Enter, in turn: what it waits for, then a random delay (seconds).
PHASES = (
    ("the enter", (0.0, 0.3)),  # often before the app has read the Enter at all
    ("the prompt shown as sent", (0.0, 0.15)),  # the box emptied, the prompt in the log: before any reply
    ("the aggregator's request", (0.0, 0.9)),  # while the reply streams (for 1.2 s at least)
    ("the finished turn", (0.0, 0.5)),  # after the reply, the app idle again
)


class Terminal:
    """One tmux server for the test, one session per run of the app. A dead app's pane stays, showing its
    last frame: what the user saw when it was killed."""

    def __init__(self, socket: str) -> None:
        self.socket = socket
        # tmux exits with its last session: a session that outlives every app's keeps one server up, so
        # that a new app never races the old server's exit.
        self("new-session", "-d", "-s", "keep", "cat")
        self.socket_path = Path(self("display", "-p", "-t", "keep", "#{socket_path}").strip())

    def __call__(self, *args: str) -> str:
        command = ["tmux", "-L", self.socket, "-f", "/dev/null", *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=10)
        assert done.returncode == 0, f"{shlex.join(command)}: {done.stderr}"
        return done.stdout

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10)
        self.socket_path.unlink(missing_ok=True)  # tmux leaves it behind

    def start(self, name: str, home: Path, args: list[str]) -> int:
        # A clean environment, as a user's terminal has: no pytest variables, no inherited COLUMNS/LINES.
        env = {
            "MOA_CHAT_HOME": str(home),
            "HOME": str(home),
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
            "PATH": os.environ.get("PATH", ""),
        }
        command = shlex.join(["exec", "env", "-i", *(f"{k}={v}" for k, v in env.items()), sys.executable])
        command += " -m moa_chat " + shlex.join(args)
        self("new-session", "-d", "-s", name, "-x", "120", "-y", "40", "-c", str(home), command)
        self("set-option", "-w", "-t", name, "remain-on-exit", "on")
        pid = int(self("display", "-p", "-t", name, "#{pane_pid}").strip())
        # SIGKILL must hit the app itself, not the shell or the tmux child it is exec'd from.
        wait_until(lambda: b"moa_chat" in Path(f"/proc/{pid}/cmdline").read_bytes(), "the app to start")
        return pid

    def screen(self, name: str) -> str:
        return self("capture-pane", "-p", "-t", name)

    def wait_for(self, name: str, text: str, timeout: float = 30.0) -> None:
        wait_until(
            lambda: text in self.screen(name),
            f"{text!r} on the screen",
            timeout=timeout,
            show=lambda: self.screen(name),
        )

    def last_frame(self, name: str) -> str:
        """The screen as the app left it: tmux has read everything the app wrote once the pane is dead."""
        wait_until(lambda: self("display", "-p", "-t", name, "#{pane_dead}").strip() == "1", "the app to die")
        screen = self.screen(name)
        self("kill-session", "-t", name)
        return screen


def _shown_as_sent(screen: str, prompt: str) -> bool:
    """The box emptied (its placeholder is back) and the prompt moved into the chat log: the app took it."""
    return prompt in screen and PLACEHOLDER in screen


def _reached(llm_server: ScriptedServer) -> set[str]:
    """The TUI test's prompts that some request carried to the provider. A prompt whose turn was killed
    before its reply is followed by the next one; the two travel joined in one user message, so each is
    found by its pattern, not as a whole message."""
    return {
        found
        for request in llm_server.requests
        for message in request.messages
        if message.get("role") == "user"
        for found in OURS.findall(str(message.get("content", "")))
    }


def _sessions(database: Path) -> int:
    if not database.exists():
        return 0
    with sqlite3.connect(database) as db:
        return int(db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])


def _turn_status(database: Path, prompt: str) -> str | None:
    with sqlite3.connect(database) as db:
        row = db.execute(
            "SELECT t.status FROM turns t JOIN messages m ON m.id = t.user_message_id WHERE m.content = ?", (prompt,)
        ).fetchone()
    return None if row is None else str(row[0])


def _asked(llm_server: ScriptedServer, prompt: str) -> list[RecordedRequest]:
    """The aggregator's requests for the turn that sent `prompt` (later turns carry it as history)."""
    return [r for r in llm_server.requests_for("agg") if _last_prompt(r) == prompt]


def _last_prompt(request: RecordedRequest) -> str | None:
    # The aggregator's last user message is the references' guidance: the newest of ours comes before it.
    users = [str(m.get("content")) for m in request.messages if m.get("role") == "user"]
    ours = [found for text in users for found in OURS.findall(text) if found.startswith("tui prompt ")]
    return ours[-1] if ours else None


def _send_and_kill(
    terminal: Terminal, llm_server: ScriptedServer, home: Path, iteration: int, prompt: str, rng: random.Random
) -> str:
    """Start the app, send `prompt`, SIGKILL it where this iteration's phase aims; returns its last frame."""
    # Every other run resumes the session the last kill cut short: the store must open and go on.
    resume = iteration % 2 == 1 and _sessions(home / "sessions.db") > 0
    name = f"kill{iteration}"
    pid = terminal.start(name, home, ["--resume"] if resume else [])
    terminal.wait_for(name, PLACEHOLDER)
    terminal("send-keys", "-t", name, "-l", prompt)
    terminal.wait_for(name, prompt)
    twin = None
    if iteration % 4 == 1:  # an `ask` on the same data folder, killed at the same moment
        twin = subprocess.Popen(
            [sys.executable, "-m", "moa_chat", "ask", f"tui twin {iteration:02d}", "-q"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=dict(os.environ),
        )
    terminal("send-keys", "-t", name, "Enter")
    anchor, delay = PHASES[iteration % len(PHASES)]
    if anchor == "the prompt shown as sent":
        wait_until(lambda: _shown_as_sent(terminal.screen(name), prompt), anchor, show=lambda: terminal.screen(name))
    elif anchor == "the aggregator's request":
        wait_until(lambda: bool(_asked(llm_server, prompt)), anchor, show=lambda: terminal.screen(name))
    elif anchor == "the finished turn":  # as stored: on a busy machine the app ends it well after the stream
        wait_until(
            lambda: _turn_status(home / "sessions.db", prompt) == "ok", anchor, show=lambda: terminal.screen(name)
        )
    time.sleep(rng.uniform(*delay))
    os.kill(pid, signal.SIGKILL)
    if twin is not None:
        twin.kill()
        twin.wait(10)
    return terminal.last_frame(name)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_sigkill_of_the_tui_at_random_points_loses_no_prompt_that_was_sent(home, wire_config, llm_server):
    wire_config()
    llm_server.script("agg", LONG_REPLY)
    rng = random.Random(TUI_SEED)
    database = home / "sessions.db"
    terminal = Terminal(f"moa-kill-{os.getpid()}")
    outcomes: Counter[str] = Counter()
    try:
        for iteration in range(TUI_ITERATIONS):
            prompt = f"tui prompt {iteration:02d}"
            screen = _send_and_kill(terminal, llm_server, home, iteration, prompt, rng)
            with sqlite3.connect(database) as db:
                assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", iteration
                stored = {row[0] for row in db.execute("SELECT content FROM messages WHERE role = 'user'")}
                remembered = {row[0] for row in db.execute("SELECT text FROM prompt_history")}
            missing = _reached(llm_server) - stored
            assert not missing, f"iteration {iteration}: sent but not stored: {sorted(missing)}\n{screen}"
            # The app keeps a prompt for ↑ before it shows it as sent, so the user can always send it again.
            taken = _shown_as_sent(screen, prompt)
            if taken:
                assert prompt in remembered, f"iteration {iteration}: shown as sent, not kept\n{screen}"
            status = _turn_status(database, prompt)
            if prompt in _reached(llm_server):
                outcomes["killed mid-turn" if status == "running" else f"turn {status}"] += 1
            elif prompt in stored:
                outcomes["stored, killed before any request"] += 1
            elif taken:
                outcomes["shown, killed before it was stored"] += 1
            else:
                outcomes["killed before the app took the Enter"] += 1
    finally:
        terminal.close()

    # The app's own store still opens the survivors' database and reads every session in it.
    store = SessionStore(database)
    for summary in store.sessions():
        store.path(summary.id)
        store.turns(summary.id)
    store.close()
    # The kills did land where they were aimed: mid-turn, after a finished turn, and before a reply.
    assert outcomes["killed mid-turn"] > 0 and outcomes["turn ok"] > 0, outcomes
    assert sum(outcomes.values()) - outcomes["killed mid-turn"] - outcomes["turn ok"] > 0, outcomes
    print(f"TUI kill loop ({TUI_ITERATIONS} kills): " + ", ".join(f"{n} {what}" for what, n in outcomes.items()))
