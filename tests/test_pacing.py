"""A screen paints when it goes idle with a change to show, not at the 60 Hz timer's next tick; at most once a
frame period (moa_chat.tui.pacing). The screen's own update timer is stopped in these tests, so a frame can
only come from the idle path, and the clock is the test's."""

from __future__ import annotations

import asyncio
from typing import Any

from moa_chat.tui.pacing import PromptlyPainted
from textual import events
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.screen import UPDATE_PERIOD
from textual.widgets import Static


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Paced(PromptlyPainted[None]):
    def compose(self) -> ComposeResult:
        yield Static("before", id="text")


class FrameCounting(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.frames = 0
        self.painted = ""  # the text of the frames handed to the driver

    def get_default_screen(self) -> Paced:
        return Paced()

    def _display(self, screen: Any, renderable: Any) -> None:
        if renderable is not None:
            self.frames += 1
            self.painted += "".join(segment.text for segment in self.console.render(renderable))
        super()._display(screen, renderable)


async def _stopped_timer(app: FrameCounting, pilot: Pilot[None], clock: Clock) -> Paced:
    await pilot.pause()  # the first screen is painted: a frame counted below comes from the test's own change
    screen = app.screen
    assert isinstance(screen, Paced)
    screen.clock = clock
    screen._last_paint = clock.now - 1  # on the test's clock: its last paint was a second ago
    screen._update_timer.stop()  # from here on, only the idle path paints
    assert not screen._paint_due()
    return screen


def _change(app: FrameCounting, screen: Paced) -> None:
    """Updates the text, and tells the screen at once, as the Static's own idle pass would a moment later (it
    posts the screen a Layout message): the tests call the screen's idle handler with no await in between."""
    app.query_one("#text", Static).update("after")
    screen.refresh(layout=True)
    assert screen._paint_due()


async def test_a_change_is_painted_as_soon_as_the_screen_is_idle() -> None:
    app, clock = FrameCounting(), Clock()
    async with app.run_test(size=(40, 5)) as pilot:
        screen = await _stopped_timer(app, pilot, clock)
        frames, app.painted = app.frames, ""
        painted = asyncio.get_running_loop().create_future()
        app.query_one("#text", Static).update("after")
        # Textual runs these once nothing is left to paint: with the timer stopped, only if the idle path painted.
        screen.call_after_refresh(lambda: painted.set_result(None))
        await asyncio.wait_for(painted, timeout=10)
        assert app.frames > frames
        assert not screen._paint_due()
        assert "after" in app.painted


async def test_no_more_than_one_frame_a_period() -> None:
    app, clock = FrameCounting(), Clock()
    async with app.run_test(size=(40, 5)) as pilot:
        screen = await _stopped_timer(app, pilot, clock)
        screen._last_paint = clock.now - UPDATE_PERIOD / 2
        _change(app, screen)
        frames = app.frames
        await PromptlyPainted._on_idle(screen, events.Idle())
        assert app.frames == frames, "painted again within a frame period"
        assert screen._paint_due()
        clock.now += UPDATE_PERIOD
        await PromptlyPainted._on_idle(screen, events.Idle())
        assert app.frames == frames + 1
        assert not screen._paint_due()
        assert screen._last_paint == clock.now  # the next frame is paced from this one


async def test_nothing_to_show_paints_nothing() -> None:
    app, clock = FrameCounting(), Clock()
    async with app.run_test(size=(40, 5)) as pilot:
        screen = await _stopped_timer(app, pilot, clock)
        clock.now += 10
        frames = app.frames
        assert not screen._paint_due()
        await PromptlyPainted._on_idle(screen, events.Idle())
        assert app.frames == frames


async def test_a_screen_can_leave_the_pacing_to_the_timer() -> None:
    app, clock = FrameCounting(), Clock()
    async with app.run_test(size=(40, 5)) as pilot:
        screen = await _stopped_timer(app, pilot, clock)
        clock.now += 10
        screen.paints_promptly = lambda: False  # type: ignore[method-assign]
        _change(app, screen)
        frames = app.frames
        await PromptlyPainted._on_idle(screen, events.Idle())
        assert app.frames == frames
        assert screen._paint_due()  # left for the timer's tick


async def test_an_uncapped_screen_paints_again_within_a_frame_period() -> None:
    """While a reply drains, each batch waits for its frame: the frame period's cap is lifted, so that the timer's
    grid does not space the batches out as well."""
    app, clock = FrameCounting(), Clock()
    async with app.run_test(size=(40, 5)) as pilot:
        screen = await _stopped_timer(app, pilot, clock)
        screen._last_paint = clock.now - UPDATE_PERIOD / 2
        screen.paints_uncapped = lambda: True  # type: ignore[method-assign]
        _change(app, screen)
        frames, app.painted = app.frames, ""
        await PromptlyPainted._on_idle(screen, events.Idle())
        assert app.frames == frames + 1
        assert "after" in app.painted
        assert not screen._paint_due()


async def test_the_frame_a_user_waits_for_is_painted_within_a_frame_period_once() -> None:
    """A turn's end asks for its frame at once (paint_next_at_once): the cap is lifted for that one frame."""
    app, clock = FrameCounting(), Clock()
    async with app.run_test(size=(40, 5)) as pilot:
        screen = await _stopped_timer(app, pilot, clock)
        screen._last_paint = clock.now - UPDATE_PERIOD / 2
        screen.refresh()
        frames = app.frames
        await PromptlyPainted._on_idle(screen, events.Idle())
        assert app.frames == frames, "within a frame period, a change waits"
        screen.paint_next_at_once()
        await PromptlyPainted._on_idle(screen, events.Idle())
        assert app.frames > frames
        assert not screen._paint_due()
        frames = app.frames
        screen.refresh()
        await PromptlyPainted._on_idle(screen, events.Idle())
        assert app.frames == frames, "the cap holds again after that frame"
        assert screen._paint_due()


async def test_a_tick_lost_to_a_batch_update_is_paid_as_soon_as_the_batch_is_over() -> None:
    """Textual drops a timer tick that comes during App.batch_update and pauses its timer; a screen that leaves
    its pacing to the timer (a stream) paints that frame when the batch ends, not a tick later."""
    app, clock = FrameCounting(), Clock()
    async with app.run_test(size=(40, 5)) as pilot:
        screen = await _stopped_timer(app, pilot, clock)
        clock.now += 10
        screen.paints_promptly = lambda: False  # type: ignore[method-assign]
        frames = app.frames
        with app.batch_update():
            screen.refresh()
            screen._on_timer_update()  # the tick, inside the batch
            assert app.frames == frames
            await PromptlyPainted._on_idle(screen, events.Idle())
            assert app.frames == frames, "nothing is painted inside a batch"
        await PromptlyPainted._on_idle(screen, events.Idle())
        assert app.frames > frames
        assert not screen._paint_due()
        frames = app.frames
        clock.now += 10
        screen.refresh()
        await PromptlyPainted._on_idle(screen, events.Idle())
        assert app.frames == frames, "paid once: the timer paces the next frame again"
