"""A real terminal: moa-chat under tmux, driven with send-keys and read back with capture-pane."""

from __future__ import annotations

import os
import shlex
import shutil
import sys

import pytest
from tui_helpers import Tmux
from waiting import wait_until

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def start(tmux: Tmux, home, cwd=None, args: str = "--preset demo") -> None:
    # A clean environment: an inherited COLUMNS/LINES would override the pane's real size.
    env = {
        "MOA_CHAT_HOME": str(home),
        "MOA_CHAT_DEMO_PACE": "0.2",
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "PATH": os.environ.get("PATH", ""),
    }
    command = (
        "env -i "
        + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        + f" {shlex.quote(sys.executable)} -m moa_chat {args}"
    )
    tmux("new-session", "-d", "-s", "smoke", "-x", "120", "-y", "40", "-c", str(cwd or home), command)


def quit_and_wait(tmux: Tmux) -> None:
    tmux.keys("C-q")
    tmux.session_ended()


def test_chat_on_the_demo_preset_in_a_real_terminal(home):
    tmux = Tmux(f"moa-smoke-{os.getpid()}", "smoke")
    start(tmux, home)
    try:
        tmux.wait_for("Ask the panel")
        tmux.type("How do I test a command-line tool?")
        screen = tmux.wait_for("demo · demo:simulated-synthesizer ·")
        assert "How do I test a command-line tool?" in screen
        assert "A first version to start from" in screen or "Run it on one real example" in screen
        for label in ("simulated-analyst", "simulated-skeptic", "simulated-pragmatist"):
            assert f"✓ demo:{label}" in screen
        assert screen.count("done ") >= 4  # three references and the aggregator finished
        quit_and_wait(tmux)
    finally:
        tmux.kill_server()


def test_tools_run_and_changes_wait_for_approval_in_a_real_terminal(home, tmp_path):
    from moa_chat.providers.demo import DEMO_NOTE

    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("# Smoke project\n\nUsed by the tmux test.\n")
    tmux = Tmux(f"moa-smoke-tools-{os.getpid()}", "smoke")
    start(tmux, home, cwd=project)
    try:
        tmux.wait_for("Ask the panel")
        tmux.type("What files are in this folder and what does README.md say?")
        screen = tmux.wait_for("“Smoke project”")  # the quote streams after "opens with": wait for all of it
        assert "list_directory" in screen and "read_file" in screen and "“Smoke project”" in screen
        tmux.wait_for("demo · demo:simulated-synthesizer ·")
        tmux.type("Please write a note file about it")
        screen = tmux.wait_for("Allow once")
        assert DEMO_NOTE in screen and not (project / DEMO_NOTE).exists()
        tmux.answer_approval("y")
        tmux.wait_for("created " + DEMO_NOTE)
        assert (project / DEMO_NOTE).read_text().startswith("# Notes")
        quit_and_wait(tmux)
    finally:
        tmux.kill_server()


def test_a_chat_is_saved_and_resume_brings_it_back(home):
    tmux = Tmux(f"moa-smoke-resume-{os.getpid()}", "smoke")
    start(tmux, home)
    try:
        tmux.wait_for("Ask the panel")
        tmux.type("How should I name my variables?")
        tmux.wait_for("demo · demo:simulated-synthesizer ·")
        quit_and_wait(tmux)
        start(tmux, home, args="--resume")
        # Wait for the whole history to be painted (its last line, the reply's footer), then look.
        screen = tmux.wait_for("demo · demo:simulated-synthesizer ·")
        assert "How should I name my variables?" in screen  # the prompt and its reply came back
        assert "Ask the panel" in screen
        header, footer = screen.splitlines()[0], next(line for line in screen.splitlines() if "demo · demo:" in line)
        tokens = footer.split(" · ")[-1].split("tokens")[0].strip()
        assert header.endswith(f"{tokens} tokens")  # the session's total, not 0: its ledger came back too
        shown = screen.count("How should I name my variables?")
        tmux.keys("Up")  # ↑ history survived the restart: the prompt box fills
        screen = tmux.wait_until(lambda screen: "Ask the panel" not in screen, "the prompt box filled from history")
        assert screen.count("How should I name my variables?") == shown + 1
        quit_and_wait(tmux)
    finally:
        tmux.kill_server()


@pytest.mark.parametrize("signal_name", ["TERM", "HUP"])
def test_sigterm_and_sighup_leave_the_terminal_as_they_found_it(home, signal_name):
    tmux = Tmux(f"moa-smoke-signal-{signal_name}-{os.getpid()}", "smoke")
    start(tmux, home)
    try:
        tmux.wait_for("Ask the panel")
        assert tmux.display("#{alternate_on}") == "1"
        pid = int(tmux.display("#{pane_pid}"))
        tmux("set-option", "-t", "smoke", "remain-on-exit", "on")
        os.kill(pid, getattr(__import__("signal"), f"SIG{signal_name}"))
        wait_until(lambda: tmux.display("#{pane_dead}") == "1", "the app to exit", interval=0.1)
        state = tmux.display("#{pane_dead} #{alternate_on} #{mouse_any_flag}")
        assert state.split() == ["1", "0", "0"]  # exited, as Ctrl+Q leaves it: the normal screen, mouse off
    finally:
        tmux.kill_server()


def prompt_lines(screen: str) -> list[str]:
    """The screen's lines with box edges and the log's bars taken off: what each row says."""
    return [line.strip(" │▌▊╭╮╰╯─") for line in screen.splitlines()]


def test_new_line_keys_and_shift_f3_as_terminals_send_them(home):
    tmux = Tmux(f"moa-smoke-keys-{os.getpid()}", "smoke")
    start(tmux, home)
    try:
        tmux.wait_for("Ask the panel")
        # One burst, as xterm or GNOME Terminal would send it: LF is Ctrl+J, ESC CR is Alt+Enter.
        tmux.keys("-H", *(f"{b:02x}" for b in b"one\ntwo\x1b\rthree"))
        tmux.keys("M-Enter")  # tmux's own Alt+Enter (ESC CR)
        tmux.type("four", enter=False)
        tmux.keys("C-j")
        tmux.type("five", enter=False)
        lines = prompt_lines(tmux.wait_until(lambda screen: "five" in prompt_lines(screen), "the fifth line typed"))
        start_row = lines.index("one")
        assert lines[start_row : start_row + 5] == ["one", "two", "three", "four", "five"]
        assert "consulting" not in tmux.screen()  # none of them sent the prompt

        header = tmux.screen().splitlines()[0]

        def header_is(expected: bool, what: str) -> None:
            tmux.wait_until(lambda screen: (screen.splitlines()[0] == header) is expected, what)

        tmux.keys("F3")
        header_is(False, "F3 to step to the next preset")
        # Shift+F3 twice: as tmux sends it (CSI 1;2R), then as raw xterm bytes; back where it started, and past.
        tmux.keys("S-F3")
        header_is(True, "Shift+F3 (tmux's) to step back")
        tmux.keys("-H", *(f"{b:02x}" for b in b"\x1b[1;2R"))
        header_is(False, "Shift+F3 (xterm's bytes) to step back again")
        tmux.keys("F3")  # back on the demo preset, to send
        header_is(True, "F3 to step forward to the demo preset")

        tmux.keys("Enter")  # and Enter sends the five lines
        tmux.wait_for("Here is what the panel makes of one two three")  # sent whole, as one prompt
        quit_and_wait(tmux)
    finally:
        tmux.kill_server()
