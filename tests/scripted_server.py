"""A loopback OpenAI-compatible server scripted per model name, for real-wire tests."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from moa_chat.providers.loopback_server import OpenAICompatibleServer, RecordedRequest, Reply
from moa_chat.providers.loopback_windows import ModelWindow, ServedWindows

Script = Reply | Callable[[dict[str, Any]], Reply] | list[Reply]


class ScriptedServer:
    """`script(model, reply)` sets how a model answers: one Reply, a list (one per call, the last
    repeating), or a function of the request body. Unscripted models answer "ok from MODEL".

    `windows` gives models a context window the server enforces and tells (loopback_windows.py)."""

    def __init__(self, windows: dict[str, ModelWindow] | None = None) -> None:
        self._scripts: dict[str, Script] = {}
        self._calls: dict[str, int] = {}
        self._lock = threading.Lock()
        served = ServedWindows(windows) if windows is not None else None
        self.server = OpenAICompatibleServer(self._respond, windows=served).start()

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def requests(self) -> list[RecordedRequest]:
        return list(self.server.requests)

    def requests_for(self, model: str) -> list[RecordedRequest]:
        return self.server.requests_for(model)

    def wait_for_request(self, model: str, timeout: float = 5.0) -> RecordedRequest:
        """The first request for `model`, once it has arrived; fails the test if none does within `timeout`.
        Its `stalled` and `finished` events say when the server is in a scripted wait and when it is done."""
        request = self.server.wait_for_request(model, timeout)
        assert request is not None, f"no request for {model!r} within {timeout} s"
        return request

    def script(self, model: str, reply: Script) -> None:
        self._scripts[model] = reply

    def _respond(self, body: dict[str, Any]) -> Reply:
        model = str(body.get("model"))
        with self._lock:
            n = self._calls.get(model, 0)
            self._calls[model] = n + 1
        script = self._scripts.get(model)
        if script is None:
            return Reply(text=f"ok from {model}")
        if isinstance(script, list):
            return script[min(n, len(script) - 1)]
        if callable(script):
            return script(body)
        return script

    def stop(self) -> None:
        self.server.stop()
