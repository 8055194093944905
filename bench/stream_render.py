"""How soon after a fast stream ends does the chat show the whole reply? moa-chat against Textual's own pattern.

A fake OpenAI-compatible server runs in a process of its own and streams a block-heavy Markdown reply
(headings, paragraphs, lists, code, quotes, tables) on a schedule of N tokens per second; it logs the moment
it writes the first byte of the reply and the moment it writes the last. Each app runs headless in a fresh
process and timestamps every frame it hands to its driver (and turns it into terminal output, as a real
driver would, so that cost counts too). Rows:

- moa-chat: the real app (MoAChatApp) — the turn on a thread worker, the reply text through the bridge; the
  prompt is sent TYPING seconds after the first screen, once the app's warm-up thread is done;
- get_stream pattern: Textual's documented way, `Markdown.get_stream` fed from an async worker (the example
  in `Markdown.get_stream`'s docstring, with the openai SDK's async client as the source);
- per-token append / per-token update: the naive versions, a posted message per token and `Markdown.append`
  or `Markdown.update` each time (only where they finish in reasonable time).

Figures per run, in seconds on the one monotonic clock all processes share:

- lag: the server's last byte to the first frame that shows the whole reply, correctly laid out;
- gap: the longest time between two frames while the reply streamed (a frozen screen);
- after: how long the app kept painting once the whole reply was shown;
- total: the server's first byte to that frame.
- rss: how much the app process's resident memory grew, from the prompt to a second after that frame.

The machine is shared and noisy: rows alternate within each round, and the summary is medians and ratios.
A row that has not shown the whole reply `--cap` seconds after the last byte is stopped there and shown as
"> cap" (and not run again in later rounds).

    python bench/stream_render.py [--rounds 3] [--quick] [--cap 20] [--tree before=/path/to/a/copy]

--tree adds a moa-chat row run from another copy of the package (a folder holding moa_chat/), for a
before/after comparison in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from harness import as_run_app, scratch_home, write_config

LINGER = 1.0  # seconds the app keeps running after showing the whole reply, to see whether it still paints
# Seconds from the first screen to Enter, as a person takes to type a prompt. By then the app's warm-up thread
# (the SDK's import, then Markdown's, Pygments' lexers and the reply's styles) is done, as it is for a user;
# sent at once, the first reply streamed while that thread held the GIL, which start-up (bench/startup.py),
# not streaming, is about.
TYPING = 2.0
MEASURE = "--measure"


# --------------------------------------------------------------------------- the reply


PARAGRAPH = (
    "Streaming a long answer means the widget grows while tokens keep coming, so the cost of "
    "each update decides whether the log keeps up. "
)
CODE = "```python\ndef handler(event):\n    return {'ok': True, 'event': event}\n```\n\n"
QUOTE = "> A quoted remark from the panel, long enough to wrap once at the width of the bench's screen.\n\n"
TABLE = "| rate | tokens | lag |\n| --- | --- | --- |\n| 200 | 400 | low |\n| 2000 | 4000 | high |\n\n"


def long_markdown(tokens: int) -> list[str]:
    """A reply of `tokens` pieces, heavy in blocks as long model answers are: sections of a heading, a
    paragraph, a list, a quote, a table and a code block."""
    pieces: list[str] = []
    section = 0
    while len(pieces) < tokens:
        section += 1
        block = f"## Section {section}\n\n{PARAGRAPH * 3}\n\n- first point\n- second point\n\n{QUOTE}{TABLE}{CODE}"
        pieces.extend(part + " " for part in block.split(" "))
    return pieces[:tokens]


# --------------------------------------------------------------------------- the fake server (own process)


def serve(tokens: int, rate: float) -> None:
    """Serve until stdin closes; print one JSON line per aggregator request: its first and last byte."""
    from moa_chat.providers import loopback_server
    from moa_chat.providers.loopback_server import OpenAICompatibleServer, Reply

    pieces = long_markdown(tokens)
    stream = loopback_server._Handler._stream

    def timed_stream(handler: Any, body: dict[str, Any], reply: Reply, record: Any) -> None:
        first = time.monotonic()
        stream(handler, body, reply, record)
        if body.get("model") == "agg":
            print(json.dumps({"first": first, "last": time.monotonic()}), flush=True)

    loopback_server._Handler._stream = timed_stream  # type: ignore[method-assign]

    def respond(body: dict[str, Any]) -> Reply:
        if body.get("model") == "agg":
            return Reply(pieces=pieces, text="".join(pieces), piece_delay=1 / rate)
        return Reply(text="brief advice")

    server = OpenAICompatibleServer(respond).start()
    print(json.dumps({"base_url": server.base_url}), flush=True)
    sys.stdin.read()
    server.stop()


class Server:
    def __init__(self, tokens: int, rate: float, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(tokens), str(rate)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        self.base_url = json.loads(self.process.stdout.readline())["base_url"]
        self.log: list[dict[str, float]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.log.append(json.loads(line))

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=10)


# --------------------------------------------------------------------------- the apps (one process each)


class Frames:
    """The frames an app hands to its driver: when, and whether the whole reply was on screen; and the process's
    resident memory when the prompt is sent and once the reply has been shown (after the linger)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.whole: float | None = None
        self.rss: list[int] = []


