"""What does the HTTP endpoint (`moa-chat api`) cost over the core, under load, and when a client leaves?

A fake OpenAI-compatible server runs in a process of its own and logs, on the monotonic clock all processes
share, when it writes the aggregator's first byte and when a request ends (a client that hung up is seen
within a millisecond: its wait polls at that rate). `moa-chat api` runs in another process, once, for the
whole run. Three figures, each beside its baseline in the same run:

- first byte: the aggregator's first byte leaving the fake server to the reply's first byte reaching the
  client, through the API (a raw socket reading the SSE stream) and through `moa-chat ask --stream` (its
  stdout pipe), rows alternating; the extra through the API is the difference of the medians (goal ≤ 15 ms);
- load: 50 streaming requests at once through the openai SDK's async client, in waves; every reply must be
  whole (the text as sent, finish_reason stop, no error); the API process's RSS before the first wave, after
  it and after the last; the wall time of a wave beside one request alone;
- cancellation: a client that closes its stream mid-reply, to the aggregator's upstream stream being closed
  at the fake server; beside `moa-chat ask` stopped by SIGINT mid-reply (goal ≤ 100 ms).

With `--idle`, the RSS is read once more after the API has had no work for longer than the engine keeps an
idle thread (`engine/threads.py`), to tell memory held per kept thread from memory held per request served.

Two memory figures run on an API process of their own each (`--memory`), side by side with another copy of
the package (`--tree NAME=PATH`, a folder holding `moa_chat/`), on the same fake provider:

- greedy clients: `--greedy` (4) clients each ask for a 16 MB reply on a raw socket that never reads; the API's
  RSS before, once every upstream stream has ended (read to its end, or closed when the turn was cut off), and
  after the clients hang up;
- repeated load: `--runs` (5) runs of `--run-size` (300) streaming requests at once; the RSS after each run.

    python bench/api.py [--rounds 7] [--waves 10] [--concurrency 50] [--idle] [--quick]
    python bench/api.py --memory [--greedy 4] [--runs 5] [--run-size 300] [--tree before=PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness import REPLY, config_text, scratch_home

ADVICE = "Measure the slow path first, then cache what repeats and keep the common case cheap."
GREEDY_PIECE, GREEDY_PIECES = "0123456789abcdef" * 256, 4096  # a 16 MB reply in 4 KB deltas
TAG = re.compile(r"\[api ([\w-]+)\]")
TOKEN = "moa-bench-token"


def question(tag: str) -> str:
    return f"[api {tag}] How do I make this endpoint faster?"


# --------------------------------------------------------------------------- the fake server (own process)


def serve() -> None:
    from moa_chat.providers import loopback_server
    from moa_chat.providers.loopback_server import OpenAICompatibleServer, Reply

    stream, lock = loopback_server._Handler._stream, threading.Lock()

    def tag_of(body: dict[str, Any]) -> str | None:
        for message in body.get("messages", []):
            if message.get("role") == "user" and (found := TAG.search(str(message.get("content")))):
                return found.group(1)
        return None

    def timed_stream(handler: Any, body: dict[str, Any], reply: Reply, record: Any) -> None:
        first = time.monotonic()
        try:
            stream(handler, body, reply, record)
        except OSError:  # the API closed the stream mid-write: a reply cut off
            record.disconnected = True
            raise
        finally:
            tag = tag_of(body)
            if tag is not None and body.get("model") == "agg":
                line = {"tag": tag, "first": first, "end": time.monotonic(), "disconnected": record.disconnected}
                with lock:
                    print(json.dumps(line), flush=True)

    def quick_wait(handler: Any, seconds: float, record: Any, resume: threading.Event | None = None) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if resume is not None and resume.is_set():
                return False
            if handler.owner._stopping.wait(0.001):
                return True
            if handler._client_gone():
                record.disconnected = True
                return True
        return False

    # 100 upstream requests arrive at once under load: a listen backlog of 5 (socketserver's) makes the kernel
    # reset some of them, a fault of this fake server, not of what is measured.
    loopback_server._QuietServer.request_queue_size = 1024
    loopback_server._Handler._stream = timed_stream  # type: ignore[method-assign]
    loopback_server._Handler._wait = quick_wait  # type: ignore[method-assign]

    def respond(body: dict[str, Any]) -> Reply:
        tag = tag_of(body) or ""
        if body.get("model") != "agg":
            return Reply(text=ADVICE, delay=0.05)
        if tag.startswith("greedy"):
            return Reply(text=GREEDY_PIECE * GREEDY_PIECES, pieces=[GREEDY_PIECE] * GREEDY_PIECES)
        if tag.startswith("cancel"):
            return Reply(text=REPLY, pause_after=3, pause=60)
        return Reply(text=REPLY, delay=0.05, piece_delay=0.002)

    server = OpenAICompatibleServer(respond).start()
    print(json.dumps({"base_url": server.base_url}), flush=True)
    sys.stdin.read()
    server.stop()


class FakeServer:
    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        assert self.process.stdout is not None
        self.base_url: str = json.loads(self.process.stdout.readline())["base_url"]
        self.log: dict[str, dict[str, Any]] = {}
        self._arrived = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            entry = json.loads(line)
            with self._arrived:
                self.log[entry["tag"]] = entry
                self._arrived.notify_all()

    def entry(self, tag: str, timeout: float = 60.0) -> dict[str, Any]:
        with self._arrived:
            if not self._arrived.wait_for(lambda: tag in self.log, timeout):
                raise RuntimeError(f"the fake server logged no aggregator stream for {tag}")
            return self.log[tag]

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=10)


# --------------------------------------------------------------------------- the two front ends


class Api:
    def __init__(self, env: dict[str, str], concurrency: int, tree: str | None = None) -> None:
        environment = {**env, "MOA_CHAT_API_KEY": TOKEN, **({"PYTHONPATH": tree} if tree else {})}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moa_chat", "api", "--port", "0", "--max-turns", str(concurrency + 8)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment,
        )  # fmt: skip
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if found := re.search(r"serving on http://([\d.]+):(\d+)/v1", line):
                self.host, self.port = found.group(1), int(found.group(2))
                break
        else:
            raise RuntimeError(f"moa-chat api exited {self.process.wait()}")
        threading.Thread(target=lambda: [None for _ in self.process.stdout or ()], daemon=True).start()
        self.base_url = f"http://{self.host}:{self.port}/v1"

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def send_stream(self, tag: str) -> socket.socket:
        """A streamed request on a raw socket with a small receive buffer, of which nothing is read."""
        body = json.dumps({"model": "bench", "stream": True, "messages": [{"role": "user", "content": question(tag)}]})
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((self.host, self.port))
        sock.sendall(
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode()
        )
        return sock

    def open_stream(self, tag: str) -> tuple[socket.socket, float]:
        """A streamed request on a raw socket; returns it once the reply's first text arrived, and when."""
        body = json.dumps({"model": "bench", "stream": True, "messages": [{"role": "user", "content": question(tag)}]})
        sock = socket.create_connection((self.host, self.port))
        sock.sendall(
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode()
        )
        seen = b""
        while b'"content":"' not in seen.replace(b'"content":""', b""):
            data = sock.recv(65536)
            if not data:
                raise RuntimeError(f"the API closed the stream early: {seen[-300:]!r}")
            seen += data
        return sock, time.monotonic()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)


