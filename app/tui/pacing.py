"""When a screen paints: as soon as it is idle with something to show, at most once a frame period.

Textual paints from a 60 Hz timer on a fixed grid: a screen that goes idle with a change to show resumes the
timer, and the change waits for the grid's next tick. That wait (0-17 ms, 14-27 ms measured on a busy event
loop) came on top of every frame a user waits for: the finished reply's footer, a key's echo
(bench/fanout.py: the turn's end 14-27 ms after its last change). Here a screen that goes idle with
something to paint, a frame period or more after its last paint, paints at once; sooner than that, the
timer paces it as before, so the frame rate stays capped. A screen may also leave the pacing to the timer
for a while (`paints_promptly`). The chat does while a turn runs: painting each streamed batch at
once doubled the frames (55 against 29 in 2 s), on a UI thread that 2,000 tok/s keeps near saturation, and
in 2 of 3 rounds the last of 4,000 tokens showed 100-180 ms later (bench/stream_render.py; a 5-round rerun
put all three within noise). Until that is settled, a stream keeps the timer's pace. And a screen may lift
the cap for a while (`paints_uncapped`): the chat does while a reply drains, since each batch waits for its
frame and so spaces the frames itself, and for one frame a user waits for (`paint_next_at_once`: a turn's end).
A tick that Textual drops because it came during App.batch_update is paid as soon as the batch is over.

Textual is pinned (pyproject): this leans on `Screen._on_timer_update` (the timer's own callback: layout,
then paint) and on the flags `Screen._on_idle` reads to decide that a paint is due.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from textual import events
from textual.screen import UPDATE_PERIOD, Screen

ResultType = TypeVar("ResultType")


class PromptlyPainted(Screen[ResultType]):
    """A screen that paints when it goes idle rather than at the timer's next tick."""

    clock: Callable[[], float] = time.monotonic
    _last_paint = float("-inf")
    _next_uncapped = False
    _tick_missed = False

    def paints_promptly(self) -> bool:
        """Whether a change is painted as soon as the screen is idle just now; if not, at the timer's tick."""
        return True

    def paints_uncapped(self) -> bool:
        """Whether a prompt paint may follow the last one sooner than a frame period: while something else
        spaces the changes out and waits for each to be painted (a reply's drain, tui/widgets/reply.py)."""
        return False

    def paint_next_at_once(self) -> None:
        """The next frame is one a user waits for (a turn's end): painted as soon as the screen is idle, however
        soon after the last one. A stream's frames keep the timer's pace, so the finished reply waited for its
        next tick: 0-17 ms, 5 ms in a timed run of 400 tokens at 200 tok/s (bench/stream_render.py)."""
        self._next_uncapped = True
        self.check_idle()

    def _paint_due(self) -> bool:
        return bool(
            self._layout_required
            or self._scroll_required
            or self._repaint_required
            or self._dirty_widgets
            or self._recompose_required
        )

    def _on_timer_update(self) -> None:
        if self.app._batch_count:
            # Textual drops a tick that comes during App.batch_update (a streamed batch awaits mounts in one) and
            # pauses its timer: the batch's frame waited for the tick after next, frames 75-100 ms apart while a
            # fast reply began (bench/stream_render.py). The tick is owed: paid as soon as the batch is over.
            self._tick_missed = True
        else:
            self._last_paint = self.clock()
            self._next_uncapped = self._tick_missed = False
        super()._on_timer_update()

    async def _on_idle(self, event: events.Idle) -> None:
        # Screen._on_idle runs after this one (dispatch walks the class's MRO): with the paint done, it finds
        # nothing due and runs the callbacks waiting for a refresh (call_after_refresh).
        if (
            not self.app._batch_count
            and self.is_current
            and self._paint_due()
            and (self.paints_promptly() or self._tick_missed)
            and (self.clock() - self._last_paint >= UPDATE_PERIOD or self._next_uncapped or self.paints_uncapped())
        ):
            self._on_timer_update()
