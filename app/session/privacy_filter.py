"""`privacy_filter:` applied where it belongs: `display` to what the chat shows and traces keep, `full`
also to what the models receive (the patterns themselves live in moa_chat.text.redaction)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, cast

from ..config import Config
from ..engine.events import ReplyDelta
from ..llm.messages import Content, ContentPart, Message, ToolCallPart
from ..text.redaction import apply


def privacy_scrub(config: Config, *, for_models: bool) -> Callable[[str], str] | None:
    """The function that redacts text for this use, or None when the filter leaves it alone."""
    mode = config.privacy_filter
    if mode == "off" or (for_models and mode != "full"):
        return None
    return lambda text: apply(mode, text, for_models=for_models)


def scrub_messages(messages: Sequence[Message], scrub: Callable[[str], str]) -> list[Message]:
    """Messages with their text redacted (string content and text parts; tool-call arguments too)."""
    return [_scrubbed_message(message, scrub) for message in messages]


def _scrubbed_message(message: Message, scrub: Callable[[str], str]) -> Message:
    if message["role"] == "assistant":
        reply = message.copy()
        if isinstance(reply["content"], str):
            reply["content"] = scrub(reply["content"])
        if reply.get("tool_calls"):
            reply["tool_calls"] = [_scrubbed_call(call, scrub) for call in reply["tool_calls"]]
        return reply
    copy = message.copy()
    copy["content"] = _scrubbed_content(copy["content"], scrub)
    return copy


def _scrubbed_content(content: Content, scrub: Callable[[str], str]) -> Content:
    if isinstance(content, str):
        return scrub(content)
    if isinstance(content, list):
        return [_scrubbed_part(part, scrub) for part in content]
    return content


def _scrubbed_part(part: ContentPart, scrub: Callable[[str], str]) -> ContentPart:
    text = part.get("text") if isinstance(part, dict) else None
    if not isinstance(text, str):
        return part
    # Other keys a provider reads (cache_control) stay; only the text changes, so the part keeps its type.
    return cast(ContentPart, {**part, "text": scrub(text)})


def _scrubbed_call(call: ToolCallPart, scrub: Callable[[str], str]) -> ToolCallPart:
    function = call.get("function")
    if not isinstance(function, dict):
        return call
    return {**call, "function": {**function, "arguments": scrub(function.get("arguments", ""))}}


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
