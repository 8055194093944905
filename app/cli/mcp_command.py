"""`moa-chat mcp`: the panel as an MCP server, on stdio (what `claude mcp add` and Claude Desktop start) or
on streamable HTTP with `--port` (at /mcp, behind the same token as `moa-chat api`).

On stdio, standard output carries the protocol alone: everything moa-chat says goes to standard error.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from typing import TYPE_CHECKING

from ..config import Config
from .exit_codes import EXIT_OK, EXIT_USAGE
from .serve import DEFAULT_HOST, _port, is_loopback, public_url

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port",
        type=lambda text: 0 if text == "0" else _port(text),
        default=None,
        help="serve streamable HTTP on this port (0 takes a free one) instead of stdio",
    )
    parser.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address for --port (default: {DEFAULT_HOST}, this machine only)"
    )


def run_mcp(config: Config, default: str, args: argparse.Namespace) -> int:
    from ..mcp_server.server import build
    from ..providers import lifecycle

    server = build(config, default)
    try:
        if args.port is None:
            asyncio.run(server.run_stdio_async())
            return EXIT_OK
        return asyncio.run(_serve_http(server, args.host, args.port))
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        lifecycle.stop_all()  # the demo's server, the local model's


async def _serve_http(server: MCPServer, host: str, port: int) -> int:
    import uvicorn

    from ..api.auth import load_token
    from ..mcp_server.server import token_guard

    token = load_token()
    app = token_guard(server.streamable_http_app(host=host), token.value)
    try:
        listener = socket.create_server((host, port))
    except OSError as exc:
        print(f"moa-chat: error: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    bound = listener.getsockname()[1]
    if not is_loopback(host):
        print(f"moa-chat: warning: serving MCP on {host}: whoever reaches this port and has the token spends "
              "your provider keys", file=sys.stderr)  # fmt: skip
    source = "shown once above" if token.generated else token.source
    if token.generated:
        print(f"moa-chat mcp: API key (kept in {token.source}, mode 0600): {token.value}", flush=True)
    print(f"moa-chat mcp: the API key is {source}; send it as Authorization: Bearer <API key>", flush=True)
    print(f"moa-chat mcp: serving on {public_url(host, bound)}/mcp (Ctrl+C stops)", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[listener])
    return EXIT_OK
