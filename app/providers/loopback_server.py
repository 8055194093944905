"""A small OpenAI-compatible chat-completions server on loopback, scripted by a Python function.

The offline `demo` provider runs on it, and the test suite uses it as the far end of the wire: real
HTTP, real SSE (chunked, token by token, with a final usage chunk), tool-call deltas, HTTP errors,
delays and dropped connections — all reached through the real `openai` SDK.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import re
import select
import selectors
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .loopback_windows import ServedWindows


@dataclass
class ScriptedToolCall:
    name: str
    arguments: str
    id: str | None = None


@dataclass
class Reply:
    """How the server answers one request."""

    text: str = ""
    pieces: list[str] | None = None  # how to split `text` into streamed deltas (default: word by word)
    tool_calls: list[ScriptedToolCall] = field(default_factory=list)
    delay: float = 0.0  # before the response starts (time to first byte)
    piece_delay: float = 0.0  # between streamed deltas
    status: int = 200
    error: str = "scripted error"  # the message of an HTTP error (status >= 400)
    usage: dict[str, int] | None = None  # default: estimated from the request and the reply
    usage_chunk: bool = True  # False: no usage chunk even when the request asks for one (llama.cpp's server)
    argument_pieces: int = 4  # how many deltas each tool call's arguments are split into
    repeat_call_identity: bool = False  # llama.cpp style: id and name in every tool-call delta
    drop_after: int | None = None  # drop the connection after this many text deltas
    pause_after: int | None = None  # after this many text deltas, go quiet for `pause` seconds
    pause: float = 0.0
    keepalive: float = 0.0  # during the pause, an SSE comment (": keep-alive") this often, as OpenRouter sends
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers (Retry-After on a 429)
    finish_reason: str | None = None
    end_after: int | None = None  # end the stream cleanly after this many text deltas: no finish reason, no [DONE]
    garble_after: int | None = None  # after this many text deltas, an event whose data is not JSON, and the end
    cut_tool_calls: bool = False  # end the stream cleanly inside the first tool call's arguments
    raw_body: str | None = None  # answer 200 with this body (text/html) instead of a chat completion
    bare_chunks: bool = False  # chunks with no id, object or created, as some compatible servers stream them
    # After the text, an event whose data is {"error": {...}} with this message, and the end: how OpenRouter
    # reports a provider that failed mid-stream.
    stream_error: str | None = None
    # A reasoning model's thinking, streamed before the text as `reasoning_field` deltas (DeepSeek's
    # `reasoning_content`, OpenRouter's and Ollama's `reasoning`), split as `reasoning_pieces` (default: by word).
    reasoning: str = ""
    reasoning_pieces: list[str] | None = None
    reasoning_field: str = "reasoning_content"
    resume: threading.Event | None = None  # ends the `pause` early once set (a test's cue to go on)


@dataclass
class RecordedRequest:
    path: str
    body: dict[str, Any]
    received_at: float
    finished_at: float | None = None
    disconnected: bool = False
    authorization: bool = False  # whether a bearer token came (never the token itself)
    usage_sent: dict[str, int] | None = None  # the usage the server reported for this request, if it did
    # Set when the server starts a scripted wait (`delay` before the reply, `pause` mid-stream): a test that
    # acts while the client waits on the server waits for this, not for a guessed time.
    stalled: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    # Set when the server is done with the request (`finished_at`, `disconnected` are final then).
    finished: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    prompt_tokens: int | None = None  # the prompt's size in the server's tokenizer, when it enforces windows
    refused: bool = False  # over its model's window: answered with the family's overflow error

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))


logger = logging.getLogger(__name__)

Responder = Callable[[dict[str, Any]], Reply]

_WORDS = re.compile(r"\s*\S+|\s+")


def split_words(text: str) -> list[str]:
    return _WORDS.findall(text)


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


class OpenAICompatibleServer:
    def __init__(
        self,
        responder: Responder,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        models: list[str] | None = None,
        record: bool = True,
        windows: ServedWindows | None = None,
    ) -> None:
        self.responder = responder
        self.models = models or []
        self.windows = windows  # each model's window, enforced and told (None: no model has one)
        # Every request, for a test to look at; a server that runs for a user (the demo) records none, as each
        # request carries the whole conversation.
        self.record = record
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)  # notified as each request is recorded
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        handler = type("Handler", (_Handler,), {"owner": self})
        self._httpd = _QuietServer((host, port), handler)
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}/v1"

    def start(self) -> OpenAICompatibleServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_until_stopped, args=(self._stopping,), name="openai-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving at once (requests in progress end at their next wait) and release the port."""
        self._stopping.set()
        self._httpd.wake()
        if self._thread is not None:
            self._thread.join()
        self._httpd.server_close()

    def __enter__(self) -> OpenAICompatibleServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def requests_for(self, model: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.model == model]

    def wait_for_request(self, model: str, timeout: float = 5.0) -> RecordedRequest | None:
        """The first request for `model`, once it has arrived (None if none does within `timeout`)."""
        with self._arrived:
            self._arrived.wait_for(lambda: any(r.model == model for r in self.requests), timeout)
            return next((r for r in self.requests if r.model == model), None)

    def _record(self, request: RecordedRequest) -> None:
        if not self.record:
            return
        with self._arrived:
            self.requests.append(request)
            self._arrived.notify_all()

    def next_id(self) -> int:
        return next(self._ids)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    timeout = 0  # handle_request takes a connection that is waiting, and never waits for one itself

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._waker, self._wake = socket.socketpair()

    def serve_until_stopped(self, stopping: threading.Event) -> None:
        """Serve until `stopping` is set and `wake()` called: the stop is seen at once. socketserver's
        serve_forever looks for a shutdown only between polls, and every stop would wait out a poll interval
        (the demo's at each exit of `ask`, each test's server)."""
        with selectors.DefaultSelector() as selector:
            selector.register(self, selectors.EVENT_READ)
            selector.register(self._waker, selectors.EVENT_READ)
            while not stopping.is_set():
                if any(key.fileobj is self for key, _ in selector.select()) and not stopping.is_set():
                    self.handle_request()

    def wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake.send(b"\0")

    def server_close(self) -> None:
        super().server_close()
        self._waker.close()
        self._wake.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up (a cancelled stream, a closed keep-alive connection) are normal here, and the
        # demo server runs under a full-screen app where a traceback on stderr would tear the screen.
        exc = sys.exc_info()[1]
        if not isinstance(exc, OSError):
            logger.exception("demo/test server: error while handling a request from %s", client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAICompatibleServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the demo runs inside a full-screen app

    def do_GET(self) -> None:
        windows = self.owner.windows
        if self.path.rstrip("/").endswith("/models"):
            data = (
                windows.models(self.owner.models)
                if windows is not None
                else [{"id": m, "object": "model", "owned_by": "moa-chat"} for m in self.owner.models]
            )
            self._send_json(200, {"object": "list", "data": data})
        elif windows is not None and (answer := windows.get(self.path)) is not None:
            self._send_json(200, answer)
        else:
            self._send_json(404, {"error": {"message": f"no route for GET {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._send_json(400, {"error": {"message": f"invalid JSON body: {exc}", "type": "invalid_request"}})
            return
        windows = self.owner.windows
        if not self.path.rstrip("/").endswith("/chat/completions"):
            answer = windows.post(self.path, body) if windows is not None else None
            if answer is None:
                answer = 404, {"error": {"message": f"no route for POST {self.path}", "type": "not_found"}}
            self._send_json(*answer)
            return
        record = RecordedRequest(
            path=self.path,
            body=body,
            received_at=time.monotonic(),
            authorization=self.headers.get("Authorization", "").startswith("Bearer "),
            prompt_tokens=windows.prompt_tokens(body) if windows is not None else None,
        )
        refusal = windows.refusal(body) if windows is not None else None
        record.refused = refusal is not None
        self.owner._record(record)
        if refusal is not None:
            self._refuse(refusal.status, refusal.body, record)
            return
        try:
            reply = self.owner.responder(body)
        except Exception as exc:  # a broken script should show up as a server error, not a hang
            reply = Reply(status=500, error=f"responder failed: {type(exc).__name__}: {exc}")
        try:
            if reply.delay:
                record.stalled.set()
                if self._wait(reply.delay, record):
                    return
            if reply.status >= 400:
                self._send_json(
                    reply.status,
                    {"error": {"message": reply.error, "type": "scripted_error", "code": reply.status}},
                    headers=reply.headers,
                )
            elif reply.raw_body is not None:
                data = reply.raw_body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif body.get("stream"):
                self._stream(body, reply, record)
            else:
                completion = self._completion(body, reply)
                record.usage_sent = completion["usage"]
                self._send_json(200, completion)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            record.disconnected = True
        finally:
            record.finished_at = time.monotonic()
            record.finished.set()

    def _refuse(self, status: int, body: dict[str, Any] | None, record: RecordedRequest) -> None:
        """Answer a request over its model's window: the family's error, or (body None: llama-cpp-python's server
        streaming) an empty event stream and the connection closed under the client."""
        try:
            if body is not None:
                self._send_json(status, body)
            else:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self._write_chunk(b"")
                self._reset()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            record.disconnected = True
        finally:
            record.finished_at = time.monotonic()
            record.finished.set()

    def _wait(self, seconds: float, record: RecordedRequest, resume: threading.Event | None = None) -> bool:
        """Sleep, but end early (True) if the server stops or the client hangs up meanwhile (False, at once,
        when `resume` is set)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if resume is not None and resume.wait(min(left, 0.05)):
                return False
            if self.owner._stopping.wait(0 if resume is not None else min(left, 0.05)):
                return True
            if self._client_gone():
                record.disconnected = True
                return True
        return False

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    # ------------------------------------------------------------------ responses

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _usage(self, body: dict[str, Any], reply: Reply) -> dict[str, int]:
        if reply.usage is not None:
            return reply.usage
        windows = self.owner.windows
        prompt = windows.prompt_tokens(body) if windows else estimate_tokens(json.dumps(body.get("messages", [])))
        calls = sum(estimate_tokens(c.arguments) + 2 for c in reply.tool_calls)
        completion = estimate_tokens(reply.text + reply.reasoning) + calls
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _finish_reason(self, reply: Reply) -> str:
        return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")

    def _call_ids(self, reply: Reply) -> list[str]:
        return [c.id or f"call_{self.owner.next_id():04d}" for c in reply.tool_calls]

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.reasoning:
            message[reply.reasoning_field] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c, call_id in zip(reply.tool_calls, self._call_ids(reply), strict=True)
            ]
        return {
            "id": f"chatcmpl-{self.owner.next_id()}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish_reason(reply)}],
            "usage": self._usage(body, reply),
        }

    def _stream(self, body: dict[str, Any], reply: Reply, record: RecordedRequest) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        completion_id = f"chatcmpl-{self.owner.next_id()}"
        model = body.get("model", "")

        def chunk(delta: dict[str, Any] | None, finish: str | None = None, usage: Any = None) -> dict[str, Any]:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
            out: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": choices,
            }
            if usage is not None:
                out["usage"] = usage
            if reply.bare_chunks:
                for key in ("id", "object", "created"):
                    del out[key]
            return out

        self._event(chunk({"role": "assistant", "content": ""}))
        thinking = reply.reasoning_pieces if reply.reasoning_pieces is not None else split_words(reply.reasoning)
        for piece in thinking:
            if reply.piece_delay and self._wait(reply.piece_delay, record):
                return
            self._event(chunk({reply.reasoning_field: piece}))
        pieces = reply.pieces if reply.pieces is not None else split_words(reply.text)
        paused = 0.0
        started = time.monotonic()
        for n, piece in enumerate(pieces):
            if reply.end_after is not None and n >= reply.end_after:
                self._write_chunk(b"")
                return
            if reply.drop_after is not None and n >= reply.drop_after:
                self._drop()
                record.disconnected = True
                return
            if reply.garble_after is not None and n >= reply.garble_after:
                self._write_chunk(b'data: {"choices": [{"delta": {"content": "half\n\n')
                self._write_chunk(b"")
                return
            # Keep to the schedule (start + n × piece_delay) rather than sleeping per piece: at thousands of
            # tokens per second a sleep per piece would set the pace by timer granularity instead.
            behind = started + paused + n * reply.piece_delay - time.monotonic()
            if n and reply.piece_delay and behind > 0 and self._wait(behind, record):
                return
            if reply.pause_after is not None and n == reply.pause_after:
                record.stalled.set()
                if self._pause(reply, record):
                    return
                paused += reply.pause
            self._event(chunk({"content": piece}))
        if reply.stream_error is not None:
            self._event({"error": {"message": reply.stream_error, "code": 502}})
            self._write_chunk(b"")
            return
        for index, (call, call_id) in enumerate(zip(reply.tool_calls, self._call_ids(reply), strict=True)):
            identity = {"id": call_id, "type": "function"}
            parts = _split_evenly(call.arguments, reply.argument_pieces)
            self._event(
                chunk({"tool_calls": [{"index": index, **identity, "function": {"name": call.name, "arguments": ""}}]})
            )
            for number, part in enumerate(parts):
                if reply.cut_tool_calls and number:
                    self._write_chunk(b"")
                    return
                if reply.piece_delay and self._wait(reply.piece_delay, record):
                    return
                delta: dict[str, Any] = {"index": index, "function": {"arguments": part}}
                if reply.repeat_call_identity:
                    delta.update(identity)
                    delta["function"]["name"] = call.name
                self._event(chunk({"tool_calls": [delta]}))
        self._event(chunk({}, finish=self._finish_reason(reply)))
        if reply.usage_chunk and (body.get("stream_options") or {}).get("include_usage"):
            record.usage_sent = self._usage(body, reply)
            self._event(chunk(None, usage=record.usage_sent))
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")

    def _pause(self, reply: Reply, record: RecordedRequest) -> bool:
        """Go quiet for `reply.pause` seconds (but for keep-alive comments); True if the client left."""
        if not reply.keepalive:
            return self._wait(reply.pause, record, reply.resume)
        deadline = time.monotonic() + reply.pause
        while (left := deadline - time.monotonic()) > 0:
            if self._wait(min(left, reply.keepalive), record):
                return True
            self._write_chunk(b": keep-alive\n\n")
        return False

    def _event(self, payload: dict[str, Any]) -> None:
        self._write_chunk(b"data: " + json.dumps(payload).encode() + b"\n\n")

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _drop(self) -> None:
        """End the connection mid-body, as a crashed proxy would."""
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True

    def _reset(self) -> None:
        """Close the connection with a reset (RST): a request sent on it later is refused, not answered."""
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True


def _split_evenly(text: str, parts: int) -> list[str]:
    if not text:
        return [""]
    parts = max(1, min(parts, len(text)))
    size = -(-len(text) // parts)
    return [text[i : i + size] for i in range(0, len(text), size)]
