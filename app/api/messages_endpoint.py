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
from .turn import Failure, Outcome, finish_reason
from .wire import ApiError, CompletionRequest

if TYPE_CHECKING:
    from .server import ApiServer, LiveTurn, RequestNote

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
        progress = parsed.progress if parsed.progress is not None else server.settings.progress
        live = server.launch(parsed, preset, progress)
        try:
            if parsed.stream:
                return await self._stream(request, parsed, live, note, progress)
            return await server.whole(request, parsed, live, note, message)
        finally:
            server.release(live)

    async def _stream(
        self, request: web.Request, parsed: CompletionRequest, live: LiveTurn, note: RequestNote, progress: bool
    ) -> web.StreamResponse:
        server = self.server
        events = MessageEvents(parsed.model)
        response: web.StreamResponse | None = None
        if progress:  # progress comes before any text: the stream opens now, and any failure is an event
            response = await self._open(request, events, note)
            if response is None:
                return web.Response(status=408)  # never sent: the connection is dropped
        queue = live.outbox.queue
        while True:
            items = [await queue.get()]
            while not queue.empty():
                items.append(queue.get_nowait())
            out: list[bytes] = []
            ended = False
            for kind, value in items:
                live.ended = kind in ("done", "failed")
                if kind == "delta":
                    out.append(events.text(str(value)))
                elif kind in ("progress", "reasoning"):
                    out.append(events.thinking(str(value)))
                elif kind == "done":
                    assert isinstance(value, Outcome)
                    server.account(note, value)
                    finish = finish_reason(value)
                    out += events.end(value.tool_calls, finish, value.usage(), value.extension(parsed.model))
                    ended = True
                elif kind == "failed":
                    assert isinstance(value, Failure)
                    server.account(note, value)
                    error = server.final_error(value.error)
                    if response is None and not out:
                        return server.error(request, error)
                    note.ended = error.code or error.kind
                    out.append(events.error(error))  # no message_stop: the message is not whole
                    ended = True
                if ended:
                    break
            try:
                if response is None:
                    response = await self._open(request, events, note)
                if response is None or not await server.sent(request, response.write(b"".join(out)), note):
                    return response or web.Response(status=408)  # never sent: the connection is dropped
                live.outbox.written(items)
                if ended:
                    await response.write_eof()
                    return response
            except ConnectionResetError:  # the client left between two writes: its turn ends (the caller's finally)
                note.ended = "client left"
                if response is None:
                    raise
                return response

    async def _open(self, request: web.Request, events: MessageEvents, note: RequestNote) -> web.StreamResponse | None:
        """The stream, begun (its headers and message_start sent); None if the client never took them."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )
        self.server.cors(request, response)

        async def begin() -> None:
            await response.prepare(request)
            await response.write(events.start() + events.PING)

        return response if await self.server.sent(request, begin(), note) else None
