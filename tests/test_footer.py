"""The key footer follows the turn's state without keeping every key it ever showed alive."""

from __future__ import annotations

import gc
import weakref

from moa_chat.tui.textual_internals import WATCHERS
from moa_chat.tui.widgets.footer import KeyFooter
from textual.widget import Widget
from tui_helpers import make_app, run_turn

FOOTER_KEY = "FooterKey"  # the footer's key widget, by its type's name (Textual does not export the class)


async def test_turns_leave_no_dead_footer_keys_behind(wire_config):
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        footer = app.screen.query_one(KeyFooter)
        # Weak references to the keys this test's footer shows (not gc.get_objects: an earlier test may have
        # frozen the heap, and what it froze is never collected).
        shown_keys: list[weakref.ref[Widget]] = []
        for n in range(4):
            await run_turn(pilot, f"question {n}")
            await pilot.pause()
            shown_keys.extend(weakref.ref(key) for key in footer.query(FOOTER_KEY))
        shown = len(footer.query(FOOTER_KEY))
        bound = getattr(footer, WATCHERS)["compact"]
        assert shown and len(bound) <= shown  # a watcher per key shown, not per key ever shown
        gc.collect()
        alive = [key for ref in shown_keys if (key := ref()) is not None]
        assert all(key.is_attached for key in alive)


async def test_the_keys_come_with_the_first_frame_and_are_rebuilt_only_when_they_change(wire_config, monkeypatch):
    """Textual's Footer is empty in the first frame and rebuilds its keys after every bindings refresh; at start-up
    that was 23 rebuilds before the first full screen (bench/startup.py)."""
    rebuilds: list[list[str]] = []
    original = KeyFooter.recompose

    async def recompose(self: KeyFooter) -> None:
        await original(self)
        rebuilds.append([key.description for key in self.query(FOOTER_KEY)])

    monkeypatch.setattr(KeyFooter, "recompose", recompose)
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        footer = app.screen.query_one(KeyFooter)
        keys = list(footer.query(FOOTER_KEY))
        assert "Quit" in [key.description for key in keys]  # composed with the screen, not rebuilt into it
        for _ in range(3):
            app.screen.refresh_bindings()  # nothing the footer shows has changed
            await pilot.pause()
        assert rebuilds == [] and list(footer.query(FOOTER_KEY)) == keys

        await run_turn(pilot, "question")
        await pilot.pause()
        assert rebuilds, "the keys a finished turn adds were never shown"
        assert "Copy" in " ".join(rebuilds[-1]) and rebuilds[-1] == [k.description for k in footer.query(FOOTER_KEY)]
