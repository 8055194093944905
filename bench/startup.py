"""How fast does moa-chat start, against a bare Textual app and a bare Python?

Each measurement runs a fresh process in a pseudo-terminal of 120×36, as a user's terminal would, and
stops the clock when the screen a user sees is complete: for the chat, when the header, the prompt and
the footer have all been written (the app paints its first full screen in one frame); for the bare Textual
app, when its label and footer have. The two alternate, round after round, so noise on this shared machine
hits both alike. The command-line subcommands are timed to their exit.

    python bench/startup.py [--rounds 7] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import pty
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import textwrap
import time
from pathlib import Path

BARE_APP = textwrap.dedent(
    """
    from textual.app import App
    from textual.widgets import Footer, Label

    class Hello(App):
        BINDINGS = [("ctrl+q", "quit", "Quit")]

        def compose(self):
            yield Label("hello from a bare Textual app")
            yield Footer()

    Hello().run()
    """
)
# Text that appears only once the whole first screen is painted (the footer is the last thing written).
CHAT_MARKERS = (b"moa-chat", b"Quit", b"Help")
BARE_MARKERS = (b"hello from a bare", b"Quit")


def first_screen(argv: list[str], markers: tuple[bytes, ...], env: dict[str, str], timeout: float = 30.0) -> float:
    """Seconds from spawning `argv` in a pty until every marker has been written to the terminal."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, stdin=follower, stdout=follower, stderr=follower, env=env, start_new_session=True, close_fds=True
    )
    os.close(follower)
    seen = b""
    try:
        while time.perf_counter() - started < timeout:
            ready, _, _ = select.select([leader], [], [], 0.05)
            if not ready:
                continue
            try:
                seen += os.read(leader, 65536)
            except OSError:
                break
            if all(marker in seen for marker in markers):
                return time.perf_counter() - started
        raise RuntimeError(f"{argv[-1]} never showed {markers} within {timeout}s; saw {seen[-400:]!r}")
    finally:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        os.close(leader)


def to_exit(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds

    home = Path(tempfile.mkdtemp(prefix="moa-bench-startup-"))
    env = {**os.environ, "MOA_CHAT_HOME": str(home), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "36"}
    for name in [n for n in env if n.endswith("_API_KEY")]:
        del env[name]  # the offline demo, as a new user starts
    bare = home / "bare_app.py"
    bare.write_text(BARE_APP)
    python = sys.executable
    rows: dict[str, list[float]] = {
        "python -c pass": [],
        "bare Textual app, first screen": [],
        "moa-chat, first screen": [],
        "moa-chat --help": [],
        "moa-chat presets": [],
    }
    # One warm-up of each, so the first round does not pay for a cold page cache.
    first_screen([python, str(bare)], BARE_MARKERS, env)
    first_screen([python, "-m", "moa_chat"], CHAT_MARKERS, env)
    for _ in range(rounds):
        rows["python -c pass"].append(to_exit([python, "-c", "pass"], env))
        rows["bare Textual app, first screen"].append(first_screen([python, str(bare)], BARE_MARKERS, env))
        rows["moa-chat, first screen"].append(first_screen([python, "-m", "moa_chat"], CHAT_MARKERS, env))
        rows["moa-chat --help"].append(to_exit([python, "-m", "moa_chat", "--help"], env))
        rows["moa-chat presets"].append(to_exit([python, "-m", "moa_chat", "presets"], env))
    medians = {name: statistics.median(times) for name, times in rows.items()}
    print(f"start-up, median of {rounds} alternating rounds (120×36 pty)")
    print(f"{'':36} {'median':>9} {'min':>9} {'max':>9}")
    for name, times in rows.items():
        print(f"{name:36} {medians[name] * 1000:8.0f}ms {min(times) * 1000:8.0f}ms {max(times) * 1000:8.0f}ms")
    ratio = medians["moa-chat, first screen"] / medians["bare Textual app, first screen"]
    print(f"\nmoa-chat's first screen / a bare Textual app's: ×{ratio:.2f} (target ≤ ×1.5)")
    for name in ("moa-chat --help", "moa-chat presets"):
        print(f"{name}: {medians[name] * 1000:.0f} ms (target ≤ 300 ms)")


if __name__ == "__main__":
    main()
