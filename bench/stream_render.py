"""How far behind a fast stream does the chat log fall? moa-chat's path versus the naive one, same run.

A loopback OpenAI-compatible server streams a Markdown reply; headless Textual apps consume it through
the real openai SDK:

- moa-chat: the real app (MoAChatApp) — the turn on a thread worker, reply text coalesced by the bridge
  and written into Markdown.get_stream();
- per-token append: one posted message per token, each appended with Markdown.append(token);
- per-token update: one posted message per token, each re-rendering the reply with Markdown.update(text).

Two scenarios: 4,000 tokens at 2,000 tokens/s (a fast provider, a long answer) against per-token append,
and 400 tokens at 200 tokens/s against per-token update.

For each we report the time from the server's last byte to the final render (the lag a user watches) and
the total time. The machine is noisy, so both run in one process, alternately, and we print ratios.

    python bench/stream_render.py [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from moa_chat.config import load_config
from moa_chat.providers.loopback_server import OpenAICompatibleServer, Reply
from moa_chat.tui.app import MoAChatApp
from moa_chat.tui.widgets.prompt_input import PromptInput
from moa_chat.tui.widgets.reply import AssistantReply
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Markdown

PARAGRAPH = (
    "Streaming a long answer means the widget grows while tokens keep coming, so the cost of "
    "each update decides whether the log keeps up. "
)
CODE = "```python\ndef handler(event):\n    return {'ok': True, 'event': event}\n```\n\n"


def long_markdown(tokens: int) -> list[str]:
    pieces: list[str] = []
    section = 0
    while len(pieces) < tokens:
        section += 1
        block = f"## Section {section}\n\n{PARAGRAPH * 3}\n\n- first point\n- second point\n\n{CODE}"
        pieces.extend(part + " " for part in block.split(" "))
    return pieces[:tokens]


class Bench:
    def __init__(self, tokens: int, rate: float) -> None:
        self.pieces = long_markdown(tokens)
        self.rate = rate
        self.server = OpenAICompatibleServer(self.respond).start()

    def respond(self, body: dict) -> Reply:
        if body.get("model") == "agg":
            return Reply(pieces=self.pieces, text="".join(self.pieces), piece_delay=1 / self.rate)
        return Reply(text="brief advice")

    def last_byte(self) -> float:
        done = [r.finished_at for r in self.server.requests if r.model == "agg" and r.finished_at]
        return max(done)


async def run_moa_chat(bench: Bench, config_path: Path) -> tuple[float, float]:
    config = load_config(config_path)
    app = MoAChatApp(config, config.preset("bench"), theme="textual-dark", remember_theme=False)
    async with app.run_test(size=(120, 40)) as pilot:
        prompt = app.query_one(PromptInput)
        prompt.load_text("go")
        started = time.monotonic()
        await pilot.press("enter")
        while not (app.query(AssistantReply) and app.query_one(AssistantReply).finished):
            await asyncio.sleep(0.005)
        rendered = time.monotonic()
        assert app.query_one(AssistantReply).text == "".join(bench.pieces)
    return rendered - bench.last_byte(), rendered - started


class Token(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class Done(Message):
    pass


class NaiveApp(App):
    """What a first version usually does: a message per token and a full re-render each time."""

    def __init__(self, base_url: str, mode: str) -> None:
        super().__init__()
        self.base_url = base_url
        self.mode = mode
        self.text = ""
        self.finished = False

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown()

    def start(self) -> None:
        threading.Thread(target=self.consume, daemon=True).start()

    def consume(self) -> None:
        import openai

        client = openai.OpenAI(base_url=self.base_url, api_key="x", max_retries=0)
        stream = client.chat.completions.create(model="agg", messages=[{"role": "user", "content": "go"}], stream=True)
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                self.post_message(Token(chunk.choices[0].delta.content))
        self.post_message(Done())

    async def on_token(self, message: Token) -> None:
        self.text += message.text
        if self.mode == "update":
            await self.query_one(Markdown).update(self.text)
        else:
            await self.query_one(Markdown).append(message.text)

    def on_done(self) -> None:
        self.finished = True


async def run_naive(bench: Bench, mode: str) -> tuple[float, float]:
    app = NaiveApp(bench.server.base_url, mode)
    async with app.run_test(size=(120, 40)):
        started = time.monotonic()
        app.start()
        while not app.finished:
            await asyncio.sleep(0.005)
        rendered = time.monotonic()
        assert app.text == "".join(bench.pieces)
    return rendered - bench.last_byte(), rendered - started


def write_config(home: Path, base_url: str) -> Path:
    path = home / "config.yaml"
    path.write_text(f"""
providers:
  bench: {{base_url: "{base_url}", max_retries: 0}}
moa:
  presets:
    bench:
      reference_models: [{{provider: bench, model: ref}}]
      aggregator: {{provider: bench, model: agg}}
      tools: none
""")
    return path


def scenario(tokens: int, rate: float, naive: str, rounds: int, home: Path) -> None:
    bench = Bench(tokens, rate)
    config_path = write_config(home, bench.server.base_url)
    rival = f"per-token {naive}"
    results: dict[str, list[tuple[float, float]]] = {"moa-chat": [], rival: []}
    for round_ in range(rounds):
        for name in ("moa-chat", rival) if round_ % 2 == 0 else (rival, "moa-chat"):
            bench.server.requests.clear()
            gc.collect()  # the previous app's garbage is not this one's cost
            outcome = asyncio.run(run_moa_chat(bench, config_path) if name == "moa-chat" else run_naive(bench, naive))
            results[name].append(outcome)
            print(f"  round {round_ + 1} {name:>18}: lag {outcome[0]:6.2f}s, total {outcome[1]:6.2f}s", file=sys.stderr)
    bench.server.stop()
    print(
        f"\n{tokens} tokens at {rate:g} tok/s (the stream itself takes {tokens / rate:.1f}s), "
        f"median of {rounds} rounds:"
    )
    medians = {
        name: (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
        for name, runs in results.items()
    }
    for name, (lag, total) in medians.items():
        print(f"  {name:>18}: last render {lag:6.2f}s after the last byte, {total:6.2f}s in all")
    (lag_ours, total_ours), (lag_rival, total_rival) = medians["moa-chat"], medians[rival]
    print(
        f"  {rival} / moa-chat: lag x{lag_rival / max(lag_ours, 1e-3):.0f}, total x{total_rival / total_ours:.1f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller streams, one round: a smoke run")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="moa-bench-"))
    os.environ["MOA_CHAT_HOME"] = str(home)
    scale, rounds = (4, 1) if args.quick else (1, args.rounds)
    # A fast provider and a long answer against the message-per-token version that appends each token;
    # a typical rate and a short answer against the one that re-renders the whole reply per token (at
    # 4,000 tokens that one would run for many minutes).
    scenario(4000 // scale, 2000, "append", rounds, home)
    scenario(400 // scale, 200, "update", rounds, home)


if __name__ == "__main__":
    main()
