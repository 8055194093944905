"""Turning a chat-completions stream (or a complete response) into text, tool calls and usage.

Real servers differ in small ways this tolerates:
- tool calls arrive as deltas keyed by `index`, arguments split across many chunks;
- OpenAI sends a call's `id` and `name` once, llama.cpp's server repeats them in every delta;
- some servers reuse index 0 for parallel calls, telling them apart only by a new `id`;
- usage arrives in a final chunk with no choices (with stream_options.include_usage), or not at all;
- reasoning models send `reasoning_content` / `reasoning` deltas beside the answer.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any, cast

from .errors import loaded_module
from .messages import ToolCallPart
from .usage import Usage


def _get(obj: object, key: str, default: Any = None) -> Any:
    """A field of a chunk or response, whether an SDK model or the JSON's dict (what it holds is the server's)."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    # An SDK model keeps its fields in __dict__ and what else the server sent in __pydantic_extra__; asked for a
    # key it lacks (`reasoning_content`, twice a chunk), pydantic's __getattr__ raises and catches an
    # AttributeError, an order of magnitude slower than these lookups, on the thread that shares the GIL with the
    # UI (docs/performance.md, "Figures behind the code").
    values = getattr(obj, "__dict__", None)
    if values is not None and key in values:
        return values[key]
    extra = getattr(obj, "__pydantic_extra__", None)
    if isinstance(extra, dict):
        return extra.get(key, default)
    return getattr(obj, key, default)


class MalformedStream(ValueError):
    """An SSE event whose data is not JSON; `sample` is its start, for the error a user reads."""

    def __init__(self, data: str) -> None:
        self.sample = data[:60] + ("…" if len(data) > 60 else "")
        super().__init__(f"a streamed chunk is not JSON: {self.sample!r}")


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> tuple[dict[str, Any] | None, str | None]:
        """(arguments, None) or (None, a message for the model) when they are not a JSON object."""
        text = self.arguments.strip() or "{}"
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            return None, f"the arguments are not valid JSON ({exc.msg} at character {exc.pos}): {text[:200]}"
        except RecursionError:
            return None, "the arguments nest too deeply to parse"
        if not isinstance(value, dict):
            return None, f"the arguments must be a JSON object, not {type(value).__name__}"
        return value, None

    def as_message_part(self) -> ToolCallPart:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class _CallBuilder:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def args_text(self) -> str:
        return "".join(self.arguments)

    def looks_complete(self) -> bool:
        try:
            json.loads(self.args_text())
        except (ValueError, RecursionError):
            return False
        return True


