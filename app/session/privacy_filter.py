"""`privacy_filter:` applied where it belongs: `display` to what the chat shows and traces keep, `full`
also to what the models receive (the patterns themselves live in moa_chat.text.redaction)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..config import Config
from ..engine.events import ReplyDelta
from ..text.redaction import apply


def privacy_scrub(config: Config, *, for_models: bool) -> Callable[[str], str] | None:
    """The function that redacts text for this use, or None when the filter leaves it alone."""
    mode = config.privacy_filter
    if mode == "off" or (for_models and mode != "full"):
        return None
    return lambda text: apply(mode, text, for_models=for_models)


def scrub_messages(messages: list[dict[str, Any]], scrub: Callable[[str], str]) -> list[dict[str, Any]]:
    """Messages with their text redacted (string content and text parts; tool-call arguments too)."""
    out = []
    for message in messages:
        copy = dict(message)
        content = copy.get("content")
        if isinstance(content, str):
            copy["content"] = scrub(content)
        elif isinstance(content, list):
            copy["content"] = [
                {**part, "text": scrub(part["text"])}
                if isinstance(part, dict) and isinstance(part.get("text"), str)
                else part
                for part in content
            ]
        if copy.get("tool_calls"):
            copy["tool_calls"] = [
                {**call, "function": {**call["function"], "arguments": scrub(call["function"].get("arguments", ""))}}
                if isinstance(call.get("function"), dict)
                else call
                for call in copy["tool_calls"]
            ]
        out.append(copy)
    return out


class DisplayScrub:
    """An observer in front of another (the chat, `ask`): what it is shown is redacted (privacy_filter:
    display or full), while the store and the conversation keep the text as it was.

    Streamed reply text is held back to its last whitespace before it is redacted, so a secret split across
    two deltas is still seen whole (a key, an address or a token has no spaces); a private-key block is held
    until its END line."""

    def __init__(self, observer: Callable[[Any], None], scrub: Callable[[str], str]) -> None:
        self._observer, self._scrub = observer, scrub
        self._held = ""

    def __call__(self, event: Any) -> None:
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


def scrubbed_event(event: Any, scrub: Callable[[str], str]) -> Any:
    """`event` with its text fields redacted (a frozen dataclass: a copy)."""
    if not dataclasses.is_dataclass(event) or isinstance(event, type):
        return event
    changes: dict[str, Any] = {}
    for field in dataclasses.fields(event):
        value = getattr(event, field.name)
        if isinstance(value, str) and value:
            changes[field.name] = scrub(value)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes[field.name] = scrubbed_event(value, scrub)
    return dataclasses.replace(event, **changes) if changes else event
