"""How long does a stored session take to open, and what does it cost? 1,000 messages against 10.

A temporary database holds two sessions built like real ones (prompts; Markdown replies with a list and
a code block; a turn per exchange with three references' answers). Each measurement runs in a fresh
process, so its memory is its own, and the two sizes alternate, round after round, so machine noise hits
both alike. One measurement:

- starts the clock, opens the store and the session (the messages become the context), builds the app;
- stops at the first frame the app hands to its driver after the newest exchange is on screen and the
  prompt has focus: the screen a user can type into;
- reads the process's RSS then, and counts the widgets mounted.

    python bench/open_session.py [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import REPLY


def build(path: Path, exchanges: int) -> str:
    from moa_chat.config import load_config
    from moa_chat.engine.events import CallRecord
    from moa_chat.llm.usage import Usage
    from moa_chat.store import SessionStore, StoredCall

    preset = load_config().preset("demo")
    store = SessionStore(path)
    session_id = store.create_session("demo", f"A session of {exchanges * 2} messages")
    head = None
    for n in range(exchanges):
        user = store.add_message(
            session_id, {"role": "user", "content": f"Question {n}: how do I speed this up?"}, parent_id=head
        )
        turn = store.begin_turn(session_id, user, preset)
        calls = [
            StoredCall(
                CallRecord("reference", slot.label, i, 1, "ok", Usage(400, 120, 520), 1.2, 0.4, "stop"),
                f"Reference {i} on question {n}: measure, then cache. " * 8,
            )
            for i, slot in enumerate(preset.references)
        ]
        calls.append(
            StoredCall(
                CallRecord("aggregator", preset.aggregator.label, 0, 1, "ok", Usage(900, 200, 1100), 2.0, 0.3, "stop")
            )
        )
        head = store.finish_turn(
            turn,
            session_id=session_id,
            parent_id=user,
            status="ok",
            error=None,
            seconds=2.5,
            messages=[{"role": "assistant", "content": REPLY}],
            calls=calls,
            partial_id=None,
        )
    store.close()
    return session_id


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


async def measure(path: Path, session_id: str) -> dict[str, Any]:
    from moa_chat.config import load_config
    from moa_chat.session import ChatSession
    from moa_chat.store import SessionStore
    from moa_chat.tui.app import MoAChatApp
    from moa_chat.tui.widgets.prompt_input import PromptInput
    from moa_chat.tui.widgets.reply import AssistantReply

    class FrameTimedApp(MoAChatApp):
        frames: list[float] = []

        def _display(self, screen: Any, renderable: Any) -> None:
            if renderable is not None:
                self.frames.append(time.perf_counter())
            super()._display(screen, renderable)

    config = load_config()
    before = rss_mb()
    started = time.perf_counter()

    def opened(approver: Any) -> ChatSession:
        session = ChatSession(config, config.preset("demo"), approver=approver, store=SessionStore(path))
        session.open(session_id)
        return session

    app = FrameTimedApp(config, config.preset("demo"), session=opened, theme="textual-dark", remember_theme=False)
    async with app.run_test(size=(120, 40)):
        while True:
            replies = app.query(AssistantReply)
            prompt = app.query(PromptInput)
            if replies and replies.last().finished and prompt and prompt.first().has_focus:
                break
            await asyncio.sleep(0.001)
        ready = time.perf_counter()
        while not any(t > ready for t in app.frames):
            await asyncio.sleep(0.001)
        frame = next(t for t in app.frames if t > ready)
        widgets = len(list(app.screen.walk_children()))
        rss = rss_mb()
    return {
        "seconds": frame - started,
        "rss_mb": rss,
        "rss_growth_mb": rss - before,
        "widgets": widgets,
        "messages": len(app.session.messages),
    }


def run_one(path: Path, session_id: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--measure", str(path), session_id], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--measure", nargs=2, metavar=("DB", "SESSION"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
        print(json.dumps(asyncio.run(measure(Path(args.measure[0]), args.measure[1]))))
        return
    rounds = 1 if args.quick else args.rounds
    with tempfile.TemporaryDirectory() as folder:
        os.environ["MOA_CHAT_HOME"] = folder
        path = Path(folder) / "bench.db"
        cases = {"10 messages": build(path, 5), "1,000 messages": build(path, 500)}
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in cases}
        for n in range(rounds):
            for name, session_id in cases.items():
                results[name].append(run_one(path, session_id))
            print(f"round {n + 1}/{rounds} done", file=sys.stderr)
    median = {name: {key: statistics.median(r[key] for r in runs) for key in runs[0]} for name, runs in results.items()}
    small, large = median["10 messages"], median["1,000 messages"]
    print(f"Opening a stored session, to the first frame a user can type into (median of {rounds}):")
    print(f"{'':16}{'time':>10}{'RSS':>10}{'widgets':>10}")
    for name, figures in median.items():
        print(f"{name:16}{figures['seconds'] * 1000:>8.0f}ms{figures['rss_mb']:>8.0f}MB{figures['widgets']:>10.0f}")
    print(
        f"1,000 / 10: time ×{large['seconds'] / small['seconds']:.2f}, RSS ×{large['rss_mb'] / small['rss_mb']:.2f}, "
        f"widgets ×{large['widgets'] / small['widgets']:.2f}"
    )


if __name__ == "__main__":
    main()
