"""A conversation that outlasts its models' windows: 300 exchanges of about 500 tokens against 16k-window models.

A scripted OpenAI-compatible server in a process of its own gives every model a 16,384-token window, which it
enforces with vLLM's overflow error and tells in `/v1/models` (`max_model_len`), and counts every prompt with
its own tokenizer (not moa-chat's estimate). Two references answer about 150 tokens each; the aggregator about
450 (an exchange, prompt and reply, about 500); a compaction request gets a summary as long as it asks for.
One stored session runs the 300 exchanges through `ChatSession`, as `ask -c` and the chat do.

It prints the tokens sent per turn (the largest request, as the server counted it, against the window), how many
turns failed, how many compactions ran and what share of the requests and of the time they took, a turn that
compacts against one that does not (with the compaction request alone beside them), and the RSS along the way.
Goals: no turn fails; at most one compaction request per 20 exchanges; a turn that compacts takes at most one
compaction request longer than one that does not; the RSS levels off.

    python bench/long_context.py [--exchanges 300] [--window 16384] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness import scratch_home

WORDS = "the cache keeps each answer for ten minutes keyed by the request and drops the oldest first".split()
COMPACT_MARK = "You condense a conversation"


def text_of(words: int, seed: int) -> str:
    return " ".join(WORDS[(seed + n) % len(WORDS)] for n in range(words)).capitalize() + "."


def serve(window: int) -> None:
    """The scripted server: prints its URL, serves until stdin closes."""
    from moa_chat.providers.loopback_server import OpenAICompatibleServer, Reply
    from moa_chat.providers.loopback_windows import ModelWindow, ServedWindows

    def respond(body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        first = str(messages[0].get("content", "")) if messages else ""
        if first.startswith(COMPACT_MARK):
            return Reply(text=text_of(int((body.get("max_tokens") or 800) * 0.7), 3))
        if body.get("model") == "agg":
            return Reply(text=text_of(330, len(messages)))
        return Reply(text=text_of(110, len(messages)))

    windows = ServedWindows({name: ModelWindow(window, "vllm") for name in ("ref0", "ref1", "agg")})
    server = OpenAICompatibleServer(respond, windows=windows, record=False).start()
    print(json.dumps({"base_url": server.base_url}), flush=True)
    sys.stdin.read()


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


def run(exchanges: int, window: int) -> dict[str, Any]:
    os.environ["MOA_CHAT_HOME"] = scratch_home("moa-bench-context-")
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--window", str(window)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    base_url = json.loads(server.stdout.readline())["base_url"]
    from harness import write_config
    from moa_chat.config import load_config
    from moa_chat.engine.events import CompactionEnded, CompactionStarted
    from moa_chat.session import ChatSession
    from moa_chat.store import SessionStore

    config = load_config(write_config(base_url, references=2))
    session = ChatSession(config, config.preset("bench"), store=SessionStore())
    rows: list[dict[str, Any]] = []
    rss: dict[int, float] = {}
    try:
        for n in range(1, exchanges + 1):
            events: list[object] = []
            started = time.perf_counter()
            result = session.send(f"Question {n}: {text_of(40, n)}", observer=events.append)
            seconds = time.perf_counter() - started
            compactions = [e for e in events if isinstance(e, CompactionEnded)]
            calls = result.ledger.records
            rows.append(
                {
                    "ok": result.status == "ok",
                    "seconds": seconds,
                    "compacted": bool(compactions),
                    "compaction_seconds": sum(c.record.seconds for c in compactions if c.record is not None),
                    "compaction_requests": sum(1 for c in calls if c.role == "compaction"),
                    "requests": len(calls),
                    "sent": max((c.sent_tokens or 0) for c in calls if c.role != "compaction"),
                    "started_compaction": any(isinstance(e, CompactionStarted) for e in events),
                }
            )
            if n % 25 == 0 or n == 1:
                rss[n] = rss_mb()
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(10)
    return {"rows": rows, "rss": rss, "window": window}


def report(measured: dict[str, Any]) -> None:
    rows, window = measured["rows"], measured["window"]
    sent = [r["sent"] for r in rows]
    failed = sum(not r["ok"] for r in rows)
    compacting = [r for r in rows if r["compacted"]]
    plain = [r["seconds"] for r in rows if not r["compacted"]]
    requests = sum(r["requests"] for r in rows)
    compaction_requests = sum(r["compaction_requests"] for r in rows)
    total = sum(r["seconds"] for r in rows)
    spent = sum(r["compaction_seconds"] for r in rows)
    print(f"exchanges {len(rows)}, window {window:,} tokens, failed turns {failed}")
    print(
        f"tokens sent per turn (the largest request, moa-chat's count): median {statistics.median(sent):,.0f}, "
        f"max {max(sent):,} ({max(sent) / window:.0%} of the window)"
    )
    step = max(1, len(rows) // 12)
    print("  by turn: " + "  ".join(f"{n + 1}:{rows[n]['sent']:,}" for n in range(0, len(rows), step)))
    print(
        f"compactions {len(compacting)}, {compaction_requests} requests of {requests} "
        f"({compaction_requests / requests:.1%}); one per {len(rows) / max(1, compaction_requests):.1f} exchanges"
    )
    print(f"compaction's share of the time: {spent / total:.1%} ({spent:.2f} of {total:.2f} s)")
    if compacting and plain:
        with_compaction = statistics.median(r["seconds"] for r in compacting)
        alone = statistics.median(r["compaction_seconds"] for r in compacting)
        without = statistics.median(plain)
        print(
            f"a turn: {without * 1000:.0f} ms without compaction, {with_compaction * 1000:.0f} ms with "
            f"(+{(with_compaction - without) * 1000:.0f} ms); the compaction request alone {alone * 1000:.0f} ms "
            f"(ratio of the extra to it: {(with_compaction - without) / alone:.2f})"
        )
    print("RSS, MB: " + "  ".join(f"{n}:{mb:.0f}" for n, mb in measured["rss"].items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=300)
    parser.add_argument("--window", type=int, default=16384)
    parser.add_argument("--quick", action="store_true", help="60 exchanges")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.window)
        return
    sys.path.insert(0, str(Path(__file__).parent))
    report(run(60 if args.quick else args.exchanges, args.window))


if __name__ == "__main__":
    main()
