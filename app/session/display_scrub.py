"""`privacy_filter:` applied to what the chat shows and traces keep (`display` and `full`); what the models
receive under `full` is the engine's (engine.privacy), and the patterns live in moa_chat.text.redaction."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TypeVar, cast

from ..engine.events import Observer, ReasoningDelta, ReplyDelta, TurnEvent
from ..engine.privacy import privacy_scrub as privacy_scrub  # where the chat and `ask` find it

T = TypeVar("T")


class DisplayScrub:
    """An observer in front of another (the chat, `ask`): what it is shown is redacted (privacy_filter:
    display or full), while the store and the conversation keep the text as it was.

    Streamed reply text is held back to its last whitespace before it is redacted, so a secret split across
    two deltas is still seen whole (a key, an address or a token has no spaces); a private-key block is held
    until its END line. The aggregator's thinking (ReasoningDelta) is held the same way, apart."""

    def __init__(self, observer: Observer, scrub: Callable[[str], str]) -> None:
        self._observer, self._scrub = observer, scrub
        self._held = ""
        self._thought: ReasoningDelta | None = None  # the aggregator's thinking not shown yet

    def __call__(self, event: TurnEvent) -> None:
        if isinstance(event, ReplyDelta):
            self._flush_thought()
            self._held, ready = _split(self._held + event.text)
            if ready:
                self._observer(ReplyDelta(self._scrub(ready)))
            return
        if isinstance(event, ReasoningDelta) and event.role == "aggregator":
            held = self._thought.text if self._thought is not None else ""
            rest, ready = _split(held + event.text)
            self._thought = dataclasses.replace(event, text=rest)
            if ready:
                self._observer(dataclasses.replace(event, text=self._scrub(ready)))
            return
        self.flush()
        self._observer(scrubbed_event(event, self._scrub))

    def flush(self) -> None:
        self._flush_thought()
        if self._held:
            held, self._held = self._held, ""
            self._observer(ReplyDelta(self._scrub(held)))

    def _flush_thought(self) -> None:
        thought, self._thought = self._thought, None
        if thought is not None and thought.text:
            self._observer(dataclasses.replace(thought, text=self._scrub(thought.text)))


def _split(text: str) -> tuple[str, str]:
    """(what to hold back, what is ready to redact and show): held to the last whitespace, so a secret split
    across two deltas is seen whole, and a private-key block until its END line."""
    cut = max(text.rfind(" "), text.rfind("\n"), text.rfind("\t"))
    if "-----BEGIN" in text and "-----END" not in text:
        cut = -1  # inside a private-key block: wait for its end
    return (text[cut + 1 :], text[: cut + 1]) if cut >= 0 else (text, "")


def scrubbed_event(event: T, scrub: Callable[[str], str]) -> T:
    """`event` with its text fields redacted (a frozen dataclass: a copy)."""
    if not dataclasses.is_dataclass(event) or isinstance(event, type):
        return event
    changes: dict[str, object] = {}
    for field in dataclasses.fields(event):
        value = getattr(event, field.name)
        if isinstance(value, str) and value:
            changes[field.name] = scrub(value)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes[field.name] = scrubbed_event(value, scrub)
    return cast(T, dataclasses.replace(event, **changes)) if changes else event
