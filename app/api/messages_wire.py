"""Anthropic's Messages API as a translation onto the chat-completions turn: the request read into a
`CompletionRequest`, and the turn's answer written back as a `message` or its event stream.

Nothing here runs a turn: `/v1/messages` runs the same turn as `/v1/chat/completions` (api/turn.py, the
session's tool loop), and only the shapes differ. A request is read as Anthropic's servers read one:
`system` as a string or text blocks; `messages` whose content is a string or blocks (`text`, `image`,
`tool_use`, `tool_result`, and `thinking` blocks a client sends back, which are dropped); `tools` with
`input_schema`; `tool_choice`; `max_tokens`, `temperature`, `top_p`, `stop_sequences`; `stream`; `thinking`,
which asks for the panel's progress as thinking blocks. Fields it does not know (`metadata`, `service_tier`,
a client's betas) are ignored.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, cast

from ..llm.messages import ContentPart, Message, ToolCallPart, ToolSpec
from ..llm.stream import ToolCall
from .wire import ApiError, CompletionRequest, check_images

# Anthropic's error types by HTTP status; what is not here is an `api_error`.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}
# The chat-completions finish reasons as Messages stop reasons.
STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens", "content_filter": "refusal"}
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def error_body(error: ApiError) -> dict[str, object]:
    """An error in Anthropic's shape: {"type": "error", "error": {"type": ..., "message": ...}}."""
    kind = ERROR_TYPES.get(error.status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}}


def bad(param: str, wanted: str) -> ApiError:
    return ApiError(400, f"{param}: must be {wanted}", param=param, code="invalid_type")


def parse_messages(body: object, default_model: str, *, counting: bool = False) -> CompletionRequest:
    """The request as the turn takes it, or ApiError(400) naming the first field that is wrong.
    `counting`: a count_tokens request, which carries no max_tokens."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise bad("model", "a string (a preset's name; GET /v1/models lists them)")
    system, conversation = _conversation(body.get("messages"))
    check_images(conversation, lambda m, n: "an image in messages")
    messages = [*_system(body.get("system"), system), *conversation]
    sampling: dict[str, Any] = {}
    max_tokens = body.get("max_tokens")
    if max_tokens is None and not counting:
        raise ApiError(400, "max_tokens: Field required", param="max_tokens", code="missing")
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise bad("max_tokens", "a positive integer")
        sampling["max_tokens"] = max_tokens
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad(name, "a number")
        sampling[name] = float(value)
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise bad("stop_sequences", "a list of strings")
        if stops:
            sampling["stop"] = tuple(stops)
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise bad("stream", "a boolean")
    tools = _tools(body.get("tools"))
    passed: dict[str, Any] = {}
    choice = _tool_choice(body.get("tool_choice"))
    if choice is not None and tools:
        passed["tool_choice"] = choice
    return CompletionRequest(
        model=model or default_model,
        messages=messages,
        tools=tools if choice != "none" else None,
        stream=bool(stream),
        sampling=sampling,
        passed=passed,
        progress=_thinking(body.get("thinking")),
    )


def _system(value: object, later: list[str]) -> list[Message]:
    """The system prompt: `system`, then what system messages in the conversation said (Claude Code sends
    some mid-conversation), as one system message at the start, where every chat template accepts one."""
    texts = [*_system_texts(value, "system"), *later]
    text = "\n\n".join(text for text in texts if text)
    return [{"role": "system", "content": text}] if text else []


def _system_texts(value: object, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in value):
        return [str(block.get("text", "")) for block in value]
    raise bad(where, "a string or a list of text blocks")


def _conversation(value: object) -> tuple[list[str], list[Message]]:
    """The conversation's system texts, and its user and assistant turns as chat-completions messages."""
    if not isinstance(value, list) or not value:
        raise ApiError(400, "messages: must be a non-empty list of messages", param="messages", code="invalid_type")
    system: list[str] = []
    out: list[Message] = []
    for position, message in enumerate(value):
        where = f"messages.{position}"
        if not isinstance(message, dict):
            raise bad(where, "an object")
        role = message.get("role")
        content = message.get("content")
        if role == "system":
            system += _system_texts(content, f"{where}.content")
            continue
        if role not in ("user", "assistant"):
            raise ApiError(400, f"{where}.role: must be 'user' or 'assistant'", param=f"{where}.role")
        if isinstance(content, str):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": content}]
        elif isinstance(content, list) and all(isinstance(block, dict) for block in content):
            blocks = content
        else:
            raise bad(f"{where}.content", "a string or a list of content blocks")
        out += _assistant(blocks, where) if role == "assistant" else _user(blocks, where)
    return system, out


