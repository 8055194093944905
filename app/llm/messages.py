"""The chat-completions messages and tool specs moa-chat sends, as types.

These are the shapes of the OpenAI chat-completions request body that moa-chat writes and reads: a
conversation is a list of `Message`, each tagged by its `role`, so `message["role"] == "tool"` narrows it to
a `ToolMessage`. They are TypedDicts, so a message stays the plain dict that goes on the wire and into the
store; nothing is converted on the way.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypeAlias, TypedDict


class TextPart(TypedDict):
    type: Literal["text"]
    text: str


class ImageURL(TypedDict):
    url: str
    detail: NotRequired[Literal["auto", "low", "high"]]


class ImagePart(TypedDict):
    type: Literal["image_url"]
    image_url: ImageURL


ContentPart: TypeAlias = TextPart | ImagePart
# A message's content: plain text, or parts (text and images) for the models that take them.
Content: TypeAlias = str | list[ContentPart]


class FunctionCall(TypedDict):
    name: str
    arguments: str  # JSON text, as the model wrote it (not always valid)


class ToolCallPart(TypedDict):
    """A tool call as an assistant message carries it."""

    id: str
    type: Literal["function"]
    function: FunctionCall


class SystemMessage(TypedDict):
    role: Literal["system"]
    content: Content


class DeveloperMessage(TypedDict):
    role: Literal["developer"]
    content: Content


class UserMessage(TypedDict):
    role: Literal["user"]
    content: Content


class AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: str | None
    tool_calls: NotRequired[list[ToolCallPart]]


class ToolMessage(TypedDict):
    role: Literal["tool"]
    tool_call_id: str
    content: Content
    name: NotRequired[str]


Message: TypeAlias = SystemMessage | DeveloperMessage | UserMessage | AssistantMessage | ToolMessage
Role: TypeAlias = Literal["system", "developer", "user", "assistant", "tool"]


class FunctionSpec(TypedDict):
    name: str
    description: NotRequired[str]
    parameters: NotRequired[dict[str, object]]  # a JSON Schema


class ToolSpec(TypedDict):
    """A tool offered to the aggregator (`tools=[...]` in the request)."""

    type: Literal["function"]
    function: FunctionSpec


class StreamOptions(TypedDict, total=False):
    include_usage: bool


def user(content: Content) -> UserMessage:
    return {"role": "user", "content": content}


def system(text: str) -> SystemMessage:
    return {"role": "system", "content": text}


def assistant(text: str | None, tool_calls: list[ToolCallPart] | None = None) -> AssistantMessage:
    message: AssistantMessage = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def tool_result(call_id: str, content: str) -> ToolMessage:
    return {"role": "tool", "tool_call_id": call_id, "content": content}
