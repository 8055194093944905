"""The key footer follows the turn's state without keeping every key it ever showed alive (issue 12)."""

from __future__ import annotations

import gc

from moa_chat.tui.widgets.footer import WATCHERS, KeyFooter
from textual.widgets._footer import FooterKey
from tui_helpers import make_app, run_turn


def detached_keys() -> int:
    gc.collect()
    return sum(isinstance(o, FooterKey) and not o.is_attached for o in gc.get_objects())


async def test_turns_leave_no_dead_footer_keys_behind(wire_config):
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        footer = app.screen.query_one(KeyFooter)
        for n in range(4):
            await run_turn(pilot, f"question {n}")
            await pilot.pause()
        shown = len(footer.query(FooterKey))
        bound = getattr(footer, WATCHERS)["compact"]
        assert shown and len(bound) <= shown  # a watcher per key shown, not per key ever shown
        assert detached_keys() == 0
