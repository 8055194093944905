"""What the first screen waits for: only what it shows (issue 12, bench/startup.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# Imported once the first screen is up (tui/app.py DEFERRED, llm.warm_up, the Ollama probe), never before it.
WARMED = ("openai", "markdown_it", "textual.widgets._markdown", "textual.widgets._data_table", "urllib.request")
# Imported when first used (fetch_url, a Retry-After date), never before the first screen either.
LATER = (*WARMED, "http.client", "html.parser", "email.utils")


def run_python(code: str, tmp_path) -> None:
    env = {"MOA_CHAT_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
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
                await pilot.press("f1")  # a deferred screen opens as any other
                await pilot.pause()
                assert type(app.screen).__name__ == "HelpScreen"

        asyncio.run(main())
        """,
        tmp_path,
    )