def ask(env: dict[str, str], tag: str, *, cancel: bool = False) -> tuple[float, float | None]:
    """`moa-chat ask --stream`: when its first reply byte reached the pipe, and (cancel) when SIGINT was sent."""
    process = subprocess.Popen(
        [sys.executable, "-m", "moa_chat", "ask", "--stream", "-q", "--no-save", question(tag)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert process.stdout is not None
    os.read(process.stdout.fileno(), 1)
    first = time.monotonic()
    sent = None
    if cancel:
        os.read(process.stdout.fileno(), 1)
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
    process.stdout.read()
    process.wait(timeout=60)
    return first, sent


# --------------------------------------------------------------------------- the figures


def first_byte(api: Api, fake: FakeServer, env: dict[str, str], rounds: int) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {"ask": [], "api": []}
    for n in range(rounds):
        for front in ("ask", "api"):
            tag = f"first-{front}-{n}"
            if front == "ask":
                arrived, _ = ask(env, tag)
            else:
                sock, arrived = api.open_stream(tag)
                sock.close()
            rows[front].append((arrived - fake.entry(tag)["first"]) * 1000)
    return rows


def cancellation(api: Api, fake: FakeServer, env: dict[str, str], rounds: int) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {"ask": [], "api": []}
    for n in range(rounds):
        for front in ("ask", "api"):
            tag = f"cancel-{front}-{n}"
            if front == "ask":
                _, sent = ask(env, tag, cancel=True)
                assert sent is not None
            else:
                sock, _ = api.open_stream(tag)
                sent = time.monotonic()
                sock.close()
            entry = fake.entry(tag)
            assert entry["disconnected"], f"{tag}: the upstream stream was not closed"
            rows[front].append((entry["end"] - sent) * 1000)
    return rows


async def wave(base_url: str, concurrency: int, label: str) -> tuple[float, int]:
    import openai

    async with openai.AsyncOpenAI(base_url=base_url, api_key=TOKEN, max_retries=0, timeout=120) as client:

        async def one(n: int) -> bool:
            stream = await client.chat.completions.create(
                model="bench", stream=True, messages=[{"role": "user", "content": question(f"{label}-{n}")}]
            )
            text, finish = [], None
            async for chunk in stream:
                if chunk.choices:
                    text.append(chunk.choices[0].delta.content or "")
                    finish = chunk.choices[0].finish_reason or finish
            return "".join(text) == REPLY and finish == "stop"

        started = time.monotonic()
        results = await asyncio.gather(*(one(n) for n in range(concurrency)), return_exceptions=True)
        for result in results:
            if result is not True:
                print(f"  {label}: {'not whole' if result is False else repr(result)[:300]}", file=sys.stderr)
        return time.monotonic() - started, sum(1 for r in results if r is not True)


def load(api: Api, concurrency: int, waves: int, idle: bool = False) -> dict[str, Any]:
    alone, bad_alone = asyncio.run(wave(api.base_url, 1, "alone"))
    before = api.rss_mb()
    seconds, bad = [], bad_alone
    rss = []
    for n in range(waves):
        took, failed = asyncio.run(wave(api.base_url, concurrency, f"load{n}"))
        seconds.append(took)
        bad += failed
        rss.append(api.rss_mb())
    idle_rss = None
    if idle:
        from moa_chat.engine.threads import IDLE

        time.sleep(IDLE + 10)  # every kept thread has left
        idle_rss = api.rss_mb()
    return {"alone": alone, "waves": seconds, "bad": bad, "before": before, "rss": rss, "idle": idle_rss}


def greedy(api: Api, fake: FakeServer, label: str, clients: int) -> dict[str, float]:
    """RSS before `clients` that never read, once every upstream stream has ended, and after they hang up."""
    asyncio.run(wave(api.base_url, 1, f"{label}-warm"))
    before = api.rss_mb()
    tags = [f"greedy-{label}-{n}" for n in range(clients)]
    sockets = [api.send_stream(tag) for tag in tags]
    entries = [fake.entry(tag, timeout=300) for tag in tags]
    held = api.rss_mb()
    for sock in sockets:
        sock.close()
    time.sleep(3)  # the hang-ups reach the server, its handlers end
    return {
        "before": before,
        "held": held,
        "after": api.rss_mb(),
        "cut": sum(1 for entry in entries if entry["disconnected"]),
    }


def repeated(api: Api, label: str, runs: int, size: int) -> tuple[float, list[float], int]:
    """RSS before, and after each of `runs` runs of `size` streaming requests at once; replies not whole."""
    asyncio.run(wave(api.base_url, 1, f"{label}-warm"))
    before, after, bad = api.rss_mb(), [], 0
    for n in range(runs):
        bad += asyncio.run(wave(api.base_url, size, f"{label}-run{n}"))[1]
        after.append(api.rss_mb())
    return before, after, bad


def memory(args: argparse.Namespace, env: dict[str, str], fake: FakeServer) -> None:
    trees = {"this tree": None, **{name: path for name, _, path in (t.partition("=") for t in args.tree)}}
    greedy_rows, load_rows = {}, {}
    for name, path in trees.items():
        if args.greedy:
            api = Api(env, args.greedy, path)
            try:
                greedy_rows[name] = greedy(api, fake, name.replace(" ", "_"), args.greedy)
            finally:
                api.stop()
        api = Api(env, args.run_size, path)
        try:
            load_rows[name] = repeated(api, name.replace(" ", "_"), args.runs, args.run_size)
        finally:
            api.stop()
    if greedy_rows:
        print(f"{args.greedy} clients that never read a 16 MB reply (API RSS, MB):")
    for name, row in greedy_rows.items():
        print(
            f"  {name:10} {row['before']:6.1f} before, {row['held']:6.1f} once the upstream streams ended "
            f"({row['cut']:.0f} of {args.greedy} cut off), {row['after']:6.1f} after the clients left"
        )
    print(f"{args.runs} runs of {args.run_size} streaming requests at once (API RSS, MB):")
    for name, (before, after, bad) in load_rows.items():
        steps = ", ".join(f"{value:.0f}" for value in after)
        print(f"  {name:10} {before:6.1f} before; after each run: {steps}; replies not whole: {bad}")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--waves", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--idle", action="store_true", help="read the RSS again once the kept threads have left")
    parser.add_argument("--quick", action="store_true", help="2 rounds, 2 waves: a smoke run")
    parser.add_argument("--memory", action="store_true", help="the memory figures: greedy clients, repeated load")
    parser.add_argument("--greedy", type=int, default=4, help="clients that never read (--memory)")
    parser.add_argument("--runs", type=int, default=5, help="runs of repeated load (--memory)")
    parser.add_argument("--run-size", type=int, default=300, help="requests at once in a run (--memory)")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH", help="another moa_chat to run")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if args.quick:
        args.rounds, args.waves = 2, 2
    home = scratch_home("moa-bench-api-")
    env = {**os.environ, "MOA_CHAT_HOME": home}
    fake = FakeServer(env)
    Path(home, "config.yaml").write_text(config_text(fake.base_url))
    if args.memory:
        try:
            memory(args, env, fake)
        finally:
            fake.stop()
        return
    api = Api(env, args.concurrency)
    try:
        first = first_byte(api, fake, env, args.rounds)
        cancelled = cancellation(api, fake, env, args.rounds)
        loaded = load(api, args.concurrency, args.waves, args.idle)
    finally:
        api.stop()
        fake.stop()
    print(f"first byte after the aggregator's, median of {args.rounds} (ms):")
    for front, values in first.items():
        print(f"  {front:4} {median(values):7.1f}   rows: {', '.join(f'{v:.1f}' for v in values)}")
    print(f"  extra through the API: {median(first['api']) - median(first['ask']):.1f} ms (goal ≤ 15)")
    print(f"cancellation to the upstream stream closed, median of {args.rounds} (ms):")
    for front, values in cancelled.items():
        print(f"  {front:4} {median(values):7.1f}   rows: {', '.join(f'{v:.1f}' for v in values)}")
    print(f"{args.waves} waves of {args.concurrency} concurrent streaming requests:")
    print(
        f"  one request alone: {loaded['alone'] * 1000:.0f} ms; a wave: median {median(loaded['waves']) * 1000:.0f} ms"
    )
    print(f"  replies not whole or failed: {loaded['bad']}")
    rss = loaded["rss"]
    before, first_wave, last_wave = loaded["before"], rss[0], rss[-1]
    print(f"  API RSS (MB): {before:.1f} before, {first_wave:.1f} after the first wave, {last_wave:.1f} after the last")
    print(f"  API RSS after each wave (MB): {', '.join(f'{value:.0f}' for value in rss)}")
    if loaded["idle"] is not None:
        print(f"  API RSS once idle, its kept threads gone (MB): {loaded['idle']:.1f}")


if __name__ == "__main__":
    main()
