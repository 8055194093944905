"""What a new user meets in the chat after the demo: the help's last lines, Tab with the panel hidden, a solo
turn's cards, the hints for presets that cannot run, and the copy toast on a small screen."""

from __future__ import annotations

import pytest
from moa_chat.config import load_config
from moa_chat.tui.widgets.markdown import ReplyMarkdown
from tui_helpers import make_app, wait_until

# --------------------------------------------------------------------------------------------- F1 help


@pytest.mark.parametrize("size", [(120, 36), (60, 20)])
@pytest.mark.parametrize("keys", [["end"], ["pagedown"] * 8, ["down"] * 80])
async def test_the_help_scrolls_to_its_last_line(home, size, keys):
    """End, PgDn and ↓ reach the footnote's last line ("complete_path."): the scrolling part is never taller
    than the frame's inside, where its last line would sit under the frame."""
    from moa_chat.tui.screens.help import HelpScreen

    app = make_app(load_config(), "demo")
    async with app.run_test(size=size) as pilot:
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
        await pilot.pause()
        panel = app.screen.query_one("#help")
        footnote = app.screen.query_one(ReplyMarkdown)
        assert footnote.source.rstrip().endswith("`complete_path`.")
        inside = panel.content_region
        # The footnote's last line is on screen, inside the frame.
        assert footnote.region.bottom <= inside.bottom, (footnote.region, inside)
        assert footnote.region.bottom > inside.y
