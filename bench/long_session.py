"""Does a long conversation slow the chat down? A live session at turn 200 against the same at turn 10, one run.

A fake OpenAI-compatible server in a process of its own answers at once: a reference's short advice, and the
aggregator's reply of a paragraph, a list and a small code block, as a typical short turn. Two chat apps run
headless, each in its own process, and each first talks its way to its turn count through the real UI (a
prompt typed, Enter, the reply awaited): 10 turns, and 200. Then, round after round and alternately (so noise
on the shared machine hits both alike), each measures, by the frames it hands to its driver:

- send and render: Enter pressed on a prompt → the first frame showing the finished reply (footer included);
- key: a letter typed into the prompt → the first frame after it;
- PgUp: the log paged up → the first frame after it (then back to the bottom);

and reports its RSS and the widgets mounted. The summary gives medians and the turn-200 / turn-10 ratios.

    python bench/long_session.py [--rounds 3] [--quick] [--turns 10,200] [--profile PATH]
                                 [--tree before=/path/to/a/copy]

--profile writes a cProfile of one send-and-render at the higher turn count (pstats, to PATH). --tree adds
sessions run from another copy of the package (a folder holding moa_chat/), for a before/after comparison
in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from harness import REPLY, SessionProcess, as_run_app, time_turn_results, write_config


def serve() -> None:
    """The fake server: prints its URL, serves until stdin closes."""
    from moa_chat.providers.loopback_server import OpenAICompatibleServer, Reply

    def respond(body: dict[str, Any]) -> Reply:
        if body.get("model") == "agg":
            return Reply(text=REPLY)
        return Reply(text="Measure, then cache what repeats.")

    server = OpenAICompatibleServer(respond).start()
    print(json.dumps({"base_url": server.base_url}), flush=True)
    sys.stdin.read()
    server.stop()


# --------------------------------------------------------------------------- one session (own process)


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


async def session(base_url: str, turns: int, profile: str | None) -> None:
    from moa_chat.config import load_config
    from moa_chat.tui.app import MoAChatApp
    from moa_chat.tui.screens.chat import ChatScreen
    from moa_chat.tui.widgets.chat_log import ChatLog, UserMessage
    from moa_chat.tui.widgets.prompt_input import PromptInput
    from moa_chat.tui.widgets.reply import AssistantReply

    path = write_config(base_url)
    watch: dict[str, Any] = {"condition": None, "at": None, "also": None, "also_at": None, "done_at": None}

    class FrameTimedApp(MoAChatApp):
        def _display(self, screen: Any, renderable: Any) -> None:
            if renderable is not None and not self._batch_count:
                renderable.render_segments(self.console)  # what a real driver does with it: its cost counts
                now = time.monotonic()
                for name in ("condition", "also"):
                    at = "at" if name == "condition" else "also_at"
                    condition = watch[name]
                    if condition is not None and watch[at] is None and condition():
                        watch[at] = now
            super()._display(screen, renderable)

    def result_arrived() -> None:
        watch["done_at"] = time.monotonic()  # the turn's result reaches the UI: what follows is the UI's work

    time_turn_results(ChatScreen, result_arrived)

    config = load_config(path)
    app = FrameTimedApp(
        config, config.preset("bench"), theme="textual-dark", remember_theme=False, **as_run_app(MoAChatApp)
    )
    app.animation_level = "none"
    loop = asyncio.get_running_loop()

    def expect(condition: Any) -> None:
        """From now on, note the first frame handed to the driver while `condition` holds."""
        watch["condition"], watch["at"] = condition, None

    async def frame_after(started: float, timeout: float = 30.0) -> float:
        """Seconds from `started` to the first frame that showed what `expect` was told to wait for."""
        deadline = time.monotonic() + timeout
        while watch["at"] is None:
            if time.monotonic() > deadline:
                raise TimeoutError("no frame showed it")
            await asyncio.sleep(0.001)
        watch["condition"] = None
        return float(watch["at"]) - started

    def press(key: str, character: str | None = None) -> None:
        """A key as a terminal's driver hands it over (Pilot.press would then wait on every widget mounted: a
        cost of the test harness that grows with the widget count, which is not what is measured here)."""
        from textual import events

        assert app._driver is not None
        app._driver.send_message(events.Key(key, character).set_sender(app))

    async with app.run_test(size=(120, 40)) as pilot:
        prompt = app.query_one(PromptInput)
        prompt.cursor_blink = False
        log = app.query_one(ChatLog)
        sent = [0]

        parts: dict[str, float] = {}

        async def turn() -> float:
            replies = app.query(AssistantReply)
            last = replies.last() if replies else None  # (the log may fold earlier replies away: not a count)
            prompt.focus()
            sent[0] += 1
            text = f"Question {sent[0]}: how do I speed this up?"
            prompt.load_text(text)

            def asked() -> bool:
                found = app.query(UserMessage)
                return bool(found) and found.last().text == text  # (the frame may show the reply too)

            def finished() -> bool:
                found = app.query(AssistantReply)
                return bool(found) and found.last() is not last and found.last().finished and not app.chat.turn_running

            expect(finished)
            watch["also"], watch["also_at"] = asked, None
            started, cpu = time.monotonic(), time.thread_time()
            press("enter", "\r")
            seconds = await frame_after(started)
            parts["ui_cpu"] = time.thread_time() - cpu  # the UI thread's own CPU time over the turn
            # The UI's own share: Enter to the prompt in the log, and the result's arrival to the reply's end.
            parts["send"] = (watch["also_at"] or started) - started
            parts["render"] = started + seconds - watch["done_at"]
            watch["also"] = None
            await pilot.pause()
            return seconds

        for _ in range(turns):
            await turn()
        print(json.dumps({"ready": turns}), flush=True)
        while True:
            command = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
            if not command or command == "quit":
                break
            if command == "profile" and profile:
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
                await turn()
                profiler.disable()
                profiler.dump_stats(profile)
                print(json.dumps({"profiled": profile}), flush=True)
                continue
            result: dict[str, float] = {"send_and_render": await turn(), **parts}
            await pilot.pause()
            prompt.focus()
            before = prompt.text
            expect(lambda before=before: prompt.text != before)
            started = time.monotonic()
            press("x", "x")
            result["key"] = await frame_after(started)
            prompt.load_text("")
            await pilot.pause()
            y = log.scroll_y
            expect(lambda y=y: log.scroll_y != y)
            started = time.monotonic()
            press("pageup")
            result["pgup"] = await frame_after(started)
            await pilot.press("ctrl+end")
            await pilot.pause()
            result["rss_mb"] = rss_mb()
            result["widgets"] = len(list(app.screen.walk_children()))
            result["turn"] = sent[0]
            print(json.dumps(result), flush=True)


# --------------------------------------------------------------------------- the runs


class Session(SessionProcess):
    def __init__(self, base_url: str, turns: int, env: dict[str, str], profile: str | None) -> None:
        argv = [sys.executable, __file__, "--session", base_url, str(turns)]
        super().__init__([*argv, "--profile", profile] if profile else argv, turns, env)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="5 turns against 40, one round: a smoke run")
    parser.add_argument("--turns", default="10,200", help="the two turn counts (default 10,200)")
    parser.add_argument("--profile", help="cProfile one send-and-render of the longer session into this file")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH", help="another moa_chat to run")
    parser.add_argument("--session", nargs=2, metavar=("URL", "TURNS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.session:
        os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
        asyncio.run(session(args.session[0], int(args.session[1]), args.profile))
        return
    short, long = (5, 40) if args.quick else tuple(int(n) for n in args.turns.split(","))
    rounds = 1 if args.quick else args.rounds
    env = dict(os.environ, TEXTUAL_ANIMATIONS="none")
    trees = {"": None, **{name: path for name, _, path in (t.partition("=") for t in args.tree)}}
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert server.stdout is not None
    base_url = json.loads(server.stdout.readline())["base_url"]
    started = time.monotonic()
    sessions: dict[tuple[str, int], Session] = {}
    for tree, path in trees.items():
        tree_env = env if path is None else {**env, "PYTHONPATH": path}
        sessions[tree, short] = Session(base_url, short, tree_env, None)
        sessions[tree, long] = Session(base_url, long, tree_env, args.profile if path is None else None)
    try:
        # All talk their way to their turn counts at once (not measured); then the rounds alternate.
        threads = [threading.Thread(target=s.read) for s in sessions.values()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(f"sessions at {short} and {long} turns after {time.monotonic() - started:.0f} s", file=sys.stderr)
        results: dict[tuple[str, int], list[dict[str, float]]] = {key: [] for key in sessions}
        keys = list(sessions)
        for round_ in range(rounds):
            for key in keys if round_ % 2 == 0 else keys[::-1]:
                outcome = sessions[key].send("measure")
                results[key].append(outcome)
                tree, turns = key
                print(f"  round {round_ + 1}, {label(tree, turns)}: {outcome}", file=sys.stderr, flush=True)
        if args.profile:
            sessions["", long].send("profile")
    finally:
        for one in sessions.values():
            one.close()
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)
    names = ("send_and_render", "send", "render", "ui_cpu", "key", "pgup", "rss_mb", "widgets")
    median = {key: {name: statistics.median(r[name] for r in runs) for name in names} for key, runs in results.items()}
    print(f"A live session at turn {short} and at turn {long} (median of {rounds} rounds, alternating):")
    print("(send+render: Enter to the frame showing the finished reply, models included; of which the UI's own")
    print(" share: send, Enter to the frame showing the prompt; render, the result's arrival to the reply's end;")
    print(" UI CPU, the CPU time the UI thread used over the whole turn)")
    columns = ("send", "render", "ui_cpu", "key", "pgup")
    head = "".join(f"{name:>9}" for name in ("send", "render", "UI CPU", "key", "PgUp", "RSS", "widgets"))
    print(f"{'':20}{'send+render':>13}{head}")
    for (tree, turns), figures in median.items():
        times = "".join(f"{figures[name] * 1000:>7.0f}ms" for name in columns)
        print(
            f"{label(tree, turns):20}{figures['send_and_render'] * 1000:>11.0f}ms{times}"
            f"{figures['rss_mb']:>7.0f}MB{figures['widgets']:>9.0f}"
        )
    for tree in trees:
        a, b = median[tree, short], median[tree, long]
        ratios = ", ".join(
            f"{name} ×{b[key] / a[key]:.2f}"
            for name, key in (
                ("send+render", "send_and_render"),
                ("send", "send"),
                ("render", "render"),
                ("UI CPU", "ui_cpu"),
                ("key", "key"),
            )
        )
        rest = f"PgUp ×{b['pgup'] / a['pgup']:.2f}, RSS ×{b['rss_mb'] / a['rss_mb']:.2f}"
        widgets = f"widgets ×{b['widgets'] / a['widgets']:.2f}"
        print(f"{tree or 'this tree'}: turn {long} / turn {short}: {ratios}, {rest}, {widgets}")
    for tree in [t for t in trees if t]:
        for turns in (short, long):
            was, now = median[tree, turns], median["", turns]
            shown = ", ".join(f"{name} {was[name] * 1000:.0f}ms → {now[name] * 1000:.0f}ms" for name in columns)
            print(
                f"turn {turns}, {tree} → this tree: send+render {was['send_and_render'] * 1000:.0f}ms → "
                f"{now['send_and_render'] * 1000:.0f}ms, {shown}"
            )
    print(f"(all in {time.monotonic() - started:.0f} s)")


def label(tree: str, turns: int) -> str:
    return f"turn {turns}{'@' + tree if tree else ''}"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve()
    else:
        main()
