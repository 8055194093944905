"""`POST /v1/messages` and `/v1/messages/count_tokens`: Anthropic's Messages API on the same turns.

The request is translated (api/messages_wire.py) into the `CompletionRequest` the chat-completions endpoint
runs, and admitted, started and released by the same server (`ApiServer.admit`, `launch`, `release`), so
presets, auth, limits, the guidance cache across tool rounds, `--save` and `--read-tools` are the same. Only
the answer's shape differs: a `message`, or Anthropic's event stream. A panel already running
`--max-turns` turns is `overloaded_error` (529), which Anthropic's clients retry as they do Anthropic's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from ..llm.tokens import estimate_messages
from .messages_wire import MessageEvents, message, parse_messages
from .turn import Outcome, finish_reason
from .wire import ApiError, CompletionRequest

if TYPE_CHECKING:
    from .server import ApiServer

PATHS = ("/v1/messages", "/messages")
COUNT_PATHS = tuple(f"{path}/count_tokens" for path in PATHS)


def speaks_messages(path: str) -> bool:
    """Whether a request's path is the Messages API's, whose errors take Anthropic's shape."""
    return path.rstrip("/") in (*PATHS, *COUNT_PATHS)


class MessagesEndpoint:
    def __init__(self, server: ApiServer) -> None:
        self.server = server

    def routes(self, app: web.Application) -> None:
        for path in PATHS:
            app.router.add_post(path, self.messages)
            app.router.add_post(f"{path}/count_tokens", self.count_tokens)

    async def count_tokens(self, request: web.Request) -> web.StreamResponse:
        """The conversation's tokens as the aggregator gets it, by moa-chat's estimate (llm/tokens.py)."""
        server = self.server
        try:
            parsed = parse_messages(await server.read_body(request), server.catalog.default, counting=True)
            server.catalog.preset(parsed.model)
        except ApiError as exc:
            return server.error(request, exc)
        response = web.json_response({"input_tokens": estimate_messages(parsed.messages, parsed.tools)})
        server.cors(request, response)
        return response

    async def messages(self, request: web.Request) -> web.StreamResponse:
        server = self.server
        note = server.note_of(request)
        try:
            parsed = parse_messages(await server.read_body(request), server.catalog.default)
            preset = server.admit(note, parsed)
        except ApiError as exc:
            if exc.code == "rate_limit_exceeded":  # the panel is full: Anthropic's clients know this as 529
                exc = ApiError(529, exc.message, kind="overloaded_error", code="overloaded", headers=exc.headers)
            return server.error(request, exc)
        return await server.answer(request, parsed, preset, MessageFrames(parsed), message)


class MessageFrames:
    """Anthropic's event stream: `message_start` and a ping, text and thinking deltas, `message_stop`."""

    def __init__(self, parsed: CompletionRequest) -> None:
        self.parsed, self.events = parsed, MessageEvents(parsed.model)

    def opening(self) -> bytes:
        return self.events.start() + self.events.PING

    def text(self, text: str) -> bytes:
        return self.events.text(text)

    def thinking(self, text: str) -> bytes:
        return self.events.thinking(text)

    def ending(self, outcome: Outcome) -> list[bytes]:
        extension = outcome.extension(self.parsed.model)
        return self.events.end(outcome.tool_calls, finish_reason(outcome), outcome.usage(), extension)

    def failure(self, error: ApiError) -> bytes:
        return self.events.error(error)  # no message_stop: the message is not whole
