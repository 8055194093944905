"""What a quorum saves: one reference ten times slower than the others, a turn's latency with and without
`quorum:`, measured side by side in one run.

A loopback OpenAI-compatible server runs in its own process and answers three references in 0.2 s and a
fourth in 2.0 s; the aggregator answers in 0.1 s. The turn is the real one (`Turn.run`, the engine, the
SDK over HTTP) on a preset without a quorum and on the same preset with `quorum: 3`, alternating, round
after round.

    python bench/quorum.py [--rounds 7] [--quick]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

from harness import scratch_home

FAST, SLOW, AGGREGATOR = 0.2, 2.0, 0.1

CONFIG = """
providers:
  bench:
    base_url: {base_url}
    max_retries: 0
moa:
  presets:
    plain:
      reference_models:
        - {{provider: bench, model: fast-1}}
        - {{provider: bench, model: fast-2}}
        - {{provider: bench, model: fast-3}}
        - {{provider: bench, model: slow}}
      aggregator: {{provider: bench, model: agg}}
    quorum:
      quorum: 3
      reference_models:
        - {{provider: bench, model: fast-1}}
        - {{provider: bench, model: fast-2}}
        - {{provider: bench, model: fast-3}}
        - {{provider: bench, model: slow}}
      aggregator: {{provider: bench, model: agg}}
"""


def serve(port_out: multiprocessing.connection.Connection) -> None:  # type: ignore[name-defined]
    from moa_chat.providers.loopback_server import OpenAICompatibleServer, Reply

    def respond(body: dict) -> Reply:
        model = body.get("model", "")
        delay = SLOW if model == "slow" else AGGREGATOR if model == "agg" else FAST
        return Reply(text=f"the answer of {model}, in a few words", delay=delay)

    server = OpenAICompatibleServer(respond).start()
    port_out.send(server.base_url)
    while True:
        time.sleep(3600)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds

    receive, send = multiprocessing.Pipe(duplex=False)
    server = multiprocessing.Process(target=serve, args=(send,), daemon=True)
    server.start()
    base_url = receive.recv()
    home = Path(scratch_home("moa-bench-quorum-"))
    os.environ["MOA_CHAT_HOME"] = str(home)
    (home / "config.yaml").write_text(CONFIG.format(base_url=base_url))

    from moa_chat.config import load_config
    from moa_chat.engine import TurnEnv, TurnPlan
    from moa_chat.session import ToolLoop

    def turn(name: str) -> ToolLoop:
        return ToolLoop(TurnEnv(config), TurnPlan(config.preset(name)))

    config = load_config(home / "config.yaml")
    question = [{"role": "user", "content": "What is a quorum?"}]
    times: dict[str, list[float]] = {"plain": [], "quorum": []}
    turn("plain").run(question)  # warm up: connections, imports
    for _ in range(rounds):
        for name in ("plain", "quorum"):
            started = time.perf_counter()
            result = turn(name).run(question)
            times[name].append(time.perf_counter() - started)
            if result.status != "ok":
                sys.exit(f"{name}: the turn failed: {result.error}")
    server.terminate()
    plain, quorum = (statistics.median(times[n]) for n in ("plain", "quorum"))
    print(f"turn latency, median of {rounds} alternating rounds")
    print(f"  (references {FAST}s ×3 and {SLOW}s; aggregator {AGGREGATOR}s)")
    print(f"  without a quorum: {plain * 1000:6.0f} ms   (physical limit {(SLOW + AGGREGATOR) * 1000:.0f} ms)")
    print(f"  with quorum: 3:   {quorum * 1000:6.0f} ms   (physical limit {(FAST + AGGREGATOR) * 1000:.0f} ms)")
    print(f"  the quorum turn takes ×{quorum / plain:.2f} the time ({(plain - quorum) * 1000:.0f} ms less)")


if __name__ == "__main__":
    main()
