"""How long does a long reply take to show at a new width? A 20,000-token reply (stream_render.py's), whole in
a scrolled view at its end, and the terminal resized four times.

Figures per resize, from the resize to:

- first frame: the first frame painted at the new width;
- settled: the reply's blocks all drawn at the new width (its height exact), and a frame painted;
- gap: the longest time between two frames meanwhile (a frozen screen).

Each tree runs in a process of its own, rows alternating round after round:

    python bench/resize_reply.py [--rounds 3] [--tokens 20000] [--tree NAME=PATH]
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
import time
from typing import Any

from stream_render import long_markdown

WIDTHS = (100, 120, 90, 120)


async def measure(tokens: int) -> list[dict[str, float]]:
    from moa_chat.tui.widgets.markdown import ReplyMarkdown, warm_up_markdown
    from textual.app import App, ComposeResult
    from textual.containers import VerticalScroll

    warm_up_markdown()
    frames: list[float] = []

    class ResizeApp(App[None]):
        def _display(self, screen: Any, renderable: Any) -> None:
            if renderable is not None and not self._batch_count:
                renderable.render_segments(self.console)  # what a real driver does with the frame
                frames.append(time.perf_counter())
            super()._display(screen, renderable)

        def compose(self) -> ComposeResult:
            with VerticalScroll():
                yield ReplyMarkdown("".join(long_markdown(tokens)))

    results: list[dict[str, float]] = []
    app = ResizeApp()
    async with app.run_test(size=(120, 40)) as pilot:
        markdown = app.query_one(ReplyMarkdown)
        await pilot.pause()
        app.query_one(VerticalScroll).scroll_end(animate=False)
        await pilot.pause()
        await asyncio.sleep(0.5)
        for width in WIDTHS:
            count, before, start = len(frames), markdown.size.width, time.perf_counter()
            await pilot.resize_terminal(width, 40)
            while len(frames) == count or markdown.size.width == before:
                await asyncio.sleep(0.001)
            first = frames[count] - start
            await asyncio.sleep(0.05)
            while getattr(markdown, "settling", False):  # a tree that draws every block at once has no such flag
                await asyncio.sleep(0.005)
            await pilot.pause()
            settled = frames[-1] - start
            times = [start, *frames[count:]]
            results.append(
                {"first": first, "settled": settled, "gap": max(b - a for a, b in itertools.pairwise(times))}
            )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=20000)
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH", help="another moa_chat to run")
    args = parser.parse_args()
    rows = {"moa-chat": "", **{tree.partition("=")[0]: tree.partition("=")[2] for tree in args.tree}}
    runs: dict[str, list[dict[str, float]]] = {row: [] for row in rows}
    for round_ in range(args.rounds):
        order = list(rows) if round_ % 2 == 0 else list(rows)[::-1]
        for row in order:
            env = dict(os.environ, TEXTUAL_ANIMATIONS="none")
            if rows[row]:
                env["PYTHONPATH"] = rows[row]
            out = subprocess.run(
                [sys.executable, __file__, "--measure", str(args.tokens)],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
                check=True,
            )
            runs[row].extend(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"  round {round_ + 1} {row}: done", file=sys.stderr, flush=True)
    print(f"\nA {args.tokens:,}-token reply resized ({len(WIDTHS)} resizes a round, medians)")
    print(f"  {'':12}{'first frame':>14}{'settled':>10}{'max gap':>10}")
    for row, done in runs.items():
        first, settled, gap = (statistics.median(r[key] for r in done) * 1000 for key in ("first", "settled", "gap"))
        print(f"  {row:12}{first:>11.0f} ms{settled:>7.0f} ms{gap:>7.0f} ms")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--measure":
        print(json.dumps(asyncio.run(measure(int(sys.argv[2])))))
    else:
        main()