def rss() -> int:
    """This process's resident memory, in bytes (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def frame_timed(cls: type, frames: Frames, shows_whole: Any) -> type:
    class FrameTimed(cls):  # type: ignore[misc, valid-type]
        def _display(self, screen: Any, renderable: Any) -> None:
            if renderable is not None and not self._batch_count:
                # What a real driver does with the frame (headless drivers skip it): so its cost counts.
                renderable.render_segments(self.console)
                now = time.monotonic()
                frames.times.append(now)
                if frames.whole is None and shows_whole(self):
                    frames.whole = now
            super()._display(screen, renderable)

    return FrameTimed


IN_FLIGHT = [0]  # Markdown.append and .update calls not finished yet


def count_in_flight() -> None:
    """Count Markdown updates from their call (when `source` already holds the new text) to their end."""
    from textual.await_complete import AwaitComplete
    from textual.widgets import Markdown

    def counted(original: Any) -> Any:
        def method(self: Any, markdown: str) -> AwaitComplete:
            IN_FLIGHT[0] += 1
            inner = original(self, markdown)

            async def run() -> None:
                try:
                    await inner
                finally:
                    IN_FLIGHT[0] -= 1

            return AwaitComplete(run())

        return method

    Markdown.append = counted(Markdown.append)  # type: ignore[method-assign]
    Markdown.update = counted(Markdown.update)  # type: ignore[method-assign]


def laid_out(app: Any, widget: Any) -> bool:
    """Whether `widget` has a place in the screen's layout."""
    from textual.errors import NoWidget

    try:
        return bool(app.screen.find_widget(widget).region.height > 0)
    except NoWidget:
        return False


async def run_moa_chat(base_url: str, expected: str, frames: Frames, deadline: float) -> None:
    from moa_chat.config import load_config
    from moa_chat.tui.app import MoAChatApp
    from moa_chat.tui.widgets.markdown import ReplyMarkdown
    from moa_chat.tui.widgets.prompt_input import PromptInput
    from moa_chat.tui.widgets.reply import AssistantReply

    path = write_config(base_url)

    found: list[Any] = []  # the reply, once it is there (a query of the whole DOM per frame taxed the row)

    def shows_whole(app: Any) -> bool:
        if not found:
            replies = app.query(AssistantReply)
            if not replies:
                return False
            found.append(replies.last())
        reply = found[0]
        if reply.text != expected:
            return False
        if IN_FLIGHT[0] or not getattr(reply, "settled", True):
            return False
        markdown = [child for child in reply.children if isinstance(child, ReplyMarkdown)]
        if not markdown or markdown[-1].source != expected:
            return False
        shown = markdown[-1]
        if not shown.children:  # lines of its own: laid out at the height of all of them
            height = shown.get_content_height(app.size, app.size, shown.size.width)
            return laid_out(app, shown) and shown.size.height == height > 0
        return laid_out(app, shown.children[-1])  # a tree whose Markdown is made of block widgets

    config = load_config(path)
    app = frame_timed(MoAChatApp, frames, shows_whole)(
        config, config.preset("bench"), theme="textual-dark", remember_theme=False, **as_run_app(MoAChatApp)
    )
    async with app.run_test(size=(120, 40)) as pilot:
        prompt = app.query_one(PromptInput)
        prompt.cursor_blink = False
        await asyncio.sleep(TYPING)
        prompt.load_text("go")
        frames.rss.append(rss())
        await pilot.press("enter")
        await wait_for_whole(frames, deadline, app, shows_whole)
        frames.rss.append(rss())


