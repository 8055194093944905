"""A conversation's images as the models get them: counted, or replaced by notes for a model that cannot see
(moa_chat.images reads the images themselves)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from ..images import IMAGE_NAMES, note, read_part
from .messages import ContentPart, Message, TextPart


def count_images(messages: Sequence[Message]) -> int:
    return sum(1 for message in messages for part in _parts(message) if read_part(part) is not None)


def _parts(message: Message) -> list[object]:
    content = message.get("content")
    return list(content) if isinstance(content, list) else []


def without_images(messages: Sequence[Message]) -> list[Message]:
    """The messages with every image part replaced by a text note naming it; unchanged when there are none."""
    if not count_images(messages):
        return list(messages)
    out: list[Message] = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list) or not any(read_part(part) for part in content):
            out.append(message)
            continue
        text = " ".join(part["text"] for part in content if part["type"] == "text")
        names = iter(IMAGE_NAMES.findall(text))
        parts: list[ContentPart] = [
            cast(TextPart, {"type": "text", "text": note(part, next(names, ""))}) if read_part(part) else part
            for part in content
        ]
        out.append(cast(Message, {**message, "content": parts}))
    return out
