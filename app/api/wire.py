"""The chat-completions request as a client sends it, checked, and the shapes the endpoint answers in.

A request is read the way OpenAI-compatible servers usually read one: fields this server does not know are
ignored, a known field of the wrong type is a 400 in OpenAI's error shape naming the field. What the
preset decides (the models) is not the client's to change; what the client's own sampling asks for
(`temperature`, `max_tokens`, `stop`, ...) goes to the aggregator, the model whose reply the client reads.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from ..images import MAX_IMAGES, ImageError, checked, read_part
from ..llm.messages import Message, ToolSpec
from ..text.inert import inert_json

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
# A message's keys that reach the models; anything else a client adds is left out of the request.
_MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
# Sampling fields with a place in moa-chat's own request (llm.request.Sampling).
_SAMPLING_NUMBERS = ("temperature", "top_p")
# Fields passed to the aggregator as they came, beside the request's own (after their types are checked).
_PASSED_NUMBERS = ("presence_penalty", "frequency_penalty")
_PASSED = ("seed", "tool_choice", "parallel_tool_calls", "response_format", "logit_bias", "user")


class ApiError(Exception):
    """A request answered with an error in OpenAI's shape: {"error": {message, type, param, code}}."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.code, self.param = status, message, kind, code, param
        self.headers = dict(headers or {})

    def body(self) -> dict[str, object]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def bad_type(param: str, wanted: str) -> ApiError:
    return ApiError(400, f"'{param}' must be {wanted}", param=param, code="invalid_type")


@dataclass(frozen=True)
class CompletionRequest:
    """What one POST /v1/chat/completions asks for, checked."""

    model: str
    messages: list[Message]
    tools: list[ToolSpec] | None = None
    stream: bool = False
    include_usage: bool = False
    sampling: dict[str, Any] = field(default_factory=dict)  # Sampling's own fields for the aggregator
    passed: dict[str, Any] = field(default_factory=dict)  # the rest for the aggregator, as extra_body
    progress: bool | None = None  # None: the server's setting


