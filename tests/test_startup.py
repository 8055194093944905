"""What the first screen waits for: only what it shows (bench/startup.py measures it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

# Imported once the first screen is up (tui/app.py DEFERRED, llm.warm_up, the Ollama probe, the common code
# languages' lexers: widgets/markdown.py), never before it.
WARMED = (
    *("openai", "markdown_it", "moa_chat.tui.drawing.markdown_blocks", "textual.widgets._data_table", "urllib.request"),
    *("pygments.lexers.python", "pygments.lexers.shell", "pygments.lexers.javascript"),
)
# Imported when first used (fetch_url, a Retry-After date), never before the first screen either.
LATER = (*WARMED, "http.client", "html.parser", "email.utils")


def run_python(code: str, tmp_path) -> None:
    # No API key: the offline demo. The tests' folder on the path for tui_helpers.
    env = {"MOA_CHAT_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).parent)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_the_chat_imports_no_markdown_data_table_or_sdk_before_its_first_screen(tmp_path):
    run_python(
        f"""
        import sys
        import moa_chat.cli, moa_chat.tui.app
        early = [name for name in {LATER!r} if name in sys.modules]
        assert not early, f"imported before the first screen: {{early}}"
        """,
        tmp_path,
    )


def test_what_was_deferred_is_loaded_once_the_first_screen_is_up(tmp_path):
    run_python(
        f"""
        import asyncio, sys, time
        from moa_chat.config import load_config
        from moa_chat.tui.app import DEFERRED, MoAChatApp

        async def main():
            config = load_config(None)
            app = MoAChatApp(config, config.preset("demo"), remember_theme=False)
            async with app.run_test(size=(100, 30)) as pilot:
                deadline = time.monotonic() + 60
                wanted = [*DEFERRED, *{WARMED!r}]
                while any(name not in sys.modules for name in wanted):
                    assert time.monotonic() < deadline, [name for name in wanted if name not in sys.modules]
                    await asyncio.sleep(0.05)
                # And the styles of a reply's widgets are learned with no reply shown yet (learn_reply_styles).
                while not any(name == "ReplyMarkdown.DEFAULT_CSS" for _, name in app.stylesheet.source):
                    assert time.monotonic() < deadline, "the reply's styles were never learned"
                    await asyncio.sleep(0.05)
                assert not app.query("ReplyMarkdown")
                await pilot.press("f1")  # a deferred screen opens as any other
                await pilot.pause()
                assert type(app.screen).__name__ == "HelpScreen"

        asyncio.run(main())
        """,
        tmp_path,
    )


def test_a_session_runs_no_full_collection_mid_turn_and_one_after_each_turn(tmp_path):
    """heap.py: CPython's full collections stopped every thread for 30-110 ms, mid-turn. In the app's own
    process (freeze_heap, as run_app starts it) they run only after a turn, once its reply is painted."""
    run_python(
        """
        import asyncio, gc, time
        from moa_chat.config import load_config
        from moa_chat.tui import heap
        from moa_chat.tui.app import MoAChatApp
        from tui_helpers import run_turn

        async def main():
            config = load_config(None)
            app = MoAChatApp(config, config.preset("demo"), remember_theme=False, freeze_heap=True)
            full: list[bool] = []  # for each full collection: whether a turn was running

            def record(phase, info):
                if phase == "start" and info["generation"] == 2:
                    full.append(app.chat.turn_running)

            async with app.run_test(size=(100, 30)) as pilot:
                assert gc.isenabled() and gc.get_threshold() == heap.THRESHOLDS
                gc.callbacks.append(record)
                for question in ("one", "two"):
                    # Counted before the turn: on a loaded machine its collection may come before run_turn
                    # returns (0.3 s after the turn's end).
                    before = len(full)
                    await run_turn(pilot, question, timeout=60)
                    deadline = time.monotonic() + 10
                    while len(full) == before:
                        assert time.monotonic() < deadline, "no collection after the turn"
                        await asyncio.sleep(0.05)
                gc.callbacks.remove(record)
            assert full == [False, False], full

        asyncio.run(main())
        """,
        tmp_path,
    )