async def wait_for_whole(frames: Frames, deadline: float, app: Any, shows_whole: Any) -> None:
    held_since_frame: int | None = None  # the frame count when the whole reply was last seen to be there
    while frames.whole is None and time.monotonic() < deadline:
        if shows_whole(app):
            if held_since_frame == len(frames.times):
                # It has held for a poll and more, and no frame was painted since (the last one came while an
                # update was still in flight, and an idle app paints no more): ask for one, so that the run ends
                # at a painted frame (two polls late at most) rather than never. Asked for at the first sight,
                # this full-screen repaint landed in the middle of the frame the app was about to paint anyway
                # (moa-chat's turn end awaits its mounts) and doubled that frame's cost.
                app.screen.refresh()
            held_since_frame = len(frames.times)
        else:
            held_since_frame = None
        await asyncio.sleep(0.01)
    if frames.whole is not None:
        await asyncio.sleep(LINGER)


def pattern_app(base_url: str, mode: str) -> Any:
    import openai
    from textual import work
    from textual.app import App, ComposeResult
    from textual.containers import VerticalScroll
    from textual.message import Message
    from textual.widgets import Markdown

    class Token(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class StreamApp(App[None]):
        def __init__(self) -> None:
            super().__init__()
            self.text = ""
            self.stream: Any = None
            self.tokens_done = False

        def compose(self) -> ComposeResult:
            with VerticalScroll():
                yield Markdown()

        def on_mount(self) -> None:
            if mode == "pattern":
                self.stream_markdown()
            else:
                threading.Thread(target=self.consume, daemon=True).start()

        @work
        async def stream_markdown(self) -> None:
            # Textual's documented pattern (Markdown.get_stream's docstring), reading the reply with the
            # openai SDK's async client.
            markdown_widget = self.query_one(Markdown)
            container = self.query_one(VerticalScroll)
            container.anchor()
            client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
            stream = self.stream = Markdown.get_stream(markdown_widget)
            try:
                response = await client.chat.completions.create(
                    model="agg", messages=[{"role": "user", "content": "go"}], stream=True
                )
                async for chunk in response:
                    if chunk.choices and chunk.choices[0].delta.content:
                        self.text += chunk.choices[0].delta.content
                        await stream.write(chunk.choices[0].delta.content)
            finally:
                self.tokens_done = True
                await stream.stop()

        def consume(self) -> None:
            # The naive versions: a message per token from a thread reading the stream.
            self.query_one(VerticalScroll).anchor()
            client = openai.OpenAI(base_url=base_url, api_key="x", max_retries=0)
            response = client.chat.completions.create(
                model="agg", messages=[{"role": "user", "content": "go"}], stream=True
            )
            for chunk in response:
                if chunk.choices and chunk.choices[0].delta.content:
                    self.post_message(Token(chunk.choices[0].delta.content))

        async def on_token(self, message: Token) -> None:
            self.text += message.text
            shown = self.query(Markdown)
            if not shown:  # the run is over (the cap, or the whole reply shown) and the app is closing
                return
            if mode == "update":
                await shown.first().update(self.text)
            else:
                await shown.first().append(message.text)

    return StreamApp


async def run_pattern(mode: str, base_url: str, expected: str, frames: Frames, deadline: float) -> None:
    from textual.widgets import Markdown

    def shows_whole(app: Any) -> bool:
        markdown = app.query_one(Markdown)
        if IN_FLIGHT[0] or app.text != expected or markdown.source != expected:
            return False
        return bool(markdown.children) and laid_out(app, markdown.children[-1])

    app = frame_timed(pattern_app(base_url, mode), frames, shows_whole)()
    async with app.run_test(size=(120, 40)):
        frames.rss.append(rss())
        await wait_for_whole(frames, deadline, app, shows_whole)
        frames.rss.append(rss())


def measure(kind: str, base_url: str, tokens: int, seconds: float) -> None:
    """One run in this (fresh) process; prints the frames as JSON."""
    os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
    os.environ["MOA_CHAT_HOME"] = scratch_home()  # a session store of its own
    expected = "".join(long_markdown(tokens))
    count_in_flight()
    frames = Frames()
    deadline = time.monotonic() + seconds
    if kind == "moa-chat":
        asyncio.run(run_moa_chat(base_url, expected, frames, deadline))
    else:
        asyncio.run(run_pattern(kind, base_url, expected, frames, deadline))
    print(json.dumps({"frames": frames.times, "whole": frames.whole, "rss": frames.rss}))


# --------------------------------------------------------------------------- the runs


ROWS = {
    "moa-chat": "moa-chat",
    "pattern": "get_stream pattern",
    "append": "per-token append",
    "update": "per-token update",
}


def one_run(row: str, server: Server, tokens: int, rate: float, cap: float, env: dict[str, str]) -> dict[str, Any]:
    kind, _, tree = row.partition("@")
    run_env = dict(env)
    if tree:
        run_env["PYTHONPATH"] = tree
    seconds = 8 + tokens / rate + cap  # start-up, the stream, and the cap
    before = len(server.log)
    out = subprocess.run(
        [sys.executable, __file__, MEASURE, kind, server.base_url, str(tokens), str(seconds)],
        capture_output=True,
        text=True,
        env=run_env,
        timeout=seconds + 30,
    )
    if out.returncode:
        raise RuntimeError(f"{row} failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for _ in range(500):  # the server logs the request when it has written its last byte
        if len(server.log) > before:
            break
        time.sleep(0.01)
    if len(server.log) != before + 1:
        raise RuntimeError(f"{row}: expected one reply from the server, it logged {len(server.log) - before}")
    served = server.log[-1]
    frames, whole = result["frames"], result["whole"]
    streaming = [t for t in frames if served["first"] <= t <= (whole or served["last"])]
    gaps = [b - a for a, b in itertools.pairwise(streaming)]
    lag = None if whole is None or whole - served["last"] > cap else whole - served["last"]
    return {
        "lag": lag,
        "gap": max(gaps, default=0.0),
        "after": max((t for t in frames if whole is not None and t <= whole + LINGER), default=0.0) - (whole or 0.0),
        "total": None if lag is None else whole - served["first"],
        "frames": len(streaming),
        "stream": served["last"] - served["first"],
        "rss": (result["rss"][-1] - result["rss"][0]) / 2**20 if len(result.get("rss", [])) == 2 else None,
    }


def fmt(value: float | None, cap: float, unit: str = "s") -> str:
    if value is None:
        return f"> {cap:g} s"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def scenario(
    tokens: int, rate: float, rows: list[str], rounds: int, cap: float, env: dict[str, str], results: list[str]
) -> None:
    server = Server(tokens, rate, env)
    runs: dict[str, list[dict[str, Any]]] = {row: [] for row in rows}
    capped: set[str] = set()
    try:
        for round_ in range(rounds):
            order = rows if round_ % 2 == 0 else rows[::-1]
            for row in order:
                if row in capped:
                    continue
                run = one_run(row, server, tokens, rate, cap, env)
                runs[row].append(run)
                if run["lag"] is None:
                    capped.add(row)
                print(
                    f"  {tokens} tok @ {rate:g}/s round {round_ + 1} {row:>22}: lag {fmt(run['lag'], cap)}, "
                    f"gap {fmt(run['gap'], cap)}, after {fmt(run['after'], cap)}, rss +{run['rss'] or 0:.0f} MB "
                    f"({run['frames']} frames while the server took {run['stream']:.2f} s)",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        server.stop()
    header = f"\n{tokens:,} tokens at {rate:,g} tok/s (the stream itself: {tokens / rate:.1f} s)"
    lines = [header, f"  {'':24}{'lag':>10}{'max gap':>10}{'after':>10}{'total':>10}{'rss':>10}  runs"]
    medians: dict[str, float | None] = {}
    for row in rows:
        done = runs[row]
        if not done:
            continue
        # A capped run counts as longer than any other (it stops its row: later rounds skip it).
        middle = statistics.median(float("inf") if r["lag"] is None else r["lag"] for r in done)
        lag = None if middle == float("inf") else middle
        medians[row] = lag
        gap = statistics.median(r["gap"] for r in done)
        after = statistics.median(r["after"] for r in done)
        total = None if lag is None else statistics.median(r["total"] for r in done if r["total"] is not None)
        grown = [r["rss"] for r in done if r["rss"] is not None]
        memory = f"+{statistics.median(grown):.0f} MB" if grown else "?"
        name = ROWS.get(row.partition("@")[0], row) + (f" @{row.partition('@')[2]}" if "@" in row else "")
        lines.append(
            f"  {name:24}{fmt(lag, cap):>10}{fmt(gap, cap):>10}{fmt(after, cap):>10}{fmt(total, cap):>10}"
            f"{memory:>10}  {len(done)}"
        )
    ours = medians.get("moa-chat")
    for row, lag in medians.items():
        if row == "moa-chat" or ours is None:
            continue
        ratio = f"> x{cap / max(ours, 1e-3):.0f}" if lag is None else f"x{lag / max(ours, 1e-3):.1f}"
        lines.append(f"  lag {ROWS.get(row.partition('@')[0], row)}{'@' if '@' in row else ''} / moa-chat: {ratio}")
    text = "\n".join(lines)
    results.append(text)
    print(text, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="two small streams, one round: a smoke run")
    parser.add_argument("--cap", type=float, default=20.0, help="seconds after the last byte before a row gives up")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH", help="another moa_chat to run")
    parser.add_argument("--only", help="run one scenario, as TOKENS@RATE")
    args = parser.parse_args()
    env = dict(os.environ, TEXTUAL_ANIMATIONS="none", MOA_CHAT_HOME=scratch_home())
    moa = ["moa-chat", *(f"moa-chat@{tree.partition('=')[2]}" for tree in args.tree)]
    if args.quick:
        plan = [(400, 200, [*moa, "pattern", "update"]), (4000, 2000, [*moa, "pattern"])]
        rounds = 1
    else:
        # Every rate at every length the issue names, but for the two that stream for 20 s and more at
        # 200 tok/s. The naive rows only where they finish within the cap.
        plan = [
            (400, 200, [*moa, "pattern", "append", "update"]),
            (400, 2000, [*moa, "pattern"]),
            (400, 10000, [*moa, "pattern"]),
            (4000, 2000, [*moa, "pattern", "append"]),
            (4000, 10000, [*moa, "pattern"]),
            (20000, 2000, [*moa, "pattern"]),
            (20000, 10000, [*moa, "pattern"]),
        ]
        rounds = args.rounds
    if args.only:
        tokens, _, rate = args.only.partition("@")
        plan = [(int(tokens), float(rate), [*moa, "pattern"])]
    results: list[str] = []
    started = time.monotonic()
    for tokens, rate, rows in plan:
        scenario(tokens, rate, rows, rounds, args.cap, env, results)
    print(f"\n(all rows in {time.monotonic() - started:.0f} s; medians of up to {rounds} rounds)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]), float(sys.argv[3]))
    elif len(sys.argv) > 1 and sys.argv[1] == MEASURE:
        measure(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
    else:
        main()
