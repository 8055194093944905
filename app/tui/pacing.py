"""When a screen paints: at the next tick of Textual's update timer, or at once for the frames that wait on it.

Textual paints a screen from its update timer, which runs while the screen has a change to show and ticks
within a frame period of it: a stream's frames keep that pace, and a key's echo or a turn's end waits less
than a user can see. One kind of frame is different: a reply's drain (tui/reply_pacer.py) shows a backlog
batch by batch and waits for each batch's frame before it draws the next, so every tick's wait adds up over
the drain. While a screen says it spaces its changes out itself that way (`paints_uncapped`), and for one
frame a user waits for (`paint_next_at_once`: a turn's end), it paints as soon as it is idle instead. So
does a tick Textual dropped because it came during App.batch_update (a streamed batch mounts its blocks in
one): it is owed, and paid as soon as the batch is over rather than at a later tick. Textual has no public
way to paint now or to hear of a dropped tick: `textual_internals` holds both (`paint_now`, `OwedTickScreen`).
"""

from __future__ import annotations

from typing import TypeVar

from textual import events

from .textual_internals import OwedTickScreen, paint_now

ResultType = TypeVar("ResultType")


class PromptlyPainted(OwedTickScreen[ResultType]):
    """A screen that paints when it goes idle, rather than at the timer's next tick, while it asks to."""

    _next_at_once = False

    def paints_uncapped(self) -> bool:
        """Whether the screen paints each change as soon as it is idle: while something else spaces the
        changes out and waits for each to be painted (a reply's drain, tui/reply_pacer.py)."""
        return False

    def paint_next_at_once(self) -> None:
        """The next frame is one a user waits for (a turn's end): painted as soon as the screen is idle."""
        self._next_at_once = True
        self.check_idle()

    def on_idle(self, event: events.Idle) -> None:
        # Runs before Screen's own idle handler (a class's handlers run before its base classes'): with the
        # change painted here, that one finds nothing due and runs the callbacks waiting for a frame.
        if (self._next_at_once or self.paints_uncapped() or self.tick_owed) and paint_now(self):
            self._next_at_once = False