def _assistant(blocks: list[dict[str, Any]], where: str) -> list[Message]:
    texts: list[str] = []
    calls: list[ToolCallPart] = []
    for n, block in enumerate(blocks):
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            name, call_id = block.get("name"), block.get("id")
            if not isinstance(name, str) or not isinstance(call_id, str):
                raise bad(f"{where}.content.{n}", "a tool_use block with an id and a name")
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
        # thinking and redacted_thinking blocks are the client's copy of what it was shown: not sent back
    message: dict[str, object] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    if message["content"] is None and not calls:
        return []
    return [cast(Message, message)]


def _user(blocks: list[dict[str, Any]], where: str) -> list[Message]:
    """A user turn: its tool results first (one tool message each, as chat completions wants them right after
    the assistant's calls), then its text and images as one user message."""
    results: list[Message] = []
    parts: list[ContentPart] = []
    for n, block in enumerate(blocks):
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image":
            parts.append(image_part(block.get("source"), f"{where}.content.{n}.source"))
        elif kind == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                raise bad(f"{where}.content.{n}.tool_use_id", "a string (the id of the tool_use it answers)")
            text, images = _result_content(block.get("content"), f"{where}.content.{n}.content")
            if block.get("is_error"):
                text = f"error: {text}"
            results.append({"role": "tool", "tool_call_id": call_id, "content": text})
            parts += images  # a tool message carries text only; its images follow in the user message
        elif kind == "document":
            raise ApiError(400, f"{where}.content.{n}: document blocks are not supported; send the text",
                           param=f"{where}.content.{n}", code="unsupported_value")  # fmt: skip
    if not parts:
        return results
    if all(part["type"] == "text" for part in parts):
        text = "\n\n".join(part["text"] for part in parts if part["type"] == "text")
        last = results[-1] if results else None
        if last is not None and last["role"] == "tool":
            # Text beside tool results (an agent's reminders) goes with the last result: the conversation goes
            # on past the user's prompt, so the tool round reuses the panel's answers instead of a new panel.
            results[-1] = {**last, "content": f"{last['content']}\n\n{text}"}
            return results
        return [*results, {"role": "user", "content": text}]
    return [*results, {"role": "user", "content": parts}]


def _result_content(content: object, where: str) -> tuple[str, list[ContentPart]]:
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise bad(where, "a string or a list of content blocks")
    texts: list[str] = []
    images: list[ContentPart] = []
    for n, block in enumerate(content):
        if isinstance(block, dict) and block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") == "image":
            images.append(image_part(block.get("source"), f"{where}.{n}.source"))
    return "\n".join(texts), images


def image_part(source: object, where: str) -> ContentPart:
    """An image block's source as an OpenAI image part: base64 data as a data: URL, or the URL as it is."""
    if isinstance(source, dict) and source.get("type") == "base64":
        media, data = source.get("media_type"), source.get("data")
        if media not in IMAGE_TYPES:
            raise bad(f"{where}.media_type", f"one of {', '.join(IMAGE_TYPES)}")
        if not isinstance(data, str) or not data:
            raise bad(f"{where}.data", "base64 image data")
        return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
    if isinstance(source, dict) and source.get("type") == "url" and isinstance(source.get("url"), str):
        return {"type": "image_url", "image_url": {"url": source["url"]}}
    raise bad(where, 'an image source ({"type": "base64", "media_type": ..., "data": ...} or {"type": "url", ...})')


def _tools(value: object) -> list[ToolSpec] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise bad("tools", "a list of tools")
    tools: list[ToolSpec] = []
    for n, tool in enumerate(value):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise bad(f"tools.{n}", 'an object {"name": ..., "input_schema": {...}}')
        if tool.get("type") not in (None, "custom"):
            continue  # a server tool of Anthropic's own (web search, ...): nothing here runs it
        schema = tool.get("input_schema")
        if schema is not None and not isinstance(schema, dict):
            raise bad(f"tools.{n}.input_schema", "a JSON Schema object")
        function: dict[str, object] = {"name": tool["name"], "parameters": schema or {"type": "object"}}
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        tools.append(cast(ToolSpec, {"type": "function", "function": function}))
    return tools or None


def _tool_choice(value: object) -> object:
    """Anthropic's tool_choice as chat completions' ("auto", "required", "none", or one function)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad("tool_choice", 'an object such as {"type": "auto"}')
    kind = value.get("type")
    if kind == "auto":
        return "auto"
    if kind == "any":
        return "required"
    if kind == "none":
        return "none"
    if kind == "tool" and isinstance(value.get("name"), str):
        return {"type": "function", "function": {"name": value["name"]}}
    raise bad("tool_choice", "auto, any, none, or a tool with a name")


def _thinking(value: object) -> bool | None:
    """Whether the client asks for thinking: the panel's progress is then streamed as thinking blocks."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad("thinking", 'an object such as {"type": "enabled", "budget_tokens": 1024}')
    return value.get("type") in ("enabled", "adaptive")


