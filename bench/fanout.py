"""Do the references' requests leave together, and does the aggregator's leave the moment they are done?

A fake OpenAI-compatible server runs in a process of its own. It answers each reference after a fixed
delay of its own (0.3 s for the first to 0.6 s for the last, half of it waiting for the first byte, half
streaming a short answer) and the aggregator with a short streamed reply, so the physical limit of a turn
is known: the slowest reference's last byte plus the aggregator's reply time. It logs, on the one
monotonic clock all processes share, each request's arrival and its reply's first and last byte.

Two front ends answer the same question in a conversation at turn 10 and at turn 200, each in a process of
its own:

- ask: `moa-chat ask --session ID`, the core alone (the baseline), its session stored beforehand;
- tui: the chat app (MoAChatApp) run headless, its frames timestamped as they are handed to the driver;
  it talks its way to its turn count first (prompts the server answers at once), as a user would.

Figures per turn, in milliseconds:

- spread: the first reference request's arrival to the last one's (target ≤ 10 ms);
- gap: the slowest reference's last byte to the aggregator request's arrival;
- over: the end of the turn (ask: the whole reply written on stdout; tui: the first frame showing the
  finished reply) minus the physical limit (target ≤ 50 ms);
- tail: the aggregator's last byte to the end of the turn; ui, its part from the turn's result reaching the
  UI thread to the frame (tui only);
- first: Enter to the first request's arrival (tui only; the chat's own send latency).

Rows alternate within each round, and the summary is medians with each row beside its ask baseline.

    python bench/fanout.py [--rounds 5] [--quick] [--turns 10,200] [--references 6]
                           [--tree before=/path/to/a/copy] [--profile PATH]

--tree adds rows run from another copy of the package (a folder holding moa_chat/), for a before/after
comparison in the same run. --profile writes a cProfile (pstats) of the UI thread over one measured turn of
the longer TUI session, and prints its top frames.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from harness import REPLY, SessionProcess, as_run_app, scratch_home, time_turn_results, write_config

ADVICE = "Measure the slow path first, then cache what repeats and keep the common case cheap; check it twice."
AGGREGATOR_FIRST_BYTE = 0.1  # seconds before the aggregator's first byte
AGGREGATOR_PIECE = 0.005  # seconds between the aggregator's streamed pieces (about 40 of them)
TAG = re.compile(r"\[fanout ([\w-]+)\]")
READY, MEASURE = "ready", "measure"


def reference_seconds(index: int, count: int) -> float:
    """How long reference `index` of `count` takes to answer: 0.3 s for the first to 0.6 s for the last."""
    return 0.3 + 0.3 * index / max(1, count - 1)


def question(tag: str) -> str:
    return f"[fanout {tag}] How do I make this endpoint faster?"


# --------------------------------------------------------------------------- the fake server (own process)


def serve(references: int) -> None:
    """Serve until stdin closes; print one JSON line per measured request (one whose prompt has a tag)."""
    from moa_chat.providers import loopback_server
    from moa_chat.providers.loopback_server import OpenAICompatibleServer, Reply, split_words

    stream = loopback_server._Handler._stream
    lock = threading.Lock()

    def tag_of(body: dict[str, Any]) -> str | None:
        for message in reversed(body.get("messages", [])):
            if message.get("role") == "user" and isinstance(message.get("content"), str):
                found = TAG.search(message["content"])
                if found:
                    return found.group(1)
                if not message["content"].startswith("Warm-up"):
                    continue  # the guidance: a user message too, after the prompt
                return None
        return None

    def timed_stream(handler: Any, body: dict[str, Any], reply: Reply, record: Any) -> None:
        first = time.monotonic()
        stream(handler, body, reply, record)
        last = time.monotonic()
        tag = tag_of(body)
        if tag is not None:
            line = {"tag": tag, "model": body.get("model"), "arrival": record.received_at, "first": first}
            with lock:
                print(json.dumps({**line, "last": last}), flush=True)

    loopback_server._Handler._stream = timed_stream  # type: ignore[method-assign]

    def respond(body: dict[str, Any]) -> Reply:
        model = str(body.get("model"))
        if tag_of(body) is None:  # a warm-up turn: at once
            return Reply(text="Noted." if model != "agg" else "Fine.")
        if model == "agg":
            return Reply(text=REPLY, delay=AGGREGATOR_FIRST_BYTE, piece_delay=AGGREGATOR_PIECE)
        seconds = reference_seconds(int(model.removeprefix("ref")), references)
        pieces = split_words(ADVICE)
        return Reply(text=ADVICE, pieces=pieces, delay=seconds / 2, piece_delay=seconds / 2 / len(pieces))

    server = OpenAICompatibleServer(respond).start()
    print(json.dumps({"base_url": server.base_url}), flush=True)
    sys.stdin.read()
    server.stop()


class Server:
    def __init__(self, references: int, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(references)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        self.base_url: str = json.loads(self.process.stdout.readline())["base_url"]
        self.log: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            entry = json.loads(line)
            with self._lock:
                self.log.setdefault(entry["tag"], []).append(entry)

    def requests(self, tag: str, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The `count` requests of turn `tag` (the server logs each once it has written its last byte)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                found = list(self.log.get(tag, []))
            if len(found) >= count:
                return found
            time.sleep(0.01)
        raise RuntimeError(f"turn {tag}: the server logged {len(found)} requests, expected {count}")

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=10)


# --------------------------------------------------------------------------- the chat app (own process)


def tui_session(base_url: str, turns: int, references: int, profile: str | None) -> None:
    os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
    asyncio.run(_tui_session(base_url, turns, references, profile))


async def _tui_session(base_url: str, turns: int, references: int, profile: str | None) -> None:
    from moa_chat.config import load_config
    from moa_chat.tui.app import MoAChatApp
    from moa_chat.tui.screens.chat import ChatScreen
    from moa_chat.tui.widgets.prompt_input import PromptInput
    from moa_chat.tui.widgets.reply import AssistantReply
    from textual import events

    path = write_config(base_url, references)
    watch: dict[str, Any] = {"condition": None, "at": None, "done_at": None}

    class FrameTimedApp(MoAChatApp):
        def _display(self, screen: Any, renderable: Any) -> None:
            if renderable is not None and not self._batch_count:
                renderable.render_segments(self.console)  # what a real driver does with it: its cost counts
                condition = watch["condition"]
                if condition is not None and watch["at"] is None and condition():
                    watch["at"] = time.monotonic()
            super()._display(screen, renderable)

    def result_arrived() -> None:
        watch["done_at"] = time.monotonic()  # the turn's result reaches the UI thread

    time_turn_results(ChatScreen, result_arrived)

    config = load_config(path)
    # As run_app makes it (freeze_heap: the process is the app's alone), and its frames timed.
    options: dict[str, Any] = {"theme": "textual-dark", "remember_theme": False, **as_run_app(MoAChatApp)}
    app = FrameTimedApp(config, config.preset("bench"), **options)
    app.animation_level = "none"
    loop = asyncio.get_running_loop()

    def laid_out(widget: Any) -> bool:
        compositor = app.screen._compositor
        geometry = (compositor._visible_map or {}).get(widget) or compositor._full_map.get(widget)
        return geometry is not None and geometry.region.height > 0

    async def turn(text: str, expected: str | None) -> dict[str, float]:
        """Send `text`; return when the first frame shows the finished reply (`expected`, if given)."""
        replies = app.query(AssistantReply)
        before = replies.last() if replies else None
        prompt = app.query_one(PromptInput)
        prompt.focus()
        prompt.load_text(text)

        def finished() -> bool:
            found = app.query(AssistantReply)
            if not found:
                return False
            reply = found.last()
            if reply is before or not reply.finished or app.chat.turn_running:
                return False
            if expected is not None and reply.text != expected:
                return False
            if not getattr(reply, "settled", True):
                return False
            last = reply.children[-1] if reply.children else reply
            return laid_out(reply) and laid_out(last)

        watch["condition"], watch["at"] = finished, None
        assert app._driver is not None
        enter = time.monotonic()
        # As a terminal's driver hands the key over (Pilot.press would then wait on every widget mounted).
        app._driver.send_message(events.Key("enter", "\r").set_sender(app))
        deadline = enter + 60
        while watch["at"] is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no frame showed the reply to {text!r}")
            await asyncio.sleep(0.001)
        watch["condition"] = None
        return {"enter": enter, "end": float(watch["at"]), "done": float(watch["done_at"])}

    async with app.run_test(size=(120, 40)) as pilot:
        app.query_one(PromptInput).cursor_blink = False
        for number in range(1, turns):
            await turn(f"Warm-up {number}: and then?", None)
            await pilot.pause()
        print(json.dumps({READY: turns, "module": sys.modules["moa_chat"].__file__}), flush=True)
        while True:
            command = (await loop.run_in_executor(None, sys.stdin.readline)).split()
            if not command or command[0] == "quit":
                break
            _, tag, profiled = command
            profiler = None
            if profiled == "1" and profile:
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
            result = await turn(question(tag), REPLY)
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(profile)
            await pilot.pause()
            print(json.dumps(result), flush=True)


class TuiSession(SessionProcess):
    def __init__(self, base_url: str, turns: int, references: int, env: dict[str, str], profile: str | None) -> None:
        argv = [sys.executable, __file__, "--tui", base_url, str(turns), str(references)]
        super().__init__([*argv, "--profile", profile] if profile else argv, turns, env)

    def measure(self, tag: str, profiled: bool = False) -> dict[str, Any]:
        return self.send(f"{MEASURE} {tag} {int(profiled)}")


# --------------------------------------------------------------------------- moa-chat ask (the baseline)


def prime(base_url: str, turns: int, references: int) -> None:
    """Store a conversation of `turns - 1` turns (the core alone, prompts the server answers at once); print
    its session id."""
    from moa_chat.config import load_config
    from moa_chat.session import ChatSession
    from moa_chat.store import SessionStore

    config = load_config(write_config(base_url, references))
    session = ChatSession(config, config.preset("bench"), store=SessionStore())
    for number in range(1, turns):
        result = session.send(f"Warm-up {number}: and then?")
        if result.status != "ok":
            raise RuntimeError(f"warm-up turn {number}: {result.error}")
    print(json.dumps({READY: turns, "session": session.id}), flush=True)
    session.close()


class AskSession:
    def __init__(self, base_url: str, turns: int, references: int, env: dict[str, str]) -> None:
        self.env = {**env, "MOA_CHAT_HOME": scratch_home("moa-bench-fanout-")}
        self.turns = turns
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--prime", base_url, str(turns), str(references)],
            stdout=subprocess.PIPE,
            text=True,
            env=self.env,
        )
        self.session = ""

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line or self.process.wait(timeout=60):
            raise RuntimeError(f"priming the {self.turns}-turn session failed")
        ready = dict(json.loads(line))
        self.session = ready["session"]
        return ready

    def measure(self, tag: str, profiled: bool = False) -> dict[str, Any]:
        argv = [sys.executable, "-m", "moa_chat", "ask", "--session", self.session, "--preset", "bench", question(tag)]
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)
        assert process.stdout is not None
        seen, end = b"", None
        expected = REPLY.encode()
        while chunk := os.read(process.stdout.fileno(), 65536):
            seen += chunk
            if end is None and expected in seen:
                end = time.monotonic()  # the whole reply is on stdout
        _, err = process.communicate(timeout=60)
        if process.returncode or end is None:
            raise RuntimeError(f"ask failed ({process.returncode}): {err.decode()[-2000:]}")
        return {"end": end}

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------- the runs


def figures(requests: list[dict[str, Any]], outcome: dict[str, Any]) -> dict[str, float]:
    refs = [r for r in requests if r["model"] != "agg"]
    (aggregator,) = [r for r in requests if r["model"] == "agg"]
    slowest = max(r["last"] for r in refs)
    limit = slowest + (aggregator["last"] - aggregator["arrival"])
    result = {
        "spread": max(r["arrival"] for r in refs) - min(r["arrival"] for r in refs),
        "gap": aggregator["arrival"] - slowest,
        "over": outcome["end"] - limit,
        "tail": outcome["end"] - aggregator["last"],  # the aggregator's last byte to the turn's end
    }
    if "enter" in outcome:
        result["first"] = min(r["arrival"] for r in refs) - outcome["enter"]
        result["ui"] = outcome["end"] - outcome["done"]  # the turn's result on the UI thread to the frame
    return result


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="turns 5 and 30, two rounds: a smoke run")
    parser.add_argument("--turns", default="10,200", help="the two turn counts (default 10,200)")
    parser.add_argument("--references", type=int, default=6, help="references in the preset (default 6)")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH", help="another moa_chat to run")
    parser.add_argument("--profile", help="cProfile the UI thread over one turn of the longer TUI session")
    args = parser.parse_args()
    short, long = (5, 30) if args.quick else tuple(int(n) for n in args.turns.split(","))
    rounds = 2 if args.quick else args.rounds
    references = args.references
    env = dict(os.environ, TEXTUAL_ANIMATIONS="none")
    for name in [n for n in env if n.endswith("_API_KEY")]:
        del env[name]
    trees = {"": None, **{name: path for name, _, path in (t.partition("=") for t in args.tree)}}
    started = time.monotonic()
    server = Server(references, env)
    sessions: dict[tuple[str, str, int], TuiSession | AskSession] = {}
    try:
        for tree, path in trees.items():
            tree_env = env if path is None else {**env, "PYTHONPATH": path}
            for turns in (short, long):
                sessions["ask", tree, turns] = AskSession(server.base_url, turns, references, tree_env)
                profile = args.profile if (path is None and turns == long) else None
                sessions["tui", tree, turns] = TuiSession(server.base_url, turns, references, tree_env, profile)
        # All talk their way to their turn counts at once (not measured); then the rounds alternate.
        ready: dict[tuple[str, str, int], dict[str, Any]] = {}
        threads = [
            threading.Thread(target=lambda key=key, s=s: ready.__setitem__(key, s.read()))
            for key, s in sessions.items()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if len(ready) != len(sessions):
            raise RuntimeError("a session failed to reach its turn count")
        for (kind, tree, _turns), outcome in ready.items():
            if kind == "tui":
                print(f"  tui{'@' + tree if tree else ''} runs {outcome['module']}", file=sys.stderr)
        print(f"sessions at {short} and {long} turns after {time.monotonic() - started:.0f} s", file=sys.stderr)
        keys = list(sessions)
        runs: dict[tuple[str, str, int], list[dict[str, float]]] = {key: [] for key in keys}
        count = 0
        for round_ in range(rounds):
            for key in keys if round_ % 2 == 0 else keys[::-1]:
                count += 1
                tag = f"r{round_}-{count}"
                outcome = sessions[key].measure(tag)
                run = figures(server.requests(tag, references + 1), outcome)
                runs[key].append(run)
                kind, tree, turns = key
                shown = ", ".join(f"{name} {fmt(value)}" for name, value in run.items())
                print(f"  round {round_ + 1} {kind}{'@' + tree if tree else ''} turn {turns}: {shown}", file=sys.stderr)
        if args.profile:
            tag = "profile"
            sessions["tui", "", long].measure(tag, profiled=True)
            server.requests(tag, references + 1)
    finally:
        for session in sessions.values():
            session.close()
        server.stop()

    print(f"\nFan-out with {references} references (medians of {rounds} alternating rounds; ms)")
    print("(spread: the reference requests' arrivals, first to last; gap: the slowest reference's last byte to")
    print(" the aggregator's request; over: the turn's end above the physical limit; first: Enter to the first")
    print(" request; tail: the aggregator's last byte to the turn's end, of which ui: the turn's result reaching")
    print(" the UI thread to the frame showing it)")
    names = ("spread", "gap", "over", "tail", "ui", "first")
    print(f"{'':24}" + "".join(f"{name:>9}" for name in names))
    medians: dict[tuple[str, str, int], dict[str, float | None]] = {}
    for key, done in runs.items():
        kind, tree, turns = key
        medians[key] = {name: statistics.median(r[name] for r in done) if name in done[0] else None for name in names}
        row = f"{kind}{'@' + tree if tree else ''} turn {turns}"
        print(f"{row:24}" + "".join(f"{fmt(medians[key][name]):>9}" for name in names))
    print()
    for key, figures_ in medians.items():
        kind, tree, turns = key
        if kind != "tui":
            continue
        base = medians["ask", tree, turns]
        row = f"tui{'@' + tree if tree else ''} turn {turns}"
        over, spread = figures_["over"] or 0.0, figures_["spread"] or 0.0
        ratio = ", ".join(
            f"{name} ×{(figures_[name] or 0) / max(base[name] or 0, 1e-3):.1f}" for name in ("spread", "gap", "over")
        )
        verdict = "holds" if spread <= 0.010 and over <= 0.050 else "misses"
        print(f"{row}: {ratio} against ask; spread ≤ 10 ms and over ≤ 50 ms: {verdict}")
    if len(trees) > 1:
        for tree in trees:
            if not tree:
                continue
            for turns in (short, long):
                then, now = medians["tui", tree, turns], medians["tui", "", turns]
                parts = ", ".join(
                    f"{name} {fmt(then[name])} → {fmt(now[name])}" for name in ("spread", "gap", "over", "first")
                )
                print(f"tui turn {turns}, {tree} → this tree: {parts}")
    if args.profile:
        import pstats

        print(f"\nUI thread over one turn at turn {long}+ (cProfile, {args.profile}), top frames by cumulative time:")
        pstats.Stats(args.profile, stream=sys.stdout).sort_stats("cumulative").print_stats(25)
        pstats.Stats(args.profile, stream=sys.stdout).sort_stats("tottime").print_stats(15)
    print(f"(all in {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--tui":
        profile_path = sys.argv[sys.argv.index("--profile") + 1] if "--profile" in sys.argv else None
        tui_session(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), profile_path)
    elif len(sys.argv) > 1 and sys.argv[1] == "--prime":
        prime(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        main()
