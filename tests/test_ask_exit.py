"""How `moa-chat ask` ends its process: at once after its reply, with everything written and stopped first;
and at once when a signal cancels its turn, however the process was started.

The process skips the interpreter's teardown (cli/quick_exit.py). What these tests prove is that nothing is
lost by that and nothing waits after the reply: `python -v` prints a line for each module the teardown
clears, so a process that tore itself down says so on stderr; the stored turn, its traces and the database's
clean close are read back; the MCP server is gone. How fast the exit is is measured by bench/ask_exit.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from conftest import WIRE_CONFIG, write_config
from moa_chat.providers.loopback_server import Reply
from moa_chat.store import SessionStore
from moa_chat.store.database import default_path
from moa_chat.store.traces import read_traces
from waiting import wait_until

MCP_SERVER = str(Path(__file__).with_name("mcp_tiny_server.py"))
TEARDOWN = "# cleanup["  # what `python -v` prints for each module the interpreter's teardown clears
REPLY = "The panel's answer, whole."


def alive(pid: int) -> bool:
    """A zombie counts as gone: it has stopped, and only waits for whoever reaps it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def run_python(script: str, stdout: int = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    """`script` run by `python -v` (which reports the teardown on stderr), its stdout buffered as a script's."""
    return subprocess.run(
        [sys.executable, "-v", "-c", textwrap.dedent(script)],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        env={name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"},
    )


# --------------------------------------------------------------------------- exit_now


def test_exit_now_runs_the_exit_handlers_and_flushes_stdout_then_skips_the_teardown():
    result = run_python(
        """
        import atexit, sys
        from moa_chat.cli.quick_exit import exit_now

        atexit.register(lambda: print("the exit handler ran"))
        sys.stdout.write("held in stdout's buffer; ")  # a pipe: block-buffered, not written yet
        exit_now(7)
        print("not reached")
        """
    )
    assert result.returncode == 7, result.stderr[-2000:]
    assert result.stdout == "held in stdout's buffer; the exit handler ran\n"
    assert TEARDOWN not in result.stderr


def test_exit_now_leaves_the_exit_to_python_while_a_thread_that_is_not_a_daemon_runs():
    """Python's exit waits for such a thread; the handlers then run once, after it, as they always do."""
    result = run_python(
        """
        import atexit, sys, threading
        from moa_chat.cli.quick_exit import exit_now

        release = threading.Event()
        threading.Thread(target=release.wait).start()
        atexit.register(lambda: print("the exit handler ran"))
        print("exit_now returned", exit_now(5))
        release.set()
        sys.exit(5)
        """
    )
    assert result.returncode == 5
    assert result.stdout == "exit_now returned 5\nthe exit handler ran\n"
    assert TEARDOWN in result.stderr


def test_exit_now_leaves_a_stdout_it_cannot_flush_to_python_which_reports_it():
    reader, writer = os.pipe()
    os.close(reader)  # nobody reads stdout: its flush fails
    try:
        result = run_python(
            """
            import sys
            from moa_chat.cli.quick_exit import exit_now

            sys.stdout.write("lost")
            print("exit_now returned", exit_now(3), file=sys.stderr)
            sys.exit(3)
            """,
            stdout=writer,
        )
    finally:
        os.close(writer)
    assert "exit_now returned 3" in result.stderr
    assert result.returncode == 120  # Python's own exit status when stdout cannot be flushed


# --------------------------------------------------------------------------- the real ask


def configure(home: Path, base_url: str, mcp_command: list[str]) -> None:
    command, *args = mcp_command
    write_config(
        home,
        WIRE_CONFIG.format(base_url=base_url, extra="")
        + "save_traces: true\n"
        + f"mcp_servers:\n  tiny:\n    command: {json.dumps(command)}\n    args: {json.dumps(args)}\n",
    )


def ask_verbosely(cwd: Path) -> subprocess.CompletedProcess[str]:
    """`moa-chat ask` run by `python -v`, whose stderr then shows whether the interpreter was torn down."""
    argv = [sys.executable, "-v", "-m", "moa_chat", "ask", "What now?"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=cwd)


def test_ask_skips_the_teardown_with_its_turn_stored_traced_and_its_mcp_server_stopped(home, llm_server, tmp_path):
    pid_file = tmp_path / "mcp.pid"
    # The server as the MCP client starts it, through a shell that notes its pid and becomes it.
    configure(
        home,
        llm_server.base_url,
        ["sh", "-c", f'echo $$ > {pid_file}; exec "$0" "$@"', sys.executable, MCP_SERVER],
    )
    llm_server.script("agg", Reply(text=REPLY))
    result = ask_verbosely(tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == REPLY + "\n"
    assert TEARDOWN not in result.stderr  # the process ended without tearing the interpreter down
    assert "moa-chat: done in" in result.stderr
    assert not alive(int(pid_file.read_text())), "the MCP server outlived ask"
    # ask closed the database itself: its write-ahead log was merged and removed, as a clean close does.
    database = default_path()
    assert database.exists() and not Path(f"{database}-wal").exists()
    store = SessionStore()
    session = store.latest()
    assert session is not None
    (turn,) = store.turns(session.id)
    assert turn.status == "ok"
    assert sorted(c.record.label for c in turn.calls) == ["wire:agg", "wire:ref-a", "wire:ref-b", "wire:ref-c"]
    assert len(read_traces(session.id, folder=home)) == 4
    store.close()


def test_ask_keeps_its_exit_status_when_it_skips_the_teardown(home, llm_server, tmp_path):
    configure(home, llm_server.base_url, [sys.executable, MCP_SERVER])
    llm_server.script("agg", Reply(status=400, error="the model refuses"))
    result = ask_verbosely(tmp_path)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "moa-chat: error:" in result.stderr and "the model refuses" in result.stderr
    assert TEARDOWN not in result.stderr


def test_ask_refused_before_its_turn_closes_the_store_it_opened(home, tmp_path):
    """A turn refused before it is sent (here: the aggregator's key is missing) ends the process the same quick
    way: the store it opened is closed first, its log merged and removed."""
    argv = [sys.executable, "-m", "moa_chat", "ask", "What now?", "--preset", "frontier"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 2 and "OPENROUTER_API_KEY" in result.stderr
    database = default_path()
    assert database.exists() and not Path(f"{database}-wal").exists()


def test_ask_writes_its_reply_before_it_waits_for_its_mcp_server_to_exit(home, llm_server, tmp_path):
    """Stopping an MCP server takes as long as the server takes to exit. ask asks it to stop once the turn is
    over, writes the reply, and only then waits: a reader has the whole reply while the server still runs."""
    pid_file, hold = tmp_path / "mcp.pid", tmp_path / "hold"
    os.mkfifo(hold)
    # The server's shell stays after the server until the test lets it go; it ignores the SIGTERM the MCP client
    # sends 2 s after closing the server's stdin, so only the SIGKILL 2 s after that would end it sooner.
    script = f'echo $$ > {pid_file}; trap "" TERM; "$0" "$@"; read line < {hold}'
    configure(home, llm_server.base_url, ["sh", "-c", script, sys.executable, MCP_SERVER])
    llm_server.script("agg", Reply(text=REPLY))
    process = subprocess.Popen(
        [sys.executable, "-m", "moa_chat", "ask", "What now?"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == REPLY + "\n"
        server = int(pid_file.read_text())
        assert alive(server), "the reply came only after the MCP server had exited"
        assert process.poll() is None  # ask waits for it
    finally:
        with contextlib.suppress(OSError):  # no reader: the shell has gone already
            release = os.open(hold, os.O_WRONLY | os.O_NONBLOCK)
            os.write(release, b"go\n")
            os.close(release)
        _out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert not alive(server)


# --------------------------------------------------------------------------- signals as a background job gets them

FIRST, REST = "The first words,", " then the rest."


def handled(pid: int, number: int, how: str) -> bool:
    """Whether process `pid` catches (how="SigCgt") or ignores (how="SigIgn") signal `number`."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{how}:"):
            return bool(int(line.split()[1], 16) & 1 << (number - 1))
    return False


def start_silent_turn(home: Path, llm_server, ignoring: int, resume: threading.Event) -> subprocess.Popen[str]:
    """`ask --stream` started with signal `ignoring` ignored, as a shell without job control starts a background
    command (SIGINT) or `nohup` does (SIGHUP); the aggregator streams FIRST and then holds its stream open, silent,
    until `resume` is set. No stall limit would end that wait: only the process can."""
    write_config(home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra="") + "network:\n  stall_timeout: null\n")
    llm_server.script("agg", Reply(text=FIRST + REST, pieces=[FIRST, REST], pause_after=1, pause=3600, resume=resume))
    return subprocess.Popen(
        [sys.executable, "-m", "moa_chat", "ask", "--stream", "--no-save", "What now?"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(ignoring, signal.SIG_IGN),
    )


def test_sigint_cancels_an_ask_started_with_sigint_ignored_while_the_server_holds_its_stream(home, llm_server):
    """`moa-chat ask … &` in a script (or a CI step) starts with SIGINT ignored, and a SIGINT sent to it to cancel
    it went unheard: the turn ran on until the silent stream stalled out, 30 s later (stall_timeout). It cancels
    the turn at once: the process exits 130 while the server still holds the stream open."""
    resume = threading.Event()
    process = start_silent_turn(home, llm_server, signal.SIGINT, resume)
    try:
        assert process.stdout is not None
        assert process.stdout.read(len(FIRST)) == FIRST
        request = llm_server.wait_for_request("agg")
        assert request.stalled.wait(60)
        wait_until(lambda: handled(process.pid, signal.SIGTERM, "SigCgt"), "ask's turn took its signals")
        assert handled(process.pid, signal.SIGINT, "SigCgt"), "ask leaves SIGINT ignored"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
        assert process.returncode == 130, err
        assert out == "\n"  # the part of the reply that came ends its line
        assert "Traceback" not in err and "stall" not in err
        assert request.finished.wait(60) and request.disconnected  # the cancel closed the stream
        assert not resume.is_set()
    finally:
        resume.set()
        if process.poll() is None:
            process.kill()
            process.wait()


def test_an_ask_started_with_sighup_ignored_keeps_it_ignored_and_finishes_its_turn(home, llm_server):
    """`nohup moa-chat ask …`: the terminal closing mid-turn leaves the turn running, as nohup asks."""
    resume = threading.Event()
    process = start_silent_turn(home, llm_server, signal.SIGHUP, resume)
    try:
        assert process.stdout is not None
        assert process.stdout.read(len(FIRST)) == FIRST
        assert llm_server.wait_for_request("agg").stalled.wait(60)
        wait_until(lambda: handled(process.pid, signal.SIGTERM, "SigCgt"), "ask's turn took its signals")
        assert handled(process.pid, signal.SIGHUP, "SigIgn"), "ask catches the SIGHUP that nohup ignores"
        process.send_signal(signal.SIGHUP)  # discarded by the kernel: ignored
        resume.set()
        out, err = process.communicate(timeout=60)
    finally:
        resume.set()
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert out == REST + "\n"
