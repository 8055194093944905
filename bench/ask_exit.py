"""How soon does `moa-chat ask` exit once its reply is written, against a bare Python that writes a line?

Each row runs a fresh process with stdout and stderr on pipes, and one loop waits on both pipes and on the
process itself (a pidfd), stamping on the monotonic clock the arrival of the reply's last byte and the
process's exit. The figure is the time between the two: what a script that runs `ask` waits for after the
answer is there. Rows alternate round after round, so noise on a shared machine hits them alike:

- `python -c`: a bare interpreter that writes a line and exits, the floor any Python command stands on;
- `ask`, demo: the offline demo preset (its server runs inside the process), the reply written once whole
  into the pipe, as a script gets it;
- `ask`, loopback: a scripted OpenAI-compatible server in this bench's process, one reference and the
  aggregator, the reply written once whole; also the time from the aggregator's last byte leaving the
  server to the exit, the whole wait after the model is done;
- `ask --stream`, loopback: the reply streamed into the pipe as it arrives (as at a terminal);
- `ask`, loopback + MCP: the same with a stdio MCP server configured (the test suite's tiny one): the exit
  waits for it to exit, as the MCP specification's shutdown asks (its stdin closed, then its exit awaited);
  beside it, that server alone, from its stdin closed (once it has answered `initialize`) to its exit.

With `--tree NAME=PATH` (PATH a folder holding another copy of the `moa_chat` package, found first on
PYTHONPATH) the demo and loopback rows of that copy alternate with these.

    python bench/ask_exit.py [--rounds 9] [--quick] [--tree before=PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import REPLY, config_text, scratch_home
from moa_chat.providers.loopback_server import OpenAICompatibleServer, Reply

GOAL_MS = 150.0
FLOOR = "import sys; sys.stdout.write('the reply\\n'); sys.stdout.flush()"


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, bytes]:
    """Run `argv`; (when the last byte of its stdout arrived, when it exited, its stdout)."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert process.stdout is not None and process.stderr is not None
    exits = os.pidfd_open(process.pid)
    out, err = process.stdout.fileno(), process.stderr.fileno()
    open_fds, written, exited = {out, err, exits}, 0.0, 0.0
    stdout, stderr = bytearray(), bytearray()
    try:
        while open_fds:
            ready, _, _ = select.select(list(open_fds), [], [])
            now = time.monotonic()
            for fd in ready:
                if fd == exits:
                    exited = now
                    open_fds.discard(fd)
                    continue
                data = os.read(fd, 65536)
                if not data:
                    open_fds.discard(fd)
                elif fd == out:
                    stdout += data
                    written = now
                else:
                    stderr += data
    finally:
        os.close(exits)
    if process.wait() != 0:
        raise RuntimeError(f"{argv[-1]!r} exited {process.returncode}: {stderr.decode()[-500:]}")
    return written, exited, bytes(stdout)


def server_exit(argv: list[str]) -> float:
    """Seconds from closing the stdin of the MCP server `argv` (once it has answered `initialize`) to its exit."""
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdin is not None and process.stdout is not None
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
    process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode())
    process.stdin.write(b"\n")
    process.stdin.flush()
    process.stdout.readline()
    exits = os.pidfd_open(process.pid)
    try:
        closed = time.monotonic()
        process.stdin.close()
        select.select([exits], [], [])
        return time.monotonic() - closed
    finally:
        os.close(exits)
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument(
        "--tree", action="append", default=[], metavar="NAME=PATH", help="another moa_chat to run (its folder)"
    )
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds

    server = OpenAICompatibleServer(lambda body: Reply(text=REPLY)).start()
    base = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    base.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's Python keeps its compiled modules
    demo_home, wire_home = scratch_home("moa-bench-exit-"), scratch_home("moa-bench-exit-")
    Path(wire_home, "config.yaml").write_text(config_text(server.base_url))
    demo = {**base, "MOA_CHAT_HOME": demo_home, "MOA_CHAT_OFFLINE_PRESET": "demo", "MOA_CHAT_DEMO_PACE": "0"}
    wire = {**base, "MOA_CHAT_HOME": wire_home}
    mcp_home = scratch_home("moa-bench-exit-")
    tiny = Path(__file__).resolve().parent.parent / "tests" / "mcp_tiny_server.py"
    servers = f"mcp_servers:\n  tiny:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(tiny))}]\n"
    Path(mcp_home, "config.yaml").write_text(config_text(server.base_url).replace("      tools: none\n", "") + servers)
    mcp = {**base, "MOA_CHAT_HOME": mcp_home}
    python = sys.executable
    ask = [python, "-m", "moa_chat", "ask"]
    # name -> (argv, env, whether the loopback server answered it)
    rows: dict[str, tuple[list[str], dict[str, str], bool]] = {
        "python -c (writes a line)": ([python, "-c", FLOOR], base, False),
        "ask, demo": ([*ask, "How do I make this faster?"], demo, False),
        "ask, loopback": ([*ask, "How do I make this faster?"], wire, True),
        "ask --stream, loopback": ([*ask, "--stream", "How do I make this faster?"], wire, True),
        "ask, loopback + MCP": ([*ask, "How do I make this faster?"], mcp, True),
    }
    for name, path in (tree.split("=", 1) for tree in args.tree):
        rows[f"ask, demo ({name})"] = (rows["ask, demo"][0], {**demo, "PYTHONPATH": path}, False)
        rows[f"ask, loopback ({name})"] = (rows["ask, loopback"][0], {**wire, "PYTHONPATH": path}, True)
    tiny_alone = "  the MCP server alone: stdin closed to exit"
    after_reply: dict[str, list[float]] = {name: [] for name in rows}
    after_model: dict[str, list[float]] = {name: [] for name, (_, _, wired) in rows.items() if wired}
    try:
        for argv, env, _ in rows.values():  # a warm-up of each: the first round pays no cold page cache
            timed(argv, env)
        for _ in range(rounds):
            after_reply.setdefault(tiny_alone, []).append(server_exit([python, str(tiny)]) * 1000)
            for name, (argv, env, wired) in rows.items():
                written, exited, stdout = timed(argv, env)
                if wired and stdout.decode().strip() != REPLY.strip():
                    raise RuntimeError(f"{name}: the reply is not whole: {stdout[-200:]!r}")
                after_reply[name].append((exited - written) * 1000)
                if wired:
                    finished = server.requests_for("agg")[-1].finished_at
                    assert finished is not None
                    after_model[name].append((exited - finished) * 1000)
    finally:
        server.stop()

    print(f"reply written to exit, median of {rounds} alternating rounds (ms)")
    print(f"{'':44} {'median':>8} {'min':>8} {'max':>8}   the aggregator's last byte to exit (median)")
    for name, values in after_reply.items():
        model = f"{statistics.median(after_model[name]):8.0f}" if name in after_model else ""
        print(f"{name:44} {statistics.median(values):8.0f} {min(values):8.0f} {max(values):8.0f}   {model}".rstrip())
    floor = statistics.median(after_reply["python -c (writes a line)"])
    for name in (n for n in after_reply if n.startswith("ask")):
        median = statistics.median(after_reply[name])
        if "MCP" in name:
            alone = statistics.median(after_reply[tiny_alone])
            print(f"{name}: {median:.0f} ms; the MCP server alone takes {alone:.0f} ms to exit")
            continue
        verdict = "holds" if median <= GOAL_MS else "missed"
        over = f"{median - floor:+.0f} ms over a bare Python"
        print(f"{name}: {median:.0f} ms, {over} (goal ≤ {GOAL_MS:.0f} ms: {verdict})")


if __name__ == "__main__":
    main()
