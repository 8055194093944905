"""MCP servers (stdio) as tools: discovered at start, offered beside the built-ins as SERVER__TOOL.

The `mcp` SDK is asyncio-based and its stdio client must be opened and closed within one task, while
tools run on the turn's worker thread. So each server gets one long-lived session owned by a task on a
private event loop thread; calls are submitted to that loop and waited on with a timeout. A server that
fails to start is reported once and skipped.

Quitting must not wait on servers one by one: closing stops them all at once, with one bound for the
lot, and a server still starting is stopped there and then rather than waited for to finish starting.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from ..config import McpServerConfig
from ..engine.cancel import Cancelled, CancelToken
from .registry import Tool, ToolArguments, ToolError

if TYPE_CHECKING:  # the SDK is imported when a server starts, not with the tools
    import anyio
    import mcp.types
    from mcp import ClientSession

Answer = TypeVar("Answer")

START_TIMEOUT = 20.0
CALL_TIMEOUT = 120.0
# The SDK closes a server's stdin, gives it 2 s to exit, then signals its process group (SIGKILL 2 s
# later): a well-behaved server is gone in a fraction of a second, a stuck one within about 4 s.
CLOSE_TIMEOUT = 5.0
_POLL = 0.05  # how often a wait looks up from a future to see whether the server is being stopped
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

    def __init__(
        self, config: McpServerConfig, loop: asyncio.AbstractEventLoop, environment: Mapping[str, str] | None = None
    ) -> None:
        self.config = config
        self.environment = environment
        self._loop = loop
        self._session: ClientSession | None = None
        self._stopping = threading.Event()
        self._scope: anyio.CancelScope | None = None  # the cancel scope around the session, while _run runs
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._runner: concurrent.futures.Future[None] | None = None
        self.tools: list[Tool] = []

    def start(self) -> None:
        self._runner = asyncio.run_coroutine_threadsafe(self._run(), self._loop)
        try:
            self._result(self._ready, START_TIMEOUT)
        except concurrent.futures.TimeoutError:
            self.close()
            raise ToolError(f"did not finish starting within {START_TIMEOUT:g}s") from None
        except BaseException as exc:
            self.close()
            raise ToolError(str(exc) if isinstance(exc, ToolError) else _describe(exc)) from None
        try:
            listed = self._list_tools(timeout=START_TIMEOUT)
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
        import anyio
        from mcp import ClientSession, StdioServerParameters, stdio_client

        # A server gets what a command run by a tool gets (tools/environment.py: the `tool_env` policy; without
        # one, the SDK's minimal PATH, HOME, …) plus its own `env:` from the config.
        env = {**self.environment, **self.config.env} if self.environment is not None else dict(self.config.env)
        params = StdioServerParameters(
            command=self.config.command,
            args=list(self.config.args),
            env=env or None,
            cwd=self.config.cwd,
        )
        # Stopping cancels this scope, whether the session is up or still starting: the SDK's transport
        # then winds the server down (stdin closed, then its process group signalled) under a shield.
        with anyio.CancelScope() as scope, open(os.devnull, "w") as errlog:  # stderr would tear the screen
            self._scope = scope
            if self._stopping.is_set():  # stop() came before this scope existed: spawn nothing
                return
            try:
                async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                    await session.initialize()
                    self._session = session
                    self._ready.set_result(None)
                    await anyio.sleep_forever()
            except BaseException as exc:
                if not self._ready.done() and not self._stopping.is_set():
                    self._ready.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise  # the scope's own cancellation: it ends here, at the scope
            finally:
                self._session = None
                self._scope = None
        if not self._ready.done():
            self._ready.set_exception(ToolError(f"MCP server {self.config.name!r} was stopped while starting"))

    def _result(self, future: concurrent.futures.Future[Answer], timeout: float) -> Answer:
        """`future.result(timeout)`, given up at once (ToolError) when the server is being stopped."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return future.result(timeout=max(0.0, min(_POLL, deadline - time.monotonic())))
            except concurrent.futures.TimeoutError:
                if self._stopping.is_set() and not future.done():
                    raise ToolError(f"MCP server {self.config.name!r} was stopped") from None
                if time.monotonic() >= deadline:
                    raise

    def _list_tools(self, timeout: float) -> mcp.types.ListToolsResult:
        session = self._session
        if session is None:
            raise ToolError(f"MCP server {self.config.name!r} is not running")
        future = asyncio.run_coroutine_threadsafe(session.list_tools(), self._loop)
        try:
            return self._result(future, timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolError(f"MCP server {self.config.name!r} did not answer within {timeout:g}s") from None
        except ToolError:
            future.cancel()
            raise

    def _as_tool(self, listed: mcp.types.Tool) -> Tool:
        annotations = listed.annotations
        read_only = bool(annotations.read_only_hint) if annotations is not None else False
        schema: dict[str, object] = dict(listed.input_schema or {"type": "object", "properties": {}})
        description = (listed.description or listed.name).strip()
        name = listed.name

        def run(arguments: ToolArguments, cancel: CancelToken) -> str:
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

    def call_tool(self, name: str, arguments: ToolArguments, cancel: CancelToken) -> str:
        from mcp.types import CallToolResult, TextContent

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
                if cancel.cancelled or self._stopping.is_set():
                    future.cancel()
                    raise Cancelled() from None
            except Exception as exc:
                raise ToolError(f"MCP server {self.config.name!r}: {_describe(exc)}") from exc
        if not isinstance(result, CallToolResult):  # it asks for input moa-chat has no way to give
            raise ToolError(f"MCP server {self.config.name!r} answered without a tool result")
        parts = []
        for block in result.content:
            parts.append(block.text if isinstance(block, TextContent) else f"[{getattr(block, 'type', 'content')}]")
        text = "\n".join(parts)
        if not text and getattr(result, "structured_content", None) is not None:
            text = str(result.structured_content)
        if result.is_error:
            raise ToolError(text or "the MCP tool reported an error")
        return text[:MAX_RESULT] + (f"\n[cut at {MAX_RESULT:,} characters]" if len(text) > MAX_RESULT else "")

    def stop(self) -> None:
        """Ask the server to stop, without waiting: its session closes, or its start is abandoned."""
        self._stopping.set()
        with contextlib.suppress(RuntimeError):  # the loop is closed already: nothing runs on it any more
            self._loop.call_soon_threadsafe(self._cancel_scope)

    def _cancel_scope(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` for the server to have stopped; whether it has."""
        runner = self._runner
        if runner is None:
            return True
        deadline = time.monotonic() + timeout
        while True:
            try:
                runner.result(timeout=max(0.0, min(_POLL, deadline - time.monotonic())))
            except concurrent.futures.TimeoutError:
                # A stopped loop never finishes the runner: waiting on would only hold up the quit.
                if time.monotonic() >= deadline or not self._loop.is_running():
                    return False
                continue
            except BaseException:
                pass  # ended with an error (or cancelled): ended all the same
            return True

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        self.stop()
        self.wait(timeout)


class McpHub:
    """All configured MCP servers; `tools()` are the ones that started."""

    def __init__(self, configs: dict[str, McpServerConfig], environment: Mapping[str, str] | None = None) -> None:
        self.configs = configs
        self.environment = environment  # what each server inherits, before its own `env:`
        self.servers: list[McpServer] = []
        self.failures: dict[str, str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        # start() runs on a worker thread while close() may come from the UI's: this guards the list of
        # servers, the one starting, and whether the hub is closed.
        self._lock = threading.Lock()
        self._closed = False
        self._starting: McpServer | None = None

    def start(self, report: Callable[[str], None] | None = None) -> McpHub:
        """Start every server (blocking; call it off the UI thread). Failures are reported once each.
        A close() meanwhile ends it early: the server starting is stopped and the rest are not started."""
        if not self.configs:
            return self
        with self._lock:
            if self._closed:
                return self
            loop = self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=loop.run_forever, name="mcp", daemon=True)
            self._thread.start()
        for name, config in self.configs.items():
            server = McpServer(config, loop, self.environment)
            with self._lock:
                if self._closed:
                    break
                self._starting = server
            try:
                server.start()
            except Exception as exc:  # one broken server must not keep the others (or the app) from starting
                with self._lock:
                    self._starting = None
                    if self._closed:  # stopped because the app is quitting: not a failure to tell anyone
                        break
                self.failures[name] = str(exc)
                if report is not None:
                    report(f"MCP server {name!r} failed to start and is skipped: {exc}")
                continue
            with self._lock:
                self._starting = None
                if not self._closed:
                    self.servers.append(server)
                    continue
            server.close()  # it came up just as the hub closed
            break
        return self

    def tools(self) -> list[Tool]:
        return [tool for server in self.servers for tool in server.tools]

    def stop(self) -> None:
        """Ask every server to stop, all at once, without waiting (close() waits). Quitting calls this
        first, so the servers wind down while the rest of the app does."""
        with self._lock:
            self._closed = True
            servers = [*self.servers, *([self._starting] if self._starting is not None else [])]
        for server in servers:
            server.stop()

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Stop every server, all at once, waiting at most `timeout` in all (not per server)."""
        self.stop()
        with self._lock:
            servers = [*self.servers, *([self._starting] if self._starting is not None else [])]
            self.servers.clear()
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        deadline = time.monotonic() + timeout
        for server in servers:
            with contextlib.suppress(Exception):
                server.wait(max(0.0, deadline - time.monotonic()))
        if loop is not None and thread is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(loop.stop)
            thread.join(max(0.5, deadline - time.monotonic()))
            if not thread.is_alive():
                loop.close()
