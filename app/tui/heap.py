"""The garbage collector, for a process that is the chat's alone (run_app; tests run app after app and leave
it be).

CPython's full collections visit every tracked object, and stop every thread while they do. Left to
themselves in a chat they come mid-turn, one or two a turn, each longer as the conversation grows, and hold
up the turn's end (bench/fanout.py measures it). So:

- start-up: the collector is paused from the command's first line (__main__.py) to the first frame, which
  then puts what exists out of its reach (gc.freeze): modules, classes, styles, the first screen;
- the SDK and the deferred modules, loaded after the first frame, are frozen in turn (`freeze_loaded`);
- a session: young collections run as ever, full ones never on their own; one runs after each turn instead,
  a moment after its reply is on screen (`collect_after_turn`), while the user reads it.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

# Young collections, a full one only when asked (`collect_after_turn`). The middle generation is collected
# after 100 young collections, not CPython's 10: a frame's short-lived cycles (Textual's strips cache their own
# pieces in themselves, and a streamed reply re-draws the lines on screen each batch) then die there rather than
# reach the old generation, which keeps them until the turn's end and leaves the process's memory grown by them.
THRESHOLDS = (700, 100, 1_000_000_000)
# After a turn's end, how long before its full collection: its reply's frame and the footer's are painted.
AFTER_TURN = 0.3
# Turns sent back to back (faster than AFTER_TURN) would otherwise never be collected: after this many
# skipped collections, one runs even though a turn has started.
MAX_SKIPPED = 3

_frozen = False
_skipped = 0


def first_frame() -> None:
    """The first screen is up: what exists now lives as long as the process, and the collector resumes."""
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    gc.enable()


def freeze_loaded() -> None:
    """The SDK and the deferred modules are loaded (on the warm-up thread): out of the collector's reach."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.freeze()


def collect_after_turn(
    schedule: Callable[[float, Callable[[], None]], object], turn_running: Callable[[], bool]
) -> None:
    """A turn has ended: collect its cycles once its reply is painted, unless the next turn has begun by then
    (its own end collects, or the MAX_SKIPPED-th)."""

    def collect() -> None:
        global _skipped
        if turn_running() and _skipped < MAX_SKIPPED:
            _skipped += 1
            return
        _skipped = 0
        gc.collect()

    schedule(AFTER_TURN, collect)