class StreamAssembler:
    """Feed chunks in order; read `text`, `tool_calls()`, `usage` and `finish_reason` at the end."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget everything fed so far (an attempt that produced nothing, before a retry)."""
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: list[_CallBuilder] = []
        self._by_index: dict[int, int] = {}  # stream index -> position in _calls
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.chunks = 0
        self.answer_chunks = 0  # chunks that carried text, reasoning or part of a tool call
        self.reasoning_added = ""  # the reasoning the last chunk fed carried (for a caller that shows it)

    @property
    def text(self) -> str:
        return "".join(self._text)

    @property
    def has_output(self) -> bool:
        """Whether any answer (text, or part of a tool call) has arrived."""
        return bool(self._text or self._calls)

    @property
    def reasoning(self) -> str:
        return "".join(self._reasoning)

    def feed(self, chunk: object) -> str:
        """Take one chunk; return the answer text it added (may be empty)."""
        self.chunks += 1
        usage = _get(chunk, "usage")
        if usage is not None:
            self.usage = Usage.from_sdk(usage) or self.usage
        added = []
        answered = False
        self.reasoning_added = ""
        for choice in _get(chunk, "choices") or ():
            delta = _get(choice, "delta")
            if delta is not None:
                content = _get(delta, "content")
                if content:
                    added.append(content)
                reasoning = _get(delta, "reasoning_content") or _get(delta, "reasoning")
                if isinstance(reasoning, str) and reasoning:
                    self._reasoning.append(reasoning)
                    self.reasoning_added += reasoning
                    answered = True
                for call_delta in _get(delta, "tool_calls") or ():
                    self._feed_tool_call(call_delta)
                    answered = True
            finish = _get(choice, "finish_reason")
            if finish:
                self.finish_reason = finish
        text = "".join(added)
        if text:
            self._text.append(text)
        if added or answered:
            self.answer_chunks += 1
        return text

    def _feed_tool_call(self, delta: object) -> None:
        index = _get(delta, "index")
        call_id = _get(delta, "id") or ""
        function = _get(delta, "function")
        name = _get(function, "name") or ""
        args = _get(function, "arguments") or ""
        if index is None:
            # Servers that omit the index send calls one after another: continue the last one
            # unless this delta starts a new call.
            index = max(self._by_index, default=0)
            if call_id and self._calls and self._calls[self._by_index[index]].id not in ("", call_id):
                index += 1
        builder = self._builder_for(index, call_id, bool(name))
        if call_id and not builder.id:
            builder.id = call_id
        if name:
            if not builder.name or name.startswith(builder.name):
                # Repeated (llama.cpp) or cumulative names replace; never concatenate a repeated name.
                builder.name = name
            elif not builder.name.endswith(name):
                builder.name += name
        if args:
            builder.arguments.append(args)

    def _builder_for(self, index: int, call_id: str, named: bool) -> _CallBuilder:
        position = self._by_index.get(index)
        if position is not None:
            current = self._calls[position]
            new_id = bool(call_id and current.id and call_id != current.id)
            if not (new_id and (named or current.looks_complete())):
                return current
            # Same index, a new id with a name or after complete arguments: a server that numbers every
            # call 0 (a call without arguments never looks complete, so the name must count too).
        builder = _CallBuilder()
        self._calls.append(builder)
        self._by_index[index] = len(self._calls) - 1
        return builder

    def tool_calls(self) -> list[ToolCall]:
        calls = []
        for n, builder in enumerate(self._calls):
            if not builder.name and not builder.arguments:
                continue
            calls.append(ToolCall(id=builder.id or f"call_{n}", name=builder.name, arguments=builder.args_text()))
        return calls

    def feed_response(self, response: object) -> str:
        """Take a complete (non-streamed) response; return its text."""
        self.usage = Usage.from_sdk(_get(response, "usage"))
        choices = _get(response, "choices") or ()
        if not choices:
            return ""
        message = _get(choices[0], "message")
        self.finish_reason = _get(choices[0], "finish_reason")
        text = _get(message, "content") or ""
        if text:
            self._text.append(text)
        reasoning = _get(message, "reasoning_content") or _get(message, "reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._reasoning.append(reasoning)
            self.reasoning_added = reasoning
        for n, call in enumerate(_get(message, "tool_calls") or ()):
            function = _get(call, "function")
            self._calls.append(
                _CallBuilder(
                    id=_get(call, "id") or f"call_{n}",
                    name=_get(function, "name") or "",
                    arguments=[_get(function, "arguments") or ""],
                )
            )
        return text


def is_complete_response(result: object) -> bool:
    """A full chat.completion (has choices[0].message) rather than a chunk stream."""
    choices = _get(result, "choices")
    return bool(choices) and _get(choices[0], "message") is not None


def stream_chunks(stream: object) -> Iterable[object]:
    """The chunks of a streamed answer, in order.

    An SDK stream is read one level down: each SSE event's JSON, as a dict. The SDK makes a model object of
    every chunk, some twenty times what the JSON and the assembler cost, and at a fast provider's rate that
    takes most of the GIL from the UI (docs/performance.md, "Figures behind the code"). The events, the end
    ([DONE]), an error sent in the stream and the network's faults are read as the SDK's `Stream` reads
    them. Anything else (a substituted `call_llm`'s answer) is iterated as it is.
    """
    openai, response = loaded_module("openai"), _http_response(stream)
    if openai is None or response is None or not isinstance(stream, openai.Stream):
        return cast(Iterable[object], stream)  # a substituted call_llm's answer; ModelCall checked it iterates
    return _sse_chunks(response, openai, loaded_module("httpx2"))


def _http_response(stream: object) -> Any:
    """The HTTP response under an SDK stream; None for anything else (a substituted `call_llm`'s answer)."""
    httpx = loaded_module("httpx2")  # loaded whenever such a response exists
    response = getattr(stream, "response", None)
    return response if httpx is not None and isinstance(response, httpx.Response) else None


def _sse_chunks(response: Any, openai: Any, httpx: Any) -> Iterator[object]:
    data: list[str] = []
    try:
        for line in response.iter_lines():
            if line:
                field_name, _, value = line.partition(":")
                if field_name == "data":  # other fields (event, id, retry) and comments (":") say nothing here
                    data.append(value[1:] if value.startswith(" ") else value)
                continue
            if not data:
                continue  # an event with no data: the SDK would fail to parse it, there is nothing to read
            text = "\n".join(data)
            data = []
            if text.startswith("[DONE]"):
                return
            try:
                chunk = json.loads(text)
            except json.JSONDecodeError as exc:
                raise MalformedStream(text) from exc
            if isinstance(chunk, dict) and chunk.get("error"):
                error = chunk["error"]
                message = error.get("message") if isinstance(error, dict) else None
                if not message or not isinstance(message, str):
                    message = "An error occurred during streaming"  # the SDK's words
                raise openai.APIError(message, response.request, body=error)
            yield chunk
    except httpx.TimeoutException as exc:
        raise openai.APITimeoutError(request=response.request) from exc
    except (httpx.RequestError, ssl.SSLError) as exc:
        raise openai.APIConnectionError(request=response.request) from exc
    finally:
        response.close()


@cache
def _noted_bytes_type() -> type:
    """The byte-stream wrapper, made on first use: httpx2 is loaded by then (a response exists)."""
    import httpx2

    class NotedBytes(httpx2.SyncByteStream):
        """A response body that reports each piece of bytes as it arrives (SSE comments and keep-alives too)."""

        def __init__(self, inner: httpx2.SyncByteStream, on_bytes: Callable[[], None]) -> None:
            self._inner, self._on_bytes = inner, on_bytes

        def __iter__(self) -> Iterator[bytes]:
            for piece in self._inner:
                self._on_bytes()
                yield piece

        def close(self) -> None:
            self._inner.close()

    return NotedBytes


def note_bytes(stream: object, on_bytes: Callable[[], None]) -> bool:
    """Call `on_bytes` for every piece of an SDK stream's body, below its SSE parsing, so a provider's
    keep-alive comments count as signs of life. False when the stream is not one whose bytes we can see
    (a substituted `call_llm`); the caller then counts chunks instead."""
    response = _http_response(stream)
    inner = getattr(response, "stream", None)
    if response is None or not isinstance(inner, loaded_module("httpx2").SyncByteStream):
        return False
    noted = _noted_bytes_type()
    if not isinstance(inner, noted):
        response.stream = noted(inner, on_bytes)
    return True


def close_stream(stream: object) -> None:
    """Close an SDK stream at once, even while another thread is blocked reading it.

    Closing the response alone leaves a blocked read waiting for the server's next byte, however long a
    silent stream stays silent; shutting the socket down wakes that read immediately.
    """
    response = getattr(stream, "response", None)
    extensions = getattr(response, "extensions", None) or {}
    network = extensions.get("network_stream")
    sock = network.get_extra_info("socket") if network is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    close = getattr(stream, "close", None)
    if close is not None:
        close()
