"""`privacy_filter:` where it reaches the models: under `full`, every request's messages are redacted before
they leave the machine (the references', the aggregator's, the chat's and the Python API's alike). The
patterns live in moa_chat.text.redaction; the chat's display side is session.display_scrub."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

from ..config import Config
from ..llm.messages import Content, ContentPart, Message, ToolCallPart
from ..text.redaction import apply
from .env import MessageFilter


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


def model_filter(config: Config) -> MessageFilter | None:
    """What every request's messages go through under `privacy_filter: full`; None when they go as they are."""
    scrub = privacy_scrub(config, for_models=True)
    if scrub is None:
        return None
    return lambda messages: scrub_messages(messages, scrub)