def parse_request(body: object, default_model: str) -> CompletionRequest:
    """The request, or ApiError(400) naming the first field that is wrong."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise bad_type("model", "a string (a preset's name; GET /v1/models lists them)")
    messages = _messages(body.get("messages"))
    stream = _optional(body, "stream", bool, "a boolean") or False
    options = _optional(body, "stream_options", dict, "an object") or {}
    include_usage = _optional(options, "include_usage", bool, "a boolean", prefix="stream_options.") or False
    n = _optional(body, "n", int, "an integer")
    if n not in (None, 1):
        raise ApiError(400, "'n' must be 1: the panel writes one reply", param="n", code="unsupported_value")
    sampling: dict[str, Any] = {}
    for name in _SAMPLING_NUMBERS:
        if (value := _number(body, name)) is not None:
            sampling[name] = value
    tokens = _optional(body, "max_completion_tokens", int, "an integer")
    tokens = _optional(body, "max_tokens", int, "an integer") if tokens is None else tokens
    if tokens is not None:
        sampling["max_tokens"] = tokens
    stop = body.get("stop")
    if stop is not None:
        if isinstance(stop, str):
            sampling["stop"] = stop
        elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
            sampling["stop"] = tuple(stop)
        else:
            raise bad_type("stop", "a string or a list of strings")
    effort = _optional(body, "reasoning_effort", str, "a string")
    if effort is not None:
        sampling["reasoning_effort"] = effort
    passed = {name: value for name in _PASSED_NUMBERS if (value := _number(body, name)) is not None}
    passed.update(_passed(body))
    progress = _optional(body, "moa_progress", bool, "a boolean")
    return CompletionRequest(
        model=model or default_model,
        messages=messages,
        tools=_tools(body.get("tools")),
        stream=stream,
        include_usage=include_usage,
        sampling=sampling,
        passed=passed,
        progress=progress,
    )


def _optional(body: Mapping[str, Any], name: str, kind: type, wanted: str, *, prefix: str = "") -> Any:
    value = body.get(name)
    if value is None:
        return None
    # bool is an int to Python, never to a JSON schema
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise bad_type(prefix + name, wanted)
    return value


def _number(body: Mapping[str, Any], name: str) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad_type(name, "a number")
    return float(value)


def _passed(body: Mapping[str, Any]) -> dict[str, Any]:
    checks: dict[str, tuple[type | tuple[type, ...], str]] = {
        "seed": (int, "an integer"),
        "tool_choice": ((str, dict), "a string or an object"),
        "parallel_tool_calls": (bool, "a boolean"),
        "response_format": (dict, "an object"),
        "logit_bias": (dict, "an object"),
        "user": (str, "a string"),
    }
    passed = {}
    for name in _PASSED:
        value = body.get(name)
        if value is None:
            continue
        kind, wanted = checks[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise bad_type(name, wanted)
        passed[name] = value
    return passed


def _messages(value: object) -> list[Message]:
    if not isinstance(value, list) or not value:
        raise ApiError(400, "'messages' must be a non-empty list of messages", param="messages", code="invalid_type")
    messages: list[Message] = []
    for position, message in enumerate(value):
        where = f"messages[{position}]"
        if not isinstance(message, dict):
            raise bad_type(where, "an object")
        role = message.get("role")
        if role not in ROLES:
            raise ApiError(400, f"'{where}.role' must be one of {', '.join(sorted(ROLES))}", param=f"{where}.role")
        content = message.get("content")
        if content is not None and not isinstance(content, str | list):
            raise bad_type(f"{where}.content", "a string or a list of content parts")
        if isinstance(content, list) and not all(isinstance(part, dict) for part in content):
            raise bad_type(f"{where}.content", "a list of content parts (objects)")
        calls = message.get("tool_calls")
        if calls is not None and not (isinstance(calls, list) and all(isinstance(c, dict) for c in calls)):
            raise bad_type(f"{where}.tool_calls", "a list of tool calls")
        if role == "tool" and not isinstance(message.get("tool_call_id"), str):
            raise bad_type(f"{where}.tool_call_id", "a string (the id of the call it answers)")
        kept = {key: message[key] for key in _MESSAGE_KEYS if message.get(key) is not None}
        if role == "developer":  # OpenAI's newer name for it; most compatible servers know only "system"
            kept["role"] = "system"
        if "content" not in kept and role != "assistant":
            kept["content"] = ""
        messages.append(cast(Message, kept))
    check_images(messages, lambda m, n: f"messages[{m}].content[{n}]")
    return messages


def check_images(messages: Sequence[Message], where: Callable[[int, int], str]) -> None:
    """ApiError(400) for an image that cannot be sent (not an image, too large) or one too many;
    `where(message, part)` names its place in the request as the client wrote it."""
    seen = 0
    for m, message in enumerate(messages):
        content = message.get("content")
        for n, part in enumerate(content if isinstance(content, list) else ()):
            image = read_part(part)
            if image is None:
                continue
            seen += 1
            if seen > MAX_IMAGES:
                raise ApiError(400, f"more than {MAX_IMAGES} images in one request; send the ones that matter",
                               param=where(m, n), code="too_many_images")  # fmt: skip
            if image.data is None:
                continue  # a URL: the provider fetches it
            try:
                checked(image.data, where(m, n))
            except ImageError as exc:
                raise ApiError(400, str(exc), param=where(m, n), code="invalid_image") from None


def _tools(value: object) -> list[ToolSpec] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise bad_type("tools", "a list of tools")
    for position, tool in enumerate(value):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise bad_type(f"tools[{position}]", 'an object {"type": "function", "function": {"name": ...}}')
    return cast(list[ToolSpec], value) or None


# --------------------------------------------------------------------------- answers


def completion_id() -> str:
    return f"chatcmpl-moa-{uuid.uuid4().hex[:24]}"


def tool_call_parts(calls: Sequence[Any]) -> list[dict[str, object]]:
    """The aggregator's tool calls (llm.ToolCall) as a message's `tool_calls`, indexed as stream deltas are."""
    return [
        {"index": n, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for n, c in enumerate(calls)
    ]


class ChunkWriter:
    """The SSE events of one streamed completion: every chunk carries the same id, created and model."""

    def __init__(self, model: str) -> None:
        self.id, self.model, self.created = completion_id(), model, int(time.time())

    def chunk(self, delta: dict[str, object], finish: str | None = None, **extra: object) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return self.event(self._base(choices=[choice], **extra))

    def usage(self, usage: dict[str, object] | None, **extra: object) -> bytes:
        return self.event(self._base(choices=[], usage=usage, **extra))

    def _base(self, **fields: object) -> dict[str, object]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            **fields,
        }

    @staticmethod
    def event(payload: object) -> bytes:
        # Unicode as itself, but C1 controls escaped (U+009B acts as CSI on a terminal that shows the stream).
        return b"data: " + inert_json(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"

    DONE = b"data: [DONE]\n\n"


def completion(
    model: str, text: str, calls: Sequence[Any], finish: str, usage: dict[str, object] | None, extension: object
) -> dict[str, object]:
    """A whole (non-streamed) chat.completion."""
    message: dict[str, object] = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        message["tool_calls"] = [{k: v for k, v in part.items() if k != "index"} for part in tool_call_parts(calls)]
    return {
        "id": completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": usage,
        "moa_chat": extension,
    }
