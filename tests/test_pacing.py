"""A screen paints as soon as it is idle while it asks to (a reply's drain, a turn's end), and otherwise leaves
its frames to Textual's update timer (moa_chat.tui.pacing). The screen's own update timer is stopped in these
tests, so a frame can only come from the idle path."""

from __future__ import annotations

import asyncio

from moa_chat.tui.pacing import PromptlyPainted
from textual import events
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Static
from textual_private import paint_due, stop_update_timer, timer_tick


class Paced(PromptlyPainted[None]):
    uncapped = False

    def compose(self) -> ComposeResult:
        yield Static("before", id="text")

    def paints_uncapped(self) -> bool:
        return self.uncapped


class PacedApp(App[None]):
    def get_default_screen(self) -> Paced:
        return Paced()


async def _stopped_timer(app: PacedApp, pilot: Pilot[None]) -> Paced:
    await pilot.pause()  # the first screen is painted: a frame after this comes from the test's own change
    screen = app.screen
    assert isinstance(screen, Paced)
    stop_update_timer(screen)
    assert not paint_due(screen)
    return screen


async def _painted(app: PacedApp, screen: Paced, text: str) -> None:
    """Change the text and wait for the frame that shows it. Textual runs call_after_refresh callbacks once
    nothing is left to paint: with the timer stopped, only after the idle path has painted."""
    painted = asyncio.get_running_loop().create_future()
    app.query_one("#text", Static).update(text)
    screen.call_after_refresh(lambda: None if painted.done() else painted.set_result(None))
    await asyncio.wait_for(painted, timeout=10)
    assert not paint_due(screen)


async def test_a_draining_screen_paints_each_change_as_soon_as_it_is_idle() -> None:
    app = PacedApp()
    async with app.run_test(size=(40, 5)) as pilot:
        screen = await _stopped_timer(app, pilot)
        screen.uncapped = True
        await _painted(app, screen, "one")
        await _painted(app, screen, "two")  # and the next, however soon after
        assert app.query_one("#text", Static).content == "two"


def _change(app: PacedApp, screen: Paced, text: str) -> None:
    """Update the text and tell the screen at once, as the Static's own idle pass would a moment later (it
    posts the screen a Layout message): the tests call the idle handler with no await in between."""
    app.query_one("#text", Static).update(text)
    screen.refresh(layout=True)
    assert paint_due(screen)


async def test_a_turns_end_is_painted_at_once_and_then_the_timer_paces_again() -> None:
    app = PacedApp()
    async with app.run_test(size=(40, 5)) as pilot:
        screen = await _stopped_timer(app, pilot)
        screen.paint_next_at_once()
        _change(app, screen, "the end")
        screen.on_idle(events.Idle())
        assert not paint_due(screen), "the turn's end waits for the timer"
        _change(app, screen, "later")
        screen.on_idle(events.Idle())
        assert paint_due(screen), "painted at once again: only the one frame was asked for"


async def test_otherwise_the_timer_paints() -> None:
    app = PacedApp()
    async with app.run_test(size=(40, 5)) as pilot:
        screen = await _stopped_timer(app, pilot)
        _change(app, screen, "after")
        screen.on_idle(events.Idle())
        assert paint_due(screen), "painted on the idle path, not left to the timer"
        screen.uncapped = True
        screen.on_idle(events.Idle())
        assert not paint_due(screen)


async def test_a_tick_dropped_during_a_batch_update_is_paid_when_the_batch_ends() -> None:
    app = PacedApp()
    async with app.run_test(size=(40, 5)) as pilot:
        screen = await _stopped_timer(app, pilot)
        with app.batch_update():
            _change(app, screen, "mounted in a batch")
            timer_tick(screen)  # Textual paints nothing inside the batch
            assert paint_due(screen) and screen.tick_owed
            screen.on_idle(events.Idle())
            assert paint_due(screen), "painted inside the batch"
        screen.on_idle(events.Idle())
        assert not paint_due(screen) and not screen.tick_owed
        _change(app, screen, "later")
        screen.on_idle(events.Idle())
        assert paint_due(screen), "the owed tick is paid once, then the timer paces again"
