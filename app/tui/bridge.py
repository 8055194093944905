"""From the turn's worker thread to the UI: core events become posted Textual messages.

Nothing here touches a widget. Reply text is the one high-rate stream: instead of one message per token
(which floods the queue behind a fast provider), deltas collect in a buffer and a single wake-up message
is posted whenever the buffer goes from empty to non-empty; the UI drains everything that arrived by the
time it gets there. The batch size thus adapts to how fast the UI renders.

Order matters around other events (a tool block must sit between the text before it and the text after
it): at each other event the worker sends the buffered text explicitly, ahead of the event, and starts a
new epoch. A wake-up from an older epoch then drains nothing, so later text can never jump ahead of an
event that was posted before it.

The aggregator's thinking (ReasoningDelta) is the other: it has a buffer and wake-ups of its own, and is sent
explicitly ahead of any reply text or other event, so that what it thought never shows after what it wrote.
A reference's thinking needs no message: its card shows it from the ReferenceProgress that comes with it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from textual.message import Message

from ..engine import ReasoningDelta, ReferenceQueued, ReferencesSent, ReferenceStarted, ReplyDelta
from ..session import TurnEvent, TurnResult
from ..text.inert import inert


class CoreEvent(Message):
    """A core event (moa_chat.events) for the app to render."""

    def __init__(self, event: TurnEvent) -> None:
        super().__init__()
        self.event = event


class ReplyText(Message):
    """Reply text: carried here, or (text is None) waiting in the bridge's buffer for this epoch. With
    `thinking`, the aggregator's thinking rather than its reply."""

    def __init__(self, text: str | None = None, epoch: int = 0, *, thinking: bool = False) -> None:
        super().__init__()
        self.text = text
        self.epoch = epoch
        self.thinking = thinking


class TurnFinished(Message):
    """The turn's thread is done, with its result: the last message of a turn (TurnRunner.end).

    `shown`: the reply's text is all on screen already. The turn's thread posts it without; when the reply has
    outrun the screen, the runner drains the reply first and posts it again, shown, once all of it is painted."""

    def __init__(self, result: TurnResult, *, shown: bool = False) -> None:
        super().__init__()
        self.result = result
        self.shown = shown


def _inert(value: Any) -> Any:
    """A copy of an event with every string in it (nested records included) made inert for the screen."""
    if isinstance(value, str):
        return inert(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for field in dataclasses.fields(value):
            current = getattr(value, field.name)
            if isinstance(current, str) or (dataclasses.is_dataclass(current) and not isinstance(current, type)):
                changes[field.name] = _inert(current)
        return dataclasses.replace(value, **changes)
    return value


class TurnBridge:
    """The observer handed to the core for one turn; `post` must be thread-safe (App.post_message is)."""

    def __init__(self, post: Callable[[Message], object], *, held: bool = False) -> None:
        """`held`: keep every message back until `release` (the screen gets ready for the turn's events while
        the turn already runs)."""
        self._post_now = post
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._thinking: list[str] = []  # the aggregator's thinking, buffered as the text is
        self._epoch = 0
        self._dispatched = threading.Event()
        self._gate = threading.Lock()
        self._held: list[Message] | None = [] if held else None

    def _post(self, message: Message) -> None:
        with self._gate:
            if self._held is not None:
                self._held.append(message)
                return
        self._post_now(message)

    def release(self) -> None:
        """Post what was held back, in order, and from now on everything at once."""
        with self._gate:  # held: a message posted meanwhile waits here, and follows these
            held, self._held = self._held or [], None
            for message in held:
                self._post_now(message)

    def wait_dispatched(self, timeout: float) -> bool:
        """Block until the turn's first requests have left (the references', or with none the aggregator's),
        or its first sign of anything else; at most `timeout` seconds."""
        return self._dispatched.wait(timeout)

    def __call__(self, event: TurnEvent) -> None:
        # Any event but these two (they come before the requests) says the requests have left. Once set, not
        # again: this runs for every streamed token, and Event.set takes a lock and notifies.
        if not self._dispatched.is_set() and not isinstance(event, ReferenceQueued | ReferenceStarted):
            self._dispatched.set()
        if isinstance(event, ReferencesSent):
            return  # for the waiter above alone: nothing to show
        if isinstance(event, ReasoningDelta):
            if event.role == "aggregator":
                with self._lock:
                    wake = not self._thinking
                    self._thinking.append(inert(event.text))
                    epoch = self._epoch
                if wake:
                    self._post(ReplyText(epoch=epoch, thinking=True))
            return
        if isinstance(event, ReplyDelta):
            with self._lock:
                thought = self._take_thinking()
                wake = not self._pending
                self._pending.append(inert(event.text))
                epoch = self._epoch
            if thought:
                self._post(ReplyText(thought, thinking=True))
            if wake:
                self._post(ReplyText(epoch=epoch))
            return
        self.post_after_text(CoreEvent(_inert(event)))

    def _take_thinking(self) -> str:
        """The buffered thinking (call with the lock held)."""
        if not self._thinking:
            return ""
        thought = "".join(self._thinking)
        self._thinking.clear()
        return thought

    def post_after_text(self, message: Message) -> None:
        """Post `message` behind all text that arrived before it (a tool block, the end of the turn)."""
        if isinstance(message, TurnFinished):
            self._dispatched.set()  # the turn ended before anything else said so
        with self._lock:
            thought = self._take_thinking()
            text = "".join(self._pending)
            self._pending.clear()
            self._epoch += 1
        if thought:
            self._post(ReplyText(thought, thinking=True))
        if text:
            self._post(ReplyText(text))
        self._post(message)

    def take(self, epoch: int, *, thinking: bool = False) -> str:
        """The buffered text (or with `thinking`, the buffered thinking), if `epoch` is still current."""
        with self._lock:
            if epoch != self._epoch:
                return ""
            if thinking:
                return self._take_thinking()
            text = "".join(self._pending)
            self._pending.clear()
        return text
