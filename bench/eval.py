"""How close `moa-chat eval` comes to the physical limit: 200 tasks × 2 presets at --concurrency 16 on a loopback
provider whose answers take a fixed time, against tasks × turn latency ÷ concurrency; and whether its memory
stays flat as results pile up.

A loopback OpenAI-compatible server runs in its own process: every reference answers after REFERENCE seconds,
the aggregator after AGGREGATOR, so a turn can take no less than REFERENCE + AGGREGATOR. The run is the real
one (EvalRunner: sessions, the engine, the SDK over HTTP, each result written to the store as it arrives).

    python bench/eval.py [--tasks 200] [--concurrency 16] [--quick]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

from harness import scratch_home

REFERENCE, AGGREGATOR = 0.2, 0.1
GOAL = 1.2  # wall time at most this many times the physical limit

CONFIG = """
providers:
  bench:
    base_url: {base_url}
    max_retries: 0
moa:
  presets:
    two:
      reference_models:
        - {{provider: bench, model: ref-1}}
        - {{provider: bench, model: ref-2}}
      aggregator: {{provider: bench, model: agg}}
    three:
      reference_models:
        - {{provider: bench, model: ref-1}}
        - {{provider: bench, model: ref-2}}
        - {{provider: bench, model: ref-3}}
      aggregator: {{provider: bench, model: agg}}
"""


def serve(port_out: multiprocessing.connection.Connection) -> None:  # type: ignore[name-defined]
    import re

    from moa_chat.providers.loopback_server import OpenAICompatibleServer, Reply

    def respond(body: dict) -> Reply:
        text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        found = re.search(r"What is (\d+) plus one", text)
        n = int(found.group(1)) if found else 0
        delay = AGGREGATOR if body.get("model") == "agg" else REFERENCE
        return Reply(text=f"Working it out.\nAnswer: {n + 1}", delay=delay)

    server = OpenAICompatibleServer(respond).start()
    port_out.send(server.base_url)
    while True:
        time.sleep(3600)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--quick", action="store_true", help="40 tasks")
    args = parser.parse_args()
    count = 40 if args.quick else args.tasks
    home = scratch_home()
    os.environ["MOA_CHAT_HOME"] = home
    receive, send = multiprocessing.Pipe(duplex=False)
    server = multiprocessing.Process(target=serve, args=(send,), daemon=True)
    server.start()
    base_url = receive.recv()
    Path(home, "config.yaml").write_text(CONFIG.format(base_url=base_url))
    tasks_file = Path(home, "tasks.jsonl")
    tasks_file.write_text(
        "".join(
            json.dumps({"id": f"t{n}", "prompt": f"What is {n} plus one?", "number": n + 1}) + "\n"
            for n in range(count)
        )
    )

    from moa_chat.config import load_config
    from moa_chat.eval.results import summarise
    from moa_chat.eval.runner import EvalRunner, Snapshot, systems_for
    from moa_chat.eval.tasks import load_tasks
    from moa_chat.llm import warm_up
    from moa_chat.store.eval_runs import EvalRunStore

    warm_up()
    config = load_config()
    tasks = load_tasks(str(tasks_file)).tasks
    systems = systems_for(config, [config.preset("two"), config.preset("three")], solo=False, baselines=[])
    store = EvalRunStore()
    run_id = store.create({"bench": True})
    samples: list[tuple[int, float]] = []

    def progress(snapshot: Snapshot) -> None:
        if snapshot.done % max(1, snapshot.total // 20) == 0:
            samples.append((snapshot.done, rss_mb()))

    # Turns one at a time first, untimed: the SDK's import and first connection are paid once per process, and
    # their median is a turn's latency alone (the floor the server sets, plus the client's own time).
    alone = EvalRunner(config, tasks[:9], systems[:1], concurrency=1)
    alone.run()
    single = sorted(float(r["seconds"]) for r in alone.answers.values())[1:]  # not the first: it pays the imports
    turn_latency = sorted(single)[len(single) // 2]
    runner = EvalRunner(
        config, tasks, systems, concurrency=args.concurrency, store=store, run_id=run_id, on_progress=progress
    )
    started, cpu = time.perf_counter(), time.process_time()
    runner.run()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    turns = len(tasks) * len(systems)
    limit = turns * (REFERENCE + AGGREGATOR) / args.concurrency
    summary = summarise(tasks, systems, runner.answers, runner.verdicts)
    failed = sum(r["status"] != "ok" for r in runner.answers.values())
    marks = [next((mb for done, mb in samples if done >= turns * q // 4), 0.0) for q in (1, 2, 3, 4)]
    quarter, end = marks[0], marks[-1]
    print(f"{len(tasks)} tasks × {len(systems)} presets = {turns} turns at --concurrency {args.concurrency}")
    measured = turns * turn_latency / args.concurrency
    print(f"  wall {wall:.2f} s · physical limit {limit:.2f} s · ratio {wall / limit:.2f} (goal ≤ {GOAL})")
    print(
        f"  a turn alone takes {turn_latency:.3f} s: tasks × that ÷ concurrency = {measured:.2f} s, "
        f"ratio {wall / measured:.2f}"
    )
    print(
        f"  failed {failed} · accuracy "
        + ", ".join(f"{r.name} {r.quality:.0%}" for r in summary.results if r.quality is not None)
    )
    print(f"  CPU {cpu:.2f} s in this process ({1000 * cpu / turns:.1f} ms a turn)")
    seconds = sorted(float(r["seconds"]) for r in runner.answers.values())
    print(
        f"  a turn's own time: median {seconds[len(seconds) // 2]:.3f} s, p90 {seconds[int(len(seconds) * 0.9)]:.3f} s"
    )
    per_turn = 1024 * (end - quarter) / (turns * 3 / 4)
    print(
        "  RSS at a quarter, half, three quarters and the end: "
        + ", ".join(f"{mb:.1f}" for mb in marks)
        + f" MB (growth from a quarter {end - quarter:+.1f} MB, {per_turn:.1f} KB a turn)"
    )
    server.terminate()
    return 0 if wall / limit <= GOAL and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
