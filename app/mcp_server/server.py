"""`moa-chat mcp`: an MCP server whose tools consult the panel, on stdio or on streamable HTTP.

Two tools: `consult_panel(question, context?, preset?)` asks every reference, then the aggregator, and returns
the aggregator's synthesis as text with each reference's answer, model, time and tokens as structured
content; `list_presets` names the presets that can run here and why the others cannot. While the references
work, the client gets progress notifications (n of m answered) when it asked for them with a progress token;
a request the client cancels cancels its turn, closing the providers' streams. The panel is never given
tools in this mode: the client is the agent, and the panel is its second opinion.

Over HTTP (`--port`), every request carries the same token as `moa-chat api` (a bearer token or x-api-key),
and the SDK's DNS-rebinding guard refuses browser pages from other sites.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hmac
import inspect
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from .. import __version__
from ..config import Config, Preset
from ..engine import CancelToken, threads
from ..providers import cycle_order, readiness
from ..providers.ollama import installed_models
from ..session import TurnResult
from .consult import ConsultError, Image, consult, question_message, report

INSTRUCTIONS = (
    "moa-chat's panel: several models answer a question independently, then an aggregator weighs their answers "
    "into one. Call consult_panel for a second opinion on a hard question (a design, a bug, a review), giving "
    "the code or facts it needs as context; list_presets names the panels you can pick."
)
ContextBlocks = list[dict[str, Any]]


def build(config: Config, default: str) -> MCPServer:
    server: MCPServer = MCPServer("moa-chat", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")

    async def consult_panel(
        question: Annotated[str, Field(description="What to ask the panel, as you would ask an expert.")],
        ctx: Context,
        context: Annotated[
            str | ContextBlocks | None,
            Field(
                description="What the panel needs to answer: code, logs, facts. Text, or a list of MCP content "
                'blocks ({"type": "text", "text": ...} and {"type": "image", "data": base64, "mimeType": ...}).'
            ),
        ] = None,
        preset: Annotated[
            str | None, Field(description="The panel to ask (list_presets names them); the default when absent.")
        ] = None,
    ) -> CallToolResult:
        """Ask moa-chat's panel of models for a considered answer: each reference model answers on its own, then
        an aggregator writes one synthesis from their answers. Returns the synthesis; each reference's answer,
        model, time and tokens are in the structured content."""
        try:
            chosen = _preset(config, preset or default)
            text, images = _context(context)
            message = question_message(question, text, images)
        except ConsultError as exc:
            return _failed(str(exc))
        result = await _run(config, chosen, message, ctx)
        if result.status != "ok":
            return _failed(f"the panel ({chosen.name}) did not answer: {result.error or result.status}")
        return CallToolResult(content=[TextContent(text=result.text)], structured_content=report(chosen, result))

    async def list_presets() -> CallToolResult:
        """The panels (presets) moa-chat can ask here: each one's models and description; those that cannot run
        here say why (a missing API key, a server not running)."""
        await asyncio.to_thread(installed_models, config, fresh=True)  # whether Ollama runs now, asked off the loop
        rows = []
        for one in cycle_order(config):
            state = readiness(config, one)
            rows.append(
                {
                    "name": one.name,
                    "description": one.description,
                    "aggregator": one.aggregator.label,
                    "references": [slot.label for slot in one.references],
                    "default": one.name == default,
                    "runnable": state.runnable,
                    "why_not": state.problem,
                }
            )
        lines = [
            f"{row['name']}{' (default)' if row['default'] else ''}: {row['description'] or row['aggregator']}"
            + ("" if row["runnable"] else f" — cannot run here: {row['why_not']}")
            for row in rows
        ]
        return CallToolResult(content=[TextContent(text="\n".join(lines))], structured_content={"presets": rows})

    server.add_tool(
        consult_panel,
        description=inspect.cleandoc(consult_panel.__doc__ or ""),
        annotations=ToolAnnotations(title="Consult the panel", read_only_hint=True, open_world_hint=True),
    )
    server.add_tool(
        list_presets,
        description=inspect.cleandoc(list_presets.__doc__ or ""),
        annotations=ToolAnnotations(title="List the panels", read_only_hint=True),
    )
    return server


def _preset(config: Config, name: str) -> Preset:
    preset = config.presets.get(name)
    if preset is None:
        raise ConsultError(f"no preset named {name!r}; list_presets names them")
    state = readiness(config, preset)
    if not state.runnable:
        raise ConsultError(f"the preset {name!r} cannot run here: {state.problem}")
    return preset


def _context(value: str | ContextBlocks | None) -> tuple[str, list[Image]]:
    if value is None or isinstance(value, str):
        return value or "", []
    texts: list[str] = []
    images: list[Image] = []
    for n, block in enumerate(value):
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "image":
            try:
                data = base64.b64decode(str(block.get("data", "")), validate=True)
            except (binascii.Error, ValueError):
                raise ConsultError(f"context block {n + 1}: its data is not base64") from None
            images.append(Image(data, str(block.get("name") or f"image-{n + 1}")))
        else:
            raise ConsultError(f"context block {n + 1}: a {kind!r} block; send text and image blocks")
    return "\n\n".join(texts), images


async def _run(config: Config, preset: Preset, message: Any, ctx: Context) -> TurnResult:
    """The turn on a kept thread; progress goes to the client as it comes; a cancel ends the turn."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[TurnResult] = loop.create_future()
    cancel = CancelToken()
    reports: asyncio.Queue[tuple[int, int, str]] = asyncio.Queue()

    def progress(answered: int, total: int, line: str) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits for progress
            loop.call_soon_threadsafe(reports.put_nowait, (answered, total, line))

    def settle(result: TurnResult) -> None:
        if not done.done():
            done.set_result(result)

    def work() -> None:
        result = consult(config, preset, message, cancel=cancel, progress=progress)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result)

    threads.KEPT.start(work, f"moa-mcp-{preset.name}")
    try:
        while not done.done():
            waiter: asyncio.Future[tuple[int, int, str]] = asyncio.ensure_future(reports.get())
            both: list[asyncio.Future[Any]] = [waiter, done]
            await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
            if not waiter.done():
                waiter.cancel()
                continue
            answered, total, line = waiter.result()
            await ctx.report_progress(answered, total, f"{answered} of {total} answered · {line}")
        # The thread reported its last progress before its end (both reach the loop in order): sent before the
        # result, not dropped when the end came in the same turn of the loop.
        while not reports.empty():
            answered, total, line = reports.get_nowait()
            await ctx.report_progress(answered, total, f"{answered} of {total} answered · {line}")
        return done.result()
    except BaseException:  # cancelled by the client (or the server stops): the turn ends, its streams close
        threads.KEPT.start(cancel.cancel, "moa-mcp-cancel")
        raise


def _failed(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=message)], is_error=True)


# --------------------------------------------------------------------------- HTTP's guard

Scope = MutableMapping[str, Any]
App = Callable[[Scope, Any, Any], Awaitable[None]]


def token_guard(app: App, token: str) -> App:
    """An ASGI app that answers 401 unless the request carries `token` (Authorization: Bearer, or x-api-key)."""

    async def guarded(scope: Scope, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        bearer = headers.get("authorization", "")
        given = bearer[7:].strip() if bearer.lower().startswith("bearer ") else headers.get("x-api-key", "").strip()
        if given and hmac.compare_digest(given.encode(), token.encode()):
            await app(scope, receive, send)
            return
        body = b'{"error": "no valid API key: send Authorization: Bearer <token> (the token moa-chat api uses)"}'
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})

    return guarded
