"""The HTTP side of `moa-chat api`: aiohttp handlers for /v1/models and /v1/chat/completions.

Every request passes one guard first: a browser page from another origin is refused, the bearer token is
checked, and whatever the request ends as (an answer, an error, a client that left) is logged as one line.
A completion runs as a turn on the engine's kept threads (`turn.run_turn`) and comes back through an
asyncio queue. A streamed reply's headers wait for its first text, so a turn that fails before any text is
an HTTP error with the right status, never a 200 stream that ends in an error; after text, a failure ends
the stream with an error event and no `finish_reason`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from aiohttp import web

from ..config import Config, Preset
from ..config.pricing import cost_label
from ..engine import CancelToken, threads
from ..engine.clock import monotonic
from ..llm import CallLLM, call_llm_request
from ..llm.errors import redact
from ..session.context import ContextKeeper
from ..text import bounded_json
from ..text.bounded_json import JsonLimitError
from ..text.inert import inert, inert_json
from .auth import ServedHosts, authorized, origin_refusal
from .catalog import Catalog
from .guidance_cache import GuidanceCache
from .listener import Linger, LingeringResponse
from .messages_endpoint import MessagesEndpoint, speaks_messages
from .messages_wire import error_body
from .outbox import ROOM, Outbox
from .saving import ConversationSaver, saving
from .turn import Failure, Outcome, finish_reason, provider_secrets, run_turn
from .wire import ApiError, ChunkWriter, CompletionRequest, completion, parse_request, tool_call_parts

MAX_BODY = 4 * 1024 * 1024  # bytes; a long coding conversation fits, a runaway client does not
MAX_TURNS = 16  # turns in flight at once, server-wide
RETRY_AFTER = 1  # seconds a client over the cap is asked to wait
STOP_GRACE = 5.0  # seconds the turns in flight get to end their streams when the server stops
NOTE = web.RequestKey("moa_note", object)
SEND_TIMEOUT = 30.0  # seconds a streamed reply waits for its client to read before the turn is cancelled
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Settings:
    token: str
    cors: str | None = None
    max_body: int = MAX_BODY
    max_turns: int = MAX_TURNS
    progress: bool = False  # the panel's progress as reasoning_content, unless a request says otherwise
    saver: ConversationSaver | None = None  # --save: each conversation kept as a stored session
    read_tools: bool = False  # --read-tools: moa-chat's own tools that only read run on the server
    hosts: ServedHosts | None = None  # the names a request's Host may give (None: any, for a test's server)
    send_timeout: float = SEND_TIMEOUT


@dataclass
class RequestNote:
    """What the request log says of one request, filled in as it goes."""

    preset: str = "-"
    tokens: int | None = None
    tokens_partial: bool = False  # some calls reported none: the count leaves them out
    cost: str = ""
    ended: str = ""  # how a turn ended when not with a reply: "client left", the error's code


@dataclass(eq=False)
class LiveTurn:
    """A turn in flight: the outbox its thread reports to, and the token that cancels it."""

    outbox: Outbox
    cancel: CancelToken
    ended: bool = False  # its thread reported the end: nothing left upstream to close


class ApiServer:
    def __init__(
        self,
        config: Config,
        catalog: Catalog,
        settings: Settings,
        *,
        out: TextIO | None = None,
        call: CallLLM = call_llm_request,
    ) -> None:
        self.config, self.catalog, self.settings, self.call = config, catalog, settings, call
        self.out = out or sys.stdout
        self.cache = GuidanceCache()
        self.context = ContextKeeper(None)  # the models' windows; what is learned of them, for this process
        self.secrets = provider_secrets(config)
        self.turns: set[LiveTurn] = set()
        self.stopping = False
        self._idle = asyncio.Event()
        self._idle.set()

    def application(self) -> web.Application:
        app = web.Application(client_max_size=self.settings.max_body, middlewares=[self._guard])
        for prefix in ("/v1", ""):  # some clients take the base URL without /v1
            app.router.add_get(f"{prefix}/models", self.models)
            app.router.add_post(f"{prefix}/chat/completions", self.completions)
        MessagesEndpoint(self).routes(app)  # Anthropic's Messages API, on the same turns
        return app

    # ------------------------------------------------------------------ every request

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        started = monotonic()
        note = RequestNote()
        request[NOTE] = note
        status: int | str = "-"
        try:
            response = await self._guarded(request, handler)
            status = response.status
            return response
        except asyncio.CancelledError:
            status, note.ended = "-", note.ended or "client left"
            raise
        finally:
            self._log(f"{request.method} {request.path}", note, status, monotonic() - started)

    async def _guarded(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        misdirected = self.settings.hosts.refusal(request.headers.get("Host")) if self.settings.hosts else None
        if misdirected is not None:
            return self.error(request, ApiError(403, misdirected, code="host_refused"))
        refusal = origin_refusal(request.headers.get("Origin"), self.settings.cors)
        if refusal is not None:
            return self.error(request, ApiError(403, refusal, code="origin_refused"))
        if request.method == "OPTIONS":  # a preflight from the allowed origin
            response = web.Response(status=204)
            response.headers["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = (
                "Authorization, Content-Type, x-api-key, anthropic-version, anthropic-beta"
            )
            response.headers["Access-Control-Max-Age"] = "600"
            self.cors(request, response)
            return response
        headers = request.headers
        if not authorized(headers.get("Authorization"), self.settings.token, api_key=headers.get("x-api-key")):
            missing = "Authorization" not in headers and "x-api-key" not in headers
            message = (
                "no API key: send the header Authorization: Bearer <token> (or x-api-key: <token>)"
                if missing
                else "invalid API key"
            )
            return self.error(request, ApiError(401, message, code="invalid_api_key"))
        try:
            return await handler(request)
        except web.HTTPException as exc:  # an unknown path or method
            message = f"{request.method} {request.path}: {exc.reason}"
            return self.error(request, ApiError(exc.status, message, code=exc.reason.lower().replace(" ", "_")))

    def error(self, request: web.Request, error: ApiError) -> web.Response:
        note = request.get(NOTE)
        if isinstance(note, RequestNote):
            note.ended = note.ended or (error.code or error.kind)
        body = error_body(error) if speaks_messages(request.path) else error.body()  # each wire's own shape
        response = web.json_response(body, status=error.status, headers=error.headers)
        self.cors(request, response)
        return response

    @staticmethod
    def note_of(request: web.Request) -> RequestNote:
        """What the request log will say of this request (the guard made it)."""
        note = request[NOTE]
        assert isinstance(note, RequestNote)
        return note

    def cors(self, request: web.Request, response: web.StreamResponse) -> None:
        origin = request.headers.get("Origin")
        if origin is not None and self.settings.cors is not None:  # the guard let it through: it is the one
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Vary"] = "Origin"

    def refuse(self, request: web.BaseRequest, error: ApiError, linger: Linger) -> web.StreamResponse:
        """The answer to a request that could not be read as HTTP (the listener's), logged as one line."""
        self._log("- -", RequestNote(ended=error.code or error.kind), error.status, 0.0)
        return LingeringResponse(
            linger,
            request.transport,
            text=json.dumps(error.body()),
            status=error.status,
            content_type="application/json",
        )

    def _log(self, what: str, note: RequestNote, status: int | str, seconds: float) -> None:
        tokens = (
            f"{note.tokens:,}{'+' if note.tokens_partial else ''} tokens" if note.tokens is not None else "- tokens"
        )
        parts = [time.strftime("%H:%M:%S"), what, note.preset, str(status), f"{seconds:.2f}s"]
        parts += [tokens, note.cost or "-"]
        if note.ended:
            parts.append(f"({note.ended})")
        # A client's model name may hold escapes or line breaks: one line, made inert.
        line = inert(redact(" ".join(parts), self.secrets).replace("\n", "\\n"))
        with contextlib.suppress(OSError, ValueError):  # nobody reads the log any more; the server goes on
            print(line, file=self.out, flush=True)

    # ------------------------------------------------------------------ the endpoints

    async def models(self, request: web.Request) -> web.StreamResponse:
        response = web.json_response(self.catalog.models(int(time.time())))
        self.cors(request, response)
        return response

    async def completions(self, request: web.Request) -> web.StreamResponse:
        note = self.note_of(request)
        try:
            parsed = parse_request(await self.read_body(request), self.catalog.default)
            preset = self.admit(note, parsed)
        except ApiError as exc:
            return self.error(request, exc)
        return await self.answer(request, parsed, preset, ChatFrames(parsed), completion)

    async def answer(
        self,
        request: web.Request,
        parsed: CompletionRequest,
        preset: Preset,
        frames: StreamFrames,
        shape: Callable[..., dict[str, object]],
    ) -> web.StreamResponse:
        """An admitted request's turn, run and answered in its wire's shape: streamed as `frames`, or whole as
        `shape`; what still streams upstream is closed once the request is over."""
        note = self.note_of(request)
        progress = parsed.progress if parsed.progress is not None else self.settings.progress
        live = self.launch(parsed, preset, progress)
        try:
            if parsed.stream:
                return await self.stream(request, live, note, progress, frames)
            return await self.whole(request, parsed, live, note, shape)
        finally:
            self.release(live)

    def admit(self, note: RequestNote, parsed: CompletionRequest) -> Preset:
        """The preset a request's turn runs on, once the server can take the turn; ApiError otherwise."""
        note.preset = parsed.model
        preset = self.catalog.preset(parsed.model)
        if self.stopping:
            raise ApiError(503, "the server is stopping", kind="server_error", code="server_shutdown")
        if len(self.turns) >= self.settings.max_turns:
            raise ApiError(
                429,
                f"{len(self.turns)} turns are in flight, the most this server runs at once; try again shortly",
                kind="rate_limit_error",
                code="rate_limit_exceeded",
                headers={"Retry-After": str(RETRY_AFTER)},
            )
        return preset

    def launch(self, parsed: CompletionRequest, preset: Preset, progress: bool) -> LiveTurn:
        """The request's turn, started on a kept thread; what it reports arrives in the returned turn's outbox.
        A streamed reply waits for its client to read it; a whole one is held until it ends anyway."""
        cancel = CancelToken()
        live = LiveTurn(Outbox(asyncio.get_running_loop(), cancel, room=ROOM if parsed.stream else None), cancel)
        self._begin(live)
        saver = self.settings.saver
        run_turn(
            self.config, preset, parsed, sink=live.outbox.put, cancel=live.cancel, cache=self.cache, progress=progress,
            call=self.call, on_end=saving(saver, self.config, preset, parsed.messages) if saver is not None else None,
            read_tools=self.settings.read_tools, traces=saver is not None and self.config.traces_for(preset),
            budget=self.context.budget(self.config, preset),
        )  # fmt: skip
        return live

    def release(self, live: LiveTurn) -> None:
        """The turn's request is over (answered, or the client left): what still streams upstream is closed,
        off the loop, since closing a stream can block."""
        if not live.ended:
            threads.KEPT.start(live.cancel.cancel, "moa-api-cancel")
        self._end(live)

    async def read_body(self, request: web.Request) -> object:
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise ApiError(
                413, f"the request body is over {self.settings.max_body:,} bytes", code="request_too_large"
            ) from None
        try:
            # Off the loop: a body near the cap takes a few hundred milliseconds to read and check.
            return await asyncio.to_thread(bounded_json.loads, raw)
        except JsonLimitError as exc:
            raise ApiError(400, str(exc), param=exc.field or None, code="invalid_value") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ApiError(400, f"the request body is not JSON: {exc}", code="invalid_json") from None
        except ValueError as exc:  # an integer too long for Python to read
            raise ApiError(400, f"the request body cannot be read: {exc}", code="invalid_json") from None

    async def whole(
        self,
        request: web.Request,
        parsed: CompletionRequest,
        live: LiveTurn,
        note: RequestNote,
        shape: Callable[..., dict[str, object]] = completion,
    ) -> web.StreamResponse:
        """The whole answer once the turn ends, in `shape` (a chat.completion, or another wire's)."""
        while True:
            kind, value = await live.outbox.queue.get()
            live.ended = kind in ("done", "failed")
            if kind == "done":
                assert isinstance(value, Outcome)
                self.account(note, value)
                body = shape(
                    parsed.model,
                    value.text,
                    value.tool_calls,
                    finish_reason(value),
                    value.usage(),
                    value.extension(parsed.model),
                )
                response = web.json_response(body, dumps=_dumps)
                self.cors(request, response)
                return response
            if kind == "failed":
                assert isinstance(value, Failure)
                self.account(note, value)
                return self.error(request, self.final_error(value.error))

    async def stream(
        self, request: web.Request, live: LiveTurn, note: RequestNote, progress: bool, frames: StreamFrames
    ) -> web.StreamResponse:
        """The answer as `frames`' event stream, each piece written as its client takes it. Its headers wait for
        the first text, so a turn that fails before any is an HTTP error; with `progress` they go at once."""
        response: web.StreamResponse | None = None
        if progress:  # progress comes before any text: the stream opens now, and any failure is an event
            response = await self._open(request, frames, note)
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
                    out.append(frames.text(str(value)))
                elif kind in ("progress", "reasoning"):
                    out.append(frames.thinking(str(value)))
                elif kind == "done":
                    assert isinstance(value, Outcome)
                    self.account(note, value)
                    out += frames.ending(value)
                    ended = True
                elif kind == "failed":
                    assert isinstance(value, Failure)
                    self.account(note, value)
                    error = self.final_error(value.error)
                    if response is None and not out:
                        return self.error(request, error)
                    note.ended = error.code or error.kind
                    out.append(frames.failure(error))  # no ending: the reply is not whole
                    ended = True
                if ended:
                    break
            try:
                if response is None:
                    response = await self._open(request, frames, note)
                if response is None or not await self.sent(request, response.write(b"".join(out)), note):
                    return response or web.Response(status=408)  # never sent: the connection is dropped
                live.outbox.written(items)
                if ended:
                    await response.write_eof()
                    return response
            except ConnectionResetError:  # the client left between two writes: its turn ends (finally, above)
                note.ended = "client left"
                if response is None:
                    raise
                return response

    async def sent(self, request: web.Request, sending: Awaitable[None], note: RequestNote) -> bool:
        """Whether the client took what `sending` writes within the send timeout. If not, the connection is
        dropped with what it held, and the turn ends (completions' finally)."""
        try:
            await asyncio.wait_for(sending, self.settings.send_timeout)
            return True
        except TimeoutError:
            note.ended = f"client not reading for {self.settings.send_timeout:g}s"
            if request.transport is not None:
                request.transport.abort()  # close() would wait for the unread bytes to leave, for ever
            return False

    async def _open(self, request: web.Request, frames: StreamFrames, note: RequestNote) -> web.StreamResponse | None:
        """The stream, begun (its headers and its opening event sent); None if the client never took them."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )
        self.cors(request, response)

        async def begin() -> None:
            await response.prepare(request)
            await response.write(frames.opening())

        return response if await self.sent(request, begin(), note) else None

    def final_error(self, error: ApiError) -> ApiError:
        if self.stopping and error.code == "cancelled":
            return ApiError(503, "the server is stopping; the turn was cancelled", kind="server_error",
                            code="server_shutdown")  # fmt: skip
        return error

    def account(self, note: RequestNote, result: Outcome | Failure) -> None:
        ledger = result.ledger
        if any(record.usage is not None for record in ledger.records):
            note.tokens = ledger.usage().total_tokens
            note.tokens_partial = any(record.usage is None for record in ledger.records)
        cost = ledger.cost()
        if cost is not None:
            note.cost = cost_label(cost, complete=ledger.cost_complete())

    # ------------------------------------------------------------------ turns in flight

    def _begin(self, live: LiveTurn) -> None:
        self.turns.add(live)
        self._idle.clear()

    def _end(self, live: LiveTurn) -> None:
        self.turns.discard(live)
        if not self.turns:
            self._idle.set()

    async def stop(self, grace: float = STOP_GRACE) -> int:
        """Refuse new turns and cancel those in flight, whose streams then end with an error event; waits up
        to `grace` seconds for them to end. Returns how many were in flight."""
        self.stopping = True
        live = list(self.turns)
        for turn in live:
            threads.KEPT.start(turn.cancel.cancel, "moa-api-stop")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), grace)
        return len(live)


class StreamFrames(Protocol):
    """One wire's event stream: what opens it, a piece of text or of thinking, its end, a failure."""

    def opening(self) -> bytes: ...
    def text(self, text: str) -> bytes: ...
    def thinking(self, text: str) -> bytes: ...
    def ending(self, outcome: Outcome) -> list[bytes]: ...
    def failure(self, error: ApiError) -> bytes: ...


class ChatFrames:
    """The chat-completions wire's stream: chunks, progress as `reasoning_content`, then `[DONE]`."""

    def __init__(self, parsed: CompletionRequest) -> None:
        self.parsed, self.writer = parsed, ChunkWriter(parsed.model)

    def opening(self) -> bytes:
        return self.writer.chunk({"role": "assistant", "content": ""})

    def text(self, text: str) -> bytes:
        return self.writer.chunk({"content": text})

    def thinking(self, text: str) -> bytes:
        return self.writer.chunk({"reasoning_content": text})

    def ending(self, outcome: Outcome) -> list[bytes]:
        writer, out = self.writer, []
        if outcome.tool_calls:
            out.append(writer.chunk({"tool_calls": tool_call_parts(outcome.tool_calls)}))
        extension = outcome.extension(self.parsed.model)
        if self.parsed.include_usage:
            out.append(writer.chunk({}, finish_reason(outcome)))
            out.append(writer.usage(outcome.usage(), moa_chat=extension))
        else:
            out.append(writer.chunk({}, finish_reason(outcome), moa_chat=extension))
        out.append(writer.DONE)
        return out

    def failure(self, error: ApiError) -> bytes:
        return self.writer.event(error.body())  # no finish_reason, no [DONE]


def _dumps(value: Any) -> str:
    return inert_json(value, ensure_ascii=False)  # C1 controls (U+009B: a terminal's CSI) escaped as \u009b
