"""What does the session store's check at opening cost (`store/health.py`: `PRAGMA quick_check` on a thread of
its own, the first write waiting for it)?

A store of `--sessions` sessions of 100 messages each (100,000 messages by default, about 75 MB) is built once.
Then, rounds alternating, each in a fresh process:

- open: `SessionStore()`, then what `ask -c` reads before it writes (the latest session, its conversation);
- check: `SessionStore()`, then `health.writable()`: how long after opening a write may begin (the check's
  duration, on its own thread);
- quick_check: `PRAGMA quick_check` alone on a connection of its own.

The first write waits only for what is left of the check when it comes: `ask` reaches it after loading its
config and its panel, the chat when the user sends the first prompt.

    python bench/store_check.py [--sessions 1000] [--rounds 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import scratch_home

PROBE = """
import json, sqlite3, sys, time
from pathlib import Path
from moa_chat.store import SessionStore
what, path = sys.argv[1], Path(sys.argv[2])
started = time.perf_counter()
if what == "quick_check":
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA quick_check").fetchall()
else:
    store = SessionStore(path)
    if what == "open":
        store.path(store.latest().id)
    else:
        store.health.writable()
print(json.dumps((time.perf_counter() - started) * 1000))
"""


def build(path: Path, sessions: int) -> None:
    from moa_chat.store import SessionStore

    store = SessionStore(path)
    words = "the quick brown fox jumps over the lazy dog while the cache warms and the profile settles".split()
    for n in range(sessions):
        sid = store.create_session("bench", f"session {n}")
        with store.transaction() as db:
            parent = None
            for m in range(100):
                text = " ".join(words[(n + m + k) % len(words)] for k in range(80))
                message = {"role": "user" if m % 2 == 0 else "assistant", "content": text}
                parent = store._insert_message(db, sid, message, parent, None)
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="100 sessions, 2 rounds: a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.sessions, args.rounds = 100, 2
    home = Path(scratch_home("moa-bench-store-"))
    path = home / "sessions.db"
    started = time.perf_counter()
    build(path, args.sessions)
    print(
        f"{args.sessions * 100:,} messages, {path.stat().st_size / 1e6:.0f} MB, built in "
        f"{time.perf_counter() - started:.0f} s"
    )
    rows: dict[str, list[float]] = {"open": [], "check": [], "quick_check": []}
    env = {**os.environ, "MOA_CHAT_HOME": str(home)}
    for _ in range(args.rounds):
        for what in rows:
            done = subprocess.run(
                [sys.executable, "-c", PROBE, what, str(path)], capture_output=True, text=True, env=env, check=True
            )
            rows[what].append(json.loads(done.stdout))
    for what, values in rows.items():
        print(f"  {what:12} median {statistics.median(values):6.1f} ms   rows: {', '.join(f'{v:.1f}' for v in values)}")
    print(f"  check / open: ×{statistics.median(rows['check']) / statistics.median(rows['open']):.2f}")


if __name__ == "__main__":
    main()
