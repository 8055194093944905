"""`privacy_filter:` applied to what the chat shows and traces keep (`display` and `full`); what the models
receive under `full` is the engine's (engine.privacy), and the patterns live in moa_chat.text.redaction."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TypeVar, cast

from ..engine.events import ReplyDelta
from ..engine.privacy import privacy_scrub as privacy_scrub  # where the chat and `ask` find it
from .turn_events import Event, Observer

T = TypeVar("T")


class DisplayScrub:
    """An observer in front of another (the chat, `ask`): what it is shown is redacted (privacy_filter:
    display or full), while the store and the conversation keep the text as it was.

    Streamed reply text is held back to its last whitespace before it is redacted, so a secret split across
    two deltas is still seen whole (a key, an address or a token has no spaces); a private-key block is held
    until its END line."""

    def __init__(self, observer: Observer, scrub: Callable[[str], str]) -> None:
        self._observer, self._scrub = observer, scrub
        self._held = ""

    def __call__(self, event: Event) -> None:
        if isinstance(event, ReplyDelta):
            self._held += event.text
            cut = max(self._held.rfind(" "), self._held.rfind("\n"), self._held.rfind("\t"))
            if "-----BEGIN" in self._held and "-----END" not in self._held:
                cut = -1  # inside a private-key block: wait for its end
            if cut >= 0:
                ready, self._held = self._held[: cut + 1], self._held[cut + 1 :]
                self._observer(ReplyDelta(self._scrub(ready)))
            return
        self.flush()
        self._observer(scrubbed_event(event, self._scrub))

    def flush(self) -> None:
        if self._held:
            held, self._held = self._held, ""
            self._observer(ReplyDelta(self._scrub(held)))


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
