"""`privacy_filter:` applied where it belongs: `display` to what the chat shows and traces keep, `full`
also to what the models receive (the patterns themselves live in moa_chat.privacy)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..config import Config
from ..privacy import apply


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