# --------------------------------------------------------------------------- answers


def message_id() -> str:
    return f"msg_moa{uuid.uuid4().hex[:24]}"


def stop_reason(finish: str) -> str:
    return STOP_REASONS.get(finish, "end_turn")


def tool_input(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as the `input` object; arguments that are not a JSON object come as {"_raw": text},
    so the client's tool reports them as invalid instead of running on nothing."""
    arguments, _ = call.parsed_arguments()
    return arguments if arguments is not None else {"_raw": call.arguments}


def usage(counts: Mapping[str, object] | None) -> dict[str, int]:
    """The turn's usage (summed over every call of the panel) in Anthropic's words. The wire has no word for
    "not reported" (its fields are required numbers): 0 then, and `moa_chat.usage_complete` says so."""
    counts = counts or {}
    return {"input_tokens": _int(counts.get("prompt_tokens")), "output_tokens": _int(counts.get("completion_tokens"))}


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def message(
    model: str,
    text: str,
    calls: Sequence[ToolCall],
    finish: str,
    counts: Mapping[str, object] | None,
    extension: object,
) -> dict[str, object]:
    """A whole (non-streamed) message."""
    content: list[dict[str, object]] = [{"type": "text", "text": text}] if text or not calls else []
    content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": tool_input(c)} for c in calls]
    return {
        "id": message_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(finish),
        "stop_sequence": None,
        "usage": usage(counts),
        "moa_chat": extension,
    }


class MessageEvents:
    """The event stream of one streamed message: message_start, each content block opened, its deltas and
    its stop (text, thinking, tool_use), message_delta with the stop reason and usage, message_stop."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.index = -1  # the open block's index; -1 before the first
        self.open: str | None = None  # the open block's type

    def start(self) -> bytes:
        body: dict[str, object] = {
            "id": message_id(),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return self.event("message_start", {"type": "message_start", "message": body})

    def text(self, text: str) -> bytes:
        return self._delta("text", {"type": "text_delta", "text": text})

    def thinking(self, text: str) -> bytes:
        return self._delta("thinking", {"type": "thinking_delta", "thinking": text})

    def _delta(self, kind: str, delta: dict[str, object]) -> bytes:
        out = b""
        if self.open != kind:
            out += self._close()
            self.index += 1
            self.open = kind
            block: dict[str, object] = {"type": "text", "text": ""}
            if kind == "thinking":
                block = {"type": "thinking", "thinking": "", "signature": ""}
            out += self._block("content_block_start", content_block=block)
        return out + self._block("content_block_delta", delta=delta)

    def _block(self, name: str, **fields: object) -> bytes:
        return self.event(name, {"type": name, "index": self.index, **fields})

    def _close(self) -> bytes:
        if self.open is None:
            return b""
        out = b""
        if self.open == "thinking":  # a thinking block ends with its signature (none: the panel signs nothing)
            out += self._block("content_block_delta", delta={"type": "signature_delta", "signature": ""})
        self.open = None
        return out + self._block("content_block_stop")

    def end(
        self, calls: Sequence[ToolCall], finish: str, counts: Mapping[str, object] | None, extension: object
    ) -> list[bytes]:
        """The tool calls as tool_use blocks, then the stop reason and usage, then message_stop."""
        out = [self._close()]
        if self.index < 0 and not calls:  # a reply with no text at all still has its one text block
            out += [self.text(""), self._close()]
        for call in calls:
            self.index += 1
            block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
            partial = json.dumps(tool_input(call), ensure_ascii=False)
            out.append(self._block("content_block_start", content_block=block))
            out.append(self._block("content_block_delta", delta={"type": "input_json_delta", "partial_json": partial}))
            out.append(self._block("content_block_stop"))
        delta = {"stop_reason": stop_reason(finish), "stop_sequence": None}
        ending = {"type": "message_delta", "delta": delta, "usage": usage(counts), "moa_chat": extension}
        out.append(self.event("message_delta", ending))
        out.append(self.event("message_stop", {"type": "message_stop"}))
        return out

    def error(self, error: ApiError) -> bytes:
        return self.event("error", error_body(error))

    PING = b'event: ping\ndata: {"type": "ping"}\n\n'

    @staticmethod
    def event(name: str, payload: object) -> bytes:
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        return f"event: {name}\ndata: {data}\n\n".encode()
