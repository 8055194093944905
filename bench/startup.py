"""How fast does moa-chat start, against a bare Textual app and a bare Python?

Each measurement runs a fresh process in a pseudo-terminal of 120×36, as a user's terminal would, reads what
it writes as it comes, feeds it to a terminal emulator (pyte), and stops the clock at the arrival of the
bytes that made the last change to the screen's text: the moment the screen a user sees is complete and
stays so (the run ends after a second without a change, which a blinking cursor does not make). Waiting for
a few strings instead stopped early: the footer was in the first frame, and the notices under the welcome
only in the next. The chat and a bare Textual app alternate, round after round, so noise on this shared
machine hits both alike. The command-line subcommands are timed to their exit.

    pip install -e '.[bench]'        # pyte, the terminal emulator
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
import termios
import textwrap
import threading
import time
from pathlib import Path

from harness import scratch_home

try:
    import pyte
except ImportError:
    sys.exit("bench/startup.py reads the screen with pyte: pip install -e '.[bench]'")

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
# Text the finished screen must show (so that an error screen, which settles too, is not timed as a start).
CHAT_MARKERS = ("moa-chat", "Ask the panel", "Quit")
BARE_MARKERS = ("hello from a bare", "Quit")
COLUMNS, LINES = 120, 36
QUIET = 1.0  # seconds without a change to the screen's text: the start-up is over


def first_screen(argv: list[str], markers: tuple[str, ...], env: dict[str, str], timeout: float = 30.0) -> float:
    """Seconds from spawning `argv` in a pty to the arrival of the bytes that last changed the screen's text
    before it settled."""
    screen = pyte.Screen(COLUMNS, LINES)
    stream = pyte.ByteStream(screen)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
    arrived: list[tuple[float, bytes]] = []
    done = threading.Event()

    def drain() -> None:
        # As a real terminal does, the pty is read the moment the app writes. Parsing here would be pyte's pace
        # (tens of milliseconds for each 4 KB the pty buffers), and the app's writes would wait on it: a first
        # frame of 20 KB took 150 ms longer to arrive than one of 3 KB, for the emulator's sake alone.
        while not done.is_set():
            ready, _, _ = select.select([leader], [], [], 0.02)
            if ready:
                try:
                    data = os.read(leader, 65536)
                except OSError:
                    return
                arrived.append((time.perf_counter(), data))

    started = time.perf_counter()
    process = subprocess.Popen(
        argv, stdin=follower, stdout=follower, stderr=follower, env=env, start_new_session=True, close_fds=True
    )
    os.close(follower)
    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    shown: list[str] = []
    changed = started
    parsed = 0
    try:
        while (now := time.perf_counter()) - started < timeout:
            time.sleep(0.05)
            for at, data in arrived[parsed:]:
                parsed += 1
                stream.feed(data)
                if screen.display != shown:
                    shown, changed = screen.display, at
            if now - changed >= QUIET and all(marker in "\n".join(shown) for marker in markers):
                return changed - started
        text = "\n".join(line.rstrip() for line in shown)
        raise RuntimeError(f"{argv[-1]} never settled on {markers} within {timeout}s; the screen:\n{text}")
    finally:
        done.set()
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        reader.join()
        os.close(leader)


def to_exit(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument(
        "--tree", action="append", default=[], metavar="NAME=PATH", help="another moa_chat to start (its folder)"
    )
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds

    home = Path(scratch_home("moa-bench-startup-"))
    env = {**os.environ, "MOA_CHAT_HOME": str(home), "TERM": "xterm-256color"}
    env |= {"COLUMNS": str(COLUMNS), "LINES": str(LINES)}
    for name in [n for n in env if n.endswith("_API_KEY")]:
        del env[name]  # the offline demo, as a new user starts
    # A user's Python caches compiled modules (pip compiles site-packages at install; an editable install
    # writes app/__pycache__ on first run). Some sandboxes set PYTHONDONTWRITEBYTECODE, which would make
    # every run recompile moa-chat's own modules while Textual's stay compiled: not what a user sees.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
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
    # --tree: the same start from another copy of the package, found first on PYTHONPATH.
    trees = {name: {**env, "PYTHONPATH": path} for name, path in (tree.split("=", 1) for tree in args.tree)}
    rows |= {f"moa-chat ({name}), first screen": [] for name in trees}
    # One warm-up of each, so the first round does not pay for a cold page cache.
    first_screen([python, str(bare)], BARE_MARKERS, env)
    first_screen([python, "-m", "moa_chat"], CHAT_MARKERS, env)
    for tree_env in trees.values():
        first_screen([python, "-m", "moa_chat"], CHAT_MARKERS, tree_env)
    for _ in range(rounds):
        rows["python -c pass"].append(to_exit([python, "-c", "pass"], env))
        rows["bare Textual app, first screen"].append(first_screen([python, str(bare)], BARE_MARKERS, env))
        rows["moa-chat, first screen"].append(first_screen([python, "-m", "moa_chat"], CHAT_MARKERS, env))
        for name, tree_env in trees.items():
            row = rows[f"moa-chat ({name}), first screen"]
            row.append(first_screen([python, "-m", "moa_chat"], CHAT_MARKERS, tree_env))
        rows["moa-chat --help"].append(to_exit([python, "-m", "moa_chat", "--help"], env))
        rows["moa-chat presets"].append(to_exit([python, "-m", "moa_chat", "presets"], env))
    medians = {name: statistics.median(times) for name, times in rows.items()}
    print(f"start-up to a settled screen, median of {rounds} alternating rounds ({COLUMNS}×{LINES} pty)")
    print(f"{'':36} {'median':>9} {'min':>9} {'max':>9}")
    for name, times in rows.items():
        print(f"{name:36} {medians[name] * 1000:8.0f}ms {min(times) * 1000:8.0f}ms {max(times) * 1000:8.0f}ms")
    ratio = medians["moa-chat, first screen"] / medians["bare Textual app, first screen"]
    print(f"\nmoa-chat's first screen / a bare Textual app's: ×{ratio:.2f} (target ≤ ×1.5)")
    for name in trees:
        other = medians[f"moa-chat ({name}), first screen"] / medians["bare Textual app, first screen"]
        print(f"moa-chat ({name})'s first screen / a bare Textual app's: ×{other:.2f}")
    for name in ("moa-chat --help", "moa-chat presets"):
        print(f"{name}: {medians[name] * 1000:.0f} ms (target ≤ 300 ms)")


if __name__ == "__main__":
    main()
