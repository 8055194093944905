"""Where `moa-chat api` listens, and what a connection may do before its request is read.

aiohttp waits for a request's headers for as long as a client takes to send them (200 connections sending a
byte a second stay open for ever), and answers headers over its size limits with a text 400 and a traceback
in the log that echoes the header's first bytes. Here each connection is aiohttp's RequestHandler with two
changes: its idle timer runs from the moment the connection opens until whole headers have arrived (and
again between requests on a kept-alive connection), so a client that has not sent them within
`header_timeout` seconds is disconnected; and a request aiohttp cannot parse is answered in OpenAI's error
shape, 431 when its head is too large, and logged as one line with no traceback. Such a client is usually
still sending (the rest of a megabyte of headers): closing at once would reset the connection and throw
away the answer before the client reads it, so the connection is closed only once the client has sent all
it will (or `LINGER` seconds have passed), what it sends meanwhile read and dropped, as nginx does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong

from .wire import ApiError

HEADER_TIMEOUT = 30.0  # seconds from connecting (or from the last answer) to a request's whole headers
MAX_LINE = 8190  # bytes in the request line, or in one header (aiohttp's limits, stated in the 431)
MAX_HEADERS = 128
LINGER = 5.0  # seconds a refused client may go on sending before its connection closes

# Run once a refused request's answer is written, given the connection's transport.
Linger = Callable[[asyncio.BaseTransport | None], Awaitable[None]]
# The ApiServer's answer to a request that could not be parsed: it logs the request and shapes the error.
Refuse = Callable[[web.BaseRequest, ApiError, Linger], web.StreamResponse]


class LingeringResponse(web.Response):
    """An answer after which the connection lingers (`Linger`) before aiohttp closes it."""

    def __init__(self, linger: Linger, transport: asyncio.BaseTransport | None, **options: Any) -> None:
        super().__init__(**options)
        self._linger, self._transport = linger, transport
        self.force_close()

    async def write_eof(self, data: bytes = b"") -> None:
        await super().write_eof(data)
        await self._linger(self._transport)


class _Connection(web.RequestHandler):
    """One client connection: aiohttp's handler, with its parse errors answered as API errors."""

    def __init__(self, manager: web.Server, *, refuse: Refuse, **options: Any) -> None:
        super().__init__(manager, **options)
        self._refuse = refuse
        self._client_done = asyncio.Event()  # the client sent all it will, or left

    def eof_received(self) -> None:
        self._client_done.set()
        super().eof_received()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._client_done.set()
        super().connection_lost(exc)

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status >= 500 or not isinstance(exc, BadHttpMessage):  # a fault of this server: aiohttp's report
            return super().handle_error(request, status, exc, message)
        if isinstance(exc, LineTooLong) or "too many headers" in str(exc).lower():
            error = ApiError(
                431,
                f"the request's headers are too large: at most {MAX_LINE:,} bytes in the request line or in one "
                f"header, and {MAX_HEADERS} headers",
                code="request_header_fields_too_large",
            )
        else:  # what it was is not repeated: the client's own bytes stay out of the answer and the log
            error = ApiError(400, "the request is not valid HTTP", code="bad_request")
        self.close()  # no further request on this connection: what else arrives is dropped
        return self._refuse(request, error, self._linger)

    async def _linger(self, transport: asyncio.BaseTransport | None) -> None:
        """After the answer: say it is whole (FIN), then wait for the client to stop sending, or LINGER."""
        if isinstance(transport, asyncio.WriteTransport) and transport.can_write_eof():
            transport.write_eof()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._client_done.wait(), LINGER)


class Listener:
    """The listening socket of `runner`'s application, its connections built as `_Connection`s."""

    def __init__(self, runner: web.AppRunner, refuse: Refuse, *, header_timeout: float = HEADER_TIMEOUT) -> None:
        self.runner, self.refuse, self.header_timeout = runner, refuse, header_timeout
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen (after `runner.setup()`); returns the port bound (port 0 takes a free one)."""
        manager = self.runner.server
        assert manager is not None, "the runner is set up first"
        loop = asyncio.get_running_loop()

        def connection() -> _Connection:
            return _Connection(
                manager,
                refuse=self.refuse,
                loop=loop,
                keepalive_timeout=self.header_timeout,
                access_log=None,
                max_line_size=MAX_LINE,
                max_field_size=MAX_LINE,
                max_headers=MAX_HEADERS,
            )

        self._server = await loop.create_server(connection, host, port, reuse_address=True, backlog=128)
        return int(self._server.sockets[0].getsockname()[1])

    def stop(self) -> None:
        """Stop listening; the connections still open end with the runner's cleanup."""
        if self._server is not None:
            self._server.close()
