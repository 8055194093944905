"""How much of a streamed reply's text goes to its Markdown at a time: one batch per frame.

Whatever arrived since the last batch goes in the next, so the batch size follows how fast the screen keeps
up (Textual's MarkdownStream appends back to back instead, and its batches grow until each one re-lays out the
whole reply). Each batch is sized to take about BATCH_SECONDS, judged by the one before. The Markdown draws a
finished block once (tui/widgets/markdown.py), so a batch costs the same at the end of a long reply as at its
start. When the text is all here and more of it waits than a batch holds, the rest is drained: batch by batch,
each waiting for the frame that shows it (which the chat paints as soon as it is idle, tui/pacing.py), so the
screen keeps moving; hurried, it goes in one batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any, Protocol

BATCH_PERIOD = 1 / 30  # streamed text goes to the Markdown at most this often: a batch per frame or two
# The time one batch should take at most, so that frames keep coming (a batch overshoots it now and then: a code
# block's lexer, a long block drawn again). Figures: docs/performance.md.
BATCH_SECONDS = 0.03
# Once the text is all here, a batch may take longer: no text waits behind it, and fewer, larger batches show the
# backlog sooner than many frames in between.
DRAIN_SECONDS = 0.08
BATCH_CHARACTERS = (400, 40_000)  # the smallest and largest batch (the first is the smallest)


class StreamedText(Protocol):
    """Where the batches go: a reply's Markdown."""

    async def stream(self, fragment: str) -> None: ...

    async def end_stream(self) -> None: ...

    def call_after_refresh(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> bool: ...


class ReplyPacer:
    """One run of a reply's streamed text (between its tool blocks) on its way to `target`, and the task that
    hands it over a batch at a time."""

    def __init__(self, target: StreamedText) -> None:
        self.target = target
        self._pending: list[str] = []
        self._wake = asyncio.Event()
        self._busy = False
        self._ended = asyncio.Event()  # no more text will come (drain, hurry): no pauses, a frame per batch
        self._hurried = asyncio.Event()  # what is left goes in one batch, with no frame waited for
        self._drained: Callable[[], object] | None = None  # set by drain(): called once all is on screen
        self._batch = BATCH_CHARACTERS[0]
        self._task = asyncio.create_task(self._run())

    def write(self, text: str) -> None:
        self._pending.append(text)
        self._wake.set()

    @property
    def settled(self) -> bool:
        """Whether everything written so far is in the target."""
        return not self._pending and not self._busy

    @property
    def behind(self) -> bool:
        """Whether more text waits than one batch shows: the stream has outrun the screen."""
        return sum(map(len, self._pending)) > self._batch

    @property
    def draining(self) -> bool:
        """Whether drain() was called and its callback has not run yet."""
        return self._drained is not None and not self._task.done()

    def drain(self, then: Callable[[], object]) -> None:
        """No more text will come: show what is left batch by batch, a frame painted after each (the last one
        too), then call `then`. A long backlog drawn in one batch would hold the screen still."""
        if self._task.done():
            then()
            return
        self._drained = then
        self._ended.set()
        self._wake.set()

    def hurry(self) -> None:
        """Show what is left in one batch, without waiting for frames (the user asked to be done, or a tool
        block comes next)."""
        self._ended.set()
        self._hurried.set()
        self._wake.set()

    async def close(self) -> None:
        """Show what is left at once, and end the target's stream (its growing block is finished)."""
        self.hurry()
        await self._task
        await self.target.end_stream()

    def cancel(self) -> None:
        self._task.cancel()

    async def _run(self) -> None:
        try:
            await self._write_batches()
        finally:  # a batch that failed must not keep the turn from ending (close() raises its error)
            if self._drained is not None:
                self._drained()

    async def _write_batches(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            started = time.monotonic()
            if self._pending:
                text = "".join(self._pending)
                self._pending.clear()
                if len(text) > self._batch and not self._hurried.is_set():
                    # More than a frame's worth: the rest waits for the next batch, after this one is shown.
                    text, rest = text[: self._batch], text[self._batch :]
                    self._pending.append(rest)
                    self._wake.set()
                self._busy = True
                try:
                    await self.target.stream(text)
                finally:
                    self._busy = False
                self._pace(len(text), time.monotonic() - started)
            if self._ended.is_set():
                if not self._hurried.is_set():
                    # Draining: no more text will come, so no pause; only the frame that shows this batch (after
                    # the last batch too, so that the reply is on screen before the turn's end adds to it). The
                    # chat paints it as soon as it is idle (ChatScreen.paints_uncapped).
                    await self._painted()
                if not self._pending:
                    return
                continue
            # Give the screen its turn to show this batch; the text that arrives meanwhile joins the next (and the
            # end of the turn, at once: the last text must not wait out the pause). A cheap batch needs a short
            # pause only: a slow stream's last token then shows as soon as Textual's own get_stream would show it.
            spent = time.monotonic() - started
            if spent >= BATCH_PERIOD:
                # A slow batch (a new kind of block, the first code block's lexer): the screen paints it before the
                # next one starts: two such batches back to back would hold the screen still.
                await self._painted()
                continue
            pause = min(BATCH_PERIOD - spent, 2 * spent)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ended.wait(), pause)

    async def _painted(self) -> None:
        """Until the screen has painted what the last batch changed, or the run is hurried."""
        painted = asyncio.get_running_loop().create_future()
        self.target.call_after_refresh(lambda: None if painted.done() else painted.set_result(None))
        hurried = asyncio.ensure_future(self._hurried.wait())
        try:
            await asyncio.wait({painted, hurried}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            hurried.cancel()

    def _pace(self, characters: int, seconds: float) -> None:
        """Size the next batch to take about BATCH_SECONDS (DRAIN_SECONDS once the text is all here), judging by
        this one (a new kind of block, or the switch to drawn blocks, costs more than the rest: the size follows,
        both ways)."""
        budget = DRAIN_SECONDS if self._ended.is_set() else BATCH_SECONDS
        if characters < self._batch and seconds < budget:
            return  # a small batch says little about a full one
        low, high = BATCH_CHARACTERS
        wanted = characters * budget / max(seconds, 1e-3)
        self._batch = int(min(high, max(low, (self._batch + wanted) / 2)))
