"""`moa-chat serve`: the same chat in a web browser, through textual-serve.

textual-serve starts one command per browser tab (with a shell) and relays its screen over a websocket to
xterm.js in the page. That command is this very moa-chat, rebuilt from sys.executable and the global
options given here, so every tab runs the same config, preset and session as the terminal would. Keys
reach it through the inherited environment, never on a command line (where `ps` would show them).

There is no login: whoever can open the websocket drives an agent that runs commands with the user's
keys. So it listens on loopback by default, warns when told otherwise, and refuses websockets opened by
another site's page (an Origin check) or through a DNS name rebound to this machine (a Host check):
both would otherwise let any web page the user visits reach a loopback server.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .exit_codes import EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from aiohttp import web

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_WILDCARDS = ("", "0.0.0.0", "::")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default: {DEFAULT_HOST}, this machine only); anything else lets whoever "
        "reaches it use the chat, its tools and your keys",
    )
    parser.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"port to listen on (default: {DEFAULT_PORT})")
    parser.add_argument(
        "--public-url",
        metavar="URL",
        help="the address browsers use, when it is not http://HOST:PORT (behind a proxy, or --host 0.0.0.0)",
    )


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < (port := int(text)) < 65536:
        raise argparse.ArgumentTypeError(f"{text} is not a port (1-65535)")
    return port


def app_command(args: argparse.Namespace, session_id: str | None) -> str:
    """The shell command textual-serve runs for each browser tab: this moa-chat with the same options."""
    argv = [sys.executable, "-m", "moa_chat"]
    if args.config is not None:
        # Absolute, so the chat reads the same file whatever the server's working folder becomes.
        argv += ["--config", str(Path(args.config).absolute())]
    if args.preset:
        argv += ["--preset", args.preset]
    if getattr(args, "aggregator", None):
        argv += ["--aggregator", args.aggregator]
    for reference in getattr(args, "reference", None) or ():
        argv += ["--reference", reference]
    if session_id:
        argv += ["--session", session_id]
    # textual-serve runs it with /bin/sh; exec makes the chat the shell's own process, so nothing is left
    # between the server and the app (a signal to one reaches the other; no shell lingers).
    return "exec " + shlex.join(argv)


def stored_session(args: argparse.Namespace) -> str | None:
    """The full id of the session every tab opens, checked now: a wrong --session, or --resume with
    nothing stored, is an error on this terminal rather than a blank "Session ended" in the browser.
    --resume is fixed to the latest session at start, so a second tab does not open the first tab's chat."""
    from ..store import SessionStore, StoreError

    if not (args.session or getattr(args, "resume", False)):
        return None
    store = SessionStore()
    try:
        if args.session:
            return store.session(args.session).id
        latest = store.latest()
        if latest is None:
            raise StoreError("there is no stored session to resume yet")
        return latest.id
    finally:
        store.close()


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def public_url(host: str, port: int) -> str:
    name = host.strip("[]")
    if name in _WILDCARDS:
        name = DEFAULT_HOST  # the page needs an address to dial back; the wildcard is not one
    elif ":" in name:
        name = f"[{name}]"
    return f"http://{name}:{port}"


def allowed_hosts(host: str, port: int, url: str) -> frozenset[str]:
    """The addresses a websocket may name (as Host) and come from (as Origin): the public URL's, and the
    loopback names when listening there. A proxy in front may pass either one as Host."""
    names = {_bare(urlsplit(url).netloc)}
    if is_loopback(host) or host.strip("[]") in _WILDCARDS:
        names.update(_bare(f"{name}:{port}") for name in _LOOPBACK_NAMES)
    return frozenset(names)


def _bare(netloc: str) -> str:
    # Browsers leave the default port out of Host and Origin; compare without it.
    netloc = netloc.lower()
    for default in (":80", ":443"):
        netloc = netloc.removesuffix(default)
    return netloc


def websocket_refusal(headers: Mapping[str, str], allowed: frozenset[str]) -> str | None:
    """Why a websocket request must be refused, or None. Browsers always send Origin on a websocket; a
    client without one is a program that can reach the port anyway, which the Host check covers."""
    host = headers.get("Host") or ""
    if _bare(host) not in allowed:
        return f"unexpected Host {host!r}"
    origin = headers.get("Origin")
    if origin is not None:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or _bare(parts.netloc) not in allowed:
            return f"cross-site Origin {origin!r}"
    return None


def warning_for(host: str) -> str | None:
    if is_loopback(host):
        return None
    where = "every network interface" if host.strip("[]") in _WILDCARDS else host
    return (
        f"moa-chat: warning: serving on {where}, not this machine alone. There is no password: anyone "
        "who can reach this port gets the chat, with tools that read and write files and run commands "
        "here, using your API keys. Prefer the default (127.0.0.1) with an SSH tunnel."
    )


async def _announce(url: str) -> None:
    # aiohttp binds right after startup, without waiting on anything for a numeric address; if the port
    # is taken, run_app fails and cancels this before it speaks.
    await asyncio.sleep(0.5)
    print(f"moa-chat: serving the chat on {url} (Ctrl+C stops)", flush=True)


def serve(args: argparse.Namespace) -> int:
    from aiohttp import web
    from textual_serve.server import Server

    command = app_command(args, stored_session(args))
    # textual-serve appends "/ws" and "/static/..." to it as they are.
    url = (args.public_url or public_url(args.host, args.port)).rstrip("/")
    allowed = allowed_hosts(args.host, args.port, url)

    class MoaServer(Server):
        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            if reason := websocket_refusal(request.headers, allowed):
                print(f"moa-chat: refused a websocket: {reason}", file=sys.stderr, flush=True)
                raise web.HTTPForbidden(text=f"moa-chat serve: {reason}\n")
            return await super().handle_websocket(request)

        async def on_startup(self, app: web.Application) -> None:
            # In place of textual-serve's banner, which prints the whole command line, and not before the
            # port is open. Kept on self: the loop holds tasks weakly.
            self._announcement = asyncio.create_task(_announce(url))

    if warning := warning_for(args.host):
        print(warning, file=sys.stderr, flush=True)
    try:
        MoaServer(command, host=args.host, port=args.port, title="moa-chat", public_url=url).serve()
    except OSError as exc:  # the port is taken, or the address is not this machine's
        print(f"moa-chat: error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK
