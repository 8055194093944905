"""`moa-chat api`: every runnable preset as a model behind an OpenAI-compatible HTTP endpoint.

It prints where it listens, the models, how to authenticate and which presets it left out, then one line
per request. Ctrl+C, SIGTERM and SIGHUP (the terminal closed) stop it: new turns are refused, the turns in
flight are cancelled (a streamed one ends with an error event), and the servers moa-chat started for them
(the local model) stop. It then exits as `ask` does when stopped: 130 for Ctrl+C, 128 + N for signal N.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import Config
from .exit_codes import EXIT_USAGE
from .serve import DEFAULT_HOST, _port, is_loopback, public_url
from .stopping import exit_status

if TYPE_CHECKING:
    from ..api.auth import Token
    from ..api.server import ApiServer

DEFAULT_PORT = 8080


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to listen on (default: {DEFAULT_HOST}, this machine only)"
    )
    parser.add_argument(
        "--port",
        type=lambda text: 0 if text == "0" else _port(text),
        default=DEFAULT_PORT,
        help=f"port to listen on (default: {DEFAULT_PORT}; 0 takes a free one)",
    )
    parser.add_argument(
        "--cors", metavar="ORIGIN", help="let browser pages from ORIGIN (e.g. http://localhost:3000) call the API"
    )
    parser.add_argument(
        "--progress",
        action="store_true",
        help="stream the panel's progress as reasoning_content before the reply (a request's moa_progress wins)",
    )
    parser.add_argument(
        "--save", action="store_true", help="keep each API conversation as a stored session (see `moa-chat sessions`)"
    )
    parser.add_argument(
        "--read-tools",
        action="store_true",
        help="let the aggregator use moa-chat's own tools that only read (read_file, list_directory, search_files, "
        "fetch_url) in the current folder; tools that change things or need approval never run here",
    )
    parser.add_argument("--max-turns", type=int, default=None, metavar="N", help="turns in flight at once (16)")
    parser.add_argument(
        "--allow-host",
        metavar="NAME",
        action="append",
        default=[],
        help="answer requests whose Host is NAME too (behind a proxy); others than the address listened on are "
        "refused, as a web page that renamed this machine would send them",
    )
    parser.add_argument(
        "--header-timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="disconnect a client that has not sent a request's headers within this long (30)",
    )
    parser.add_argument(
        "--send-timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="cancel a streamed turn whose client has not read any of it for this long (30)",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 86_400:
        raise argparse.ArgumentTypeError(f"expected seconds between 0 and 86400, not {text!r}")
    return value


def run_api(config: Config, default: str, args: argparse.Namespace) -> int:
    from ..api.auth import ServedHosts, load_token
    from ..api.catalog import Catalog
    from ..api.server import MAX_TURNS, SEND_TIMEOUT, ApiServer, Settings

    catalog = Catalog.of(config, default)
    if default not in catalog.served:
        why = catalog.left_out.get(default, "unknown")
        print(f"moa-chat: error: the default preset {default!r} cannot run here ({why}); pick one with --preset",
              file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    token = load_token()
    settings = Settings(
        token=token.value,
        cors=args.cors,
        progress=args.progress,
        max_turns=args.max_turns or MAX_TURNS,
        read_tools=args.read_tools,
        hosts=ServedHosts.of(args.host, args.allow_host),
        send_timeout=args.send_timeout or SEND_TIMEOUT,
    )
    if args.save:
        from ..api.saving import ConversationSaver
        from ..store import SessionStore

        settings.saver = ConversationSaver(SessionStore())
    server = ApiServer(config, catalog, settings)
    if not is_loopback(args.host):
        print(
            f"moa-chat: warning: serving the API on {args.host}, not this machine alone: whoever reaches this port "
            "and has the token spends your provider keys. Prefer the default (127.0.0.1) with an SSH tunnel.",
            file=sys.stderr,
        )
    return asyncio.run(_serve(server, args, token))


async def _serve(server: ApiServer, args: argparse.Namespace, token: Token) -> int:
    from aiohttp import web

    from ..api.allocator import fix_mmap_threshold
    from ..api.listener import HEADER_TIMEOUT, Listener
    from ..providers import lifecycle

    fix_mmap_threshold()
    host = args.host
    # handler_cancellation: a client that disconnects cancels its handler, which cancels its turn.
    runner = web.AppRunner(server.application(), handler_cancellation=True, access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    listener = Listener(runner, server.refuse, header_timeout=args.header_timeout or HEADER_TIMEOUT)
    try:
        bound = await listener.start(host, args.port)
    except OSError as exc:
        await runner.cleanup()
        print(f"moa-chat: error: cannot listen on {host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    _announce(server, f"{public_url(host, bound)}/v1", token)
    loop = asyncio.get_running_loop()
    stopped_by: asyncio.Future[int] = loop.create_future()

    def stop(number: int) -> None:
        if not stopped_by.done():
            stopped_by.set_result(number)

    for signalled in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signalled, stop, int(signalled))
    try:
        number = await stopped_by
        print(f"moa-chat api: stopping ({signal.Signals(number).name})", flush=True)
        ended = await server.stop()
        if ended:
            print(f"moa-chat api: {ended} turn(s) in flight were cancelled", flush=True)
        listener.stop()
        await runner.cleanup()
    finally:
        lifecycle.stop_all()  # the local model's server, the demo's
    print("moa-chat api: stopped", flush=True)
    return exit_status(number)


def _announce(server: ApiServer, base_url: str, token: Token) -> None:
    catalog = server.catalog
    names = [f"{name} (default)" if name == catalog.default else name for name in catalog.served]
    # The address comes last: once it is printed, the server answers (a script may wait for that line).
    lines = ["moa-chat api: the presets as OpenAI-compatible models", f"  models: {', '.join(names)}"]
    lines += [f"  left out: {name} ({why})" for name, why in catalog.left_out.items()]
    if token.generated:
        lines.append(f"  API key (shown this once, kept in {token.source}, mode 0600): {token.value}")
    elif token.source.startswith("$"):
        lines.append(f"  API key: the value of {token.source}")
    else:
        lines.append(f"  API key: kept in {token.source} (mode 0600)")
    lines.append("  authenticate with the header  Authorization: Bearer <API key>")
    if server.settings.read_tools:
        lines.append(f"  moa-chat's tools that only read run here, in {Path.cwd()} (never run_command, write_file)")
    lines.append(f"moa-chat api: serving on {base_url} (Ctrl+C stops)")
    print("\n".join(lines), flush=True)
