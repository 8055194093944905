"""MCP servers (stdio) as tools: discovered at start, offered beside the built-ins as SERVER__TOOL.

The `mcp` SDK is asyncio-based and its stdio client must be opened and closed within one task, while
tools run on the turn's worker thread. So each server gets one long-lived session owned by a task on a
private event loop thread; calls are submitted to that loop and waited on with a timeout. A server that
fails to start is reported once and skipped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import os
import re
import threading
from collections.abc import Callable
from typing import Any

from ..config import McpServerConfig
from ..engine.cancel import Cancelled, CancelToken
from .registry import Tool, ToolError

START_TIMEOUT = 20.0
CALL_TIMEOUT = 120.0
MAX_RESULT = 50_000


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename}"
    message = getattr(exc, "message", None) or str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def tool_name(server: str, tool: str) -> str:
    """SERVER__TOOL, limited to what OpenAI-style function names allow ([A-Za-z0-9_-], 64 chars)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}__{tool}")
    return name[:64]


def _unique(name: str, taken: set[str]) -> str:
    n = 2
    while (candidate := f"{name[: 64 - len(str(n)) - 1]}_{n}") in taken:
        n += 1
    return candidate


class McpServer:
    """One stdio server and its open session."""

    def __init__(self, config: McpServerConfig, loop: asyncio.AbstractEventLoop) -> None:
        self.config = config
        self._loop = loop
        self._session: Any = None
        self._stop: asyncio.Event | None = None
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._runner: concurrent.futures.Future[None] | None = None
        self.tools: list[Tool] = []

    def start(self) -> None:
        self._runner = asyncio.run_coroutine_threadsafe(self._run(), self._loop)
        try:
            self._ready.result(timeout=START_TIMEOUT)
        except concurrent.futures.TimeoutError:
            self.close()
            raise ToolError(f"did not finish starting within {START_TIMEOUT:g}s") from None
        except BaseException as exc:
            self.close()
            raise ToolError(_describe(exc)) from None
        try:
            listed = self._call("list_tools", timeout=START_TIMEOUT)
            self.tools = []
            taken: set[str] = set()
            for listed_tool in listed.tools:
                tool = self._as_tool(listed_tool)
                if tool.name in taken:  # the sanitising and the 64-character cut can make two names one
                    tool = dataclasses.replace(tool, name=_unique(tool.name, taken))
                taken.add(tool.name)
                self.tools.append(tool)
        except BaseException as exc:  # the SDK's own errors (McpError, ...) as much as ours
            self.close()
            raise ToolError(str(exc) if isinstance(exc, ToolError) else _describe(exc)) from None

    async def _run(self) -> None:
        from mcp import ClientSession, StdioServerParameters, stdio_client

        self._stop = asyncio.Event()
        # The SDK passes servers a minimal environment (PATH, HOME, ...) plus `env:` from the config:
        # provider keys in our environment never reach a server unless the user names them.
        params = StdioServerParameters(
            command=self.config.command,
            args=list(self.config.args),
            env=dict(self.config.env) or None,
            cwd=self.config.cwd,
        )
        # The server's stderr would tear a full-screen app: it goes nowhere.
        with open(os.devnull, "w") as errlog:
            try:
                async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                    await session.initialize()
                    self._session = session
                    self._ready.set_result(None)
                    await self._stop.wait()
            except BaseException as exc:
                if not self._ready.done():
                    self._ready.set_exception(exc)
            finally:
                self._session = None

    def _call(self, method: str, *args: Any, timeout: float, **kwargs: Any) -> Any:
        session = self._session
        if session is None:
            raise ToolError(f"MCP server {self.config.name!r} is not running")
        future = asyncio.run_coroutine_threadsafe(getattr(session, method)(*args, **kwargs), self._loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolError(f"MCP server {self.config.name!r} did not answer within {timeout:g}s") from None

    def _as_tool(self, listed: Any) -> Tool:
        annotations = getattr(listed, "annotations", None)
        read_only = bool(getattr(annotations, "read_only_hint", False))
        schema = getattr(listed, "input_schema", None) or {"type": "object", "properties": {}}
        description = (listed.description or listed.name).strip()
        name: str = listed.name

        def run(arguments: dict[str, Any], cancel: CancelToken) -> str:
            return self.call_tool(name, arguments, cancel)

        return Tool(
            name=tool_name(self.config.name, listed.name),
            description=f"[MCP server {self.config.name}] {description}",
            parameters=schema,
            # Unless the server says a tool only reads, assume it changes something and ask first.
            read_only=read_only,
            run=run,
            source=self.config.name,
        )

    def call_tool(self, name: str, arguments: dict[str, Any], cancel: CancelToken) -> str:
        from mcp.types import TextContent

        session = self._session
        if session is None:
            raise ToolError(f"MCP server {self.config.name!r} is not running")
        future = asyncio.run_coroutine_threadsafe(
            session.call_tool(name, arguments, read_timeout_seconds=CALL_TIMEOUT), self._loop
        )
        while True:
            try:
                result = future.result(timeout=0.1)
                break
            except concurrent.futures.TimeoutError:
                if cancel.cancelled:
                    future.cancel()
                    raise Cancelled() from None
            except Exception as exc:
                raise ToolError(f"MCP server {self.config.name!r}: {_describe(exc)}") from exc
        parts = []
        for block in result.content:
            parts.append(block.text if isinstance(block, TextContent) else f"[{getattr(block, 'type', 'content')}]")
        text = "\n".join(parts)
        if not text and getattr(result, "structured_content", None) is not None:
            text = str(result.structured_content)
        if result.is_error:
            raise ToolError(text or "the MCP tool reported an error")
        return text[:MAX_RESULT] + (f"\n[cut at {MAX_RESULT:,} characters]" if len(text) > MAX_RESULT else "")

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._runner is not None:
            try:
                self._runner.result(10)
            except BaseException:
                self._runner.cancel()


class McpHub:
    """All configured MCP servers; `tools()` are the ones that started."""

    def __init__(self, configs: dict[str, McpServerConfig]) -> None:
        self.configs = configs
        self.servers: list[McpServer] = []
        self.failures: dict[str, str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self, report: Callable[[str], None] | None = None) -> McpHub:
        """Start every server (blocking; call it off the UI thread). Failures are reported once each."""
        if not self.configs:
            return self
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True)
        self._thread.start()
        for name, config in self.configs.items():
            server = McpServer(config, self._loop)
            try:
                server.start()
            except Exception as exc:  # one broken server must not keep the others (or the app) from starting
                with contextlib.suppress(Exception):
                    server.close()
                self.failures[name] = str(exc)
                if report is not None:
                    report(f"MCP server {name!r} failed to start and is skipped: {exc}")
                continue
            self.servers.append(server)
        return self

    def tools(self) -> list[Tool]:
        return [tool for server in self.servers for tool in server.tools]

    def close(self) -> None:
        for server in self.servers:
            with contextlib.suppress(Exception):
                server.close()
        self.servers.clear()
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            if not self._thread.is_alive():
                self._loop.close()
            self._loop = None
