"""Who may use the endpoint: a bearer token always, browser pages from one named origin at most, and only
through the addresses it serves.

The endpoint spends the user's provider keys, so every request carries the token. It is
`MOA_CHAT_API_KEY` when set, else one generated on the first start and kept in the data folder, readable by
the user alone (0600), so clients configured once keep working across restarts. It is compared in constant
time. A browser page from another site is refused outright (Origin set and not the one `--cors` names):
with the token a page could spend the keys, and without it a page could still probe the port. A page that
renames this machine (DNS rebinding: evil.example made to resolve to 127.0.0.1) is same-origin to the
browser, so no Origin check sees it; its requests carry `Host: evil.example`, which is not an address the
server answers on, and are refused, as Jupyter and other local servers refuse them.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import os
import secrets
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..config.paths import data_home

TOKEN_ENV = "MOA_CHAT_API_KEY"
TOKEN_FILE = "api-token"
TOKEN_PREFIX = "moa-"


@dataclass(frozen=True)
class Token:
    value: str
    source: str  # where it came from, for the start-up lines: the variable, or the file
    generated: bool = False  # made just now: printed once, at this start


def load_token(folder: Path | None = None) -> Token:
    """MOA_CHAT_API_KEY, else the token kept in the data folder, else a new one kept there (0600)."""
    given = os.environ.get(TOKEN_ENV, "").strip()
    if given:
        return Token(given, f"${TOKEN_ENV}")
    folder = folder or data_home()
    path = folder / TOKEN_FILE
    with contextlib.suppress(FileNotFoundError):
        kept = path.read_text(encoding="utf-8").strip()
        if kept:
            _restrict(path)
            return Token(kept, str(path))
    folder.mkdir(parents=True, exist_ok=True)
    value = TOKEN_PREFIX + secrets.token_urlsafe(32)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(value + "\n")
    _restrict(path)
    return Token(value, str(path), generated=True)


def _restrict(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.chmod(0o600)


def authorized(header: str | None, token: str) -> bool:
    """Whether an Authorization header carries the token, compared without leaking timing."""
    if not header:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


def origin_refusal(origin: str | None, allowed: str | None) -> str | None:
    """Why a request from a browser page must be refused, or None. Programs send no Origin."""
    if origin is None:
        return None
    if allowed is not None and origin.rstrip("/") == allowed.rstrip("/"):
        return None
    return f"cross-origin requests are refused (Origin {origin!r}); start the server with --cors ORIGIN to allow one"


_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


@dataclass(frozen=True)
class ServedHosts:
    """The names a request's Host may give: the address listened on (and, there, the loopback names), the
    machine's own names and any address when listening on every interface, and those `--allow-host` adds."""

    names: frozenset[str]
    any_address: bool = False  # listening on every interface: any IP address names this machine

    @classmethod
    def of(cls, listen: str, allowed: Iterable[str] = ()) -> ServedHosts:
        bound = _host_name(listen)
        names = {bound, *(_host_name(name) for name in allowed)}
        if bound in _LOOPBACK_NAMES or _is_loopback_address(bound) or bound in _WILDCARDS:
            names |= _LOOPBACK_NAMES
        wildcard = bound in _WILDCARDS
        if wildcard:
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        return cls(frozenset(names - {""}), any_address=wildcard)

    def refusal(self, host: str | None) -> str | None:
        """Why a request naming `host` (its Host header) is refused, or None. A request with no Host is a
        program's (every browser sends one), which reaches the port anyway."""
        if not host:
            return None
        name = _host_name(host)
        if name in self.names or (self.any_address and _is_address(name)):
            return None
        served = ", ".join(sorted(self.names))
        return (
            f"Host {host!r} is not an address this server answers on ({served}): a web page that renamed this "
            "machine (DNS rebinding) is refused; start the server with --allow-host NAME to answer on another name"
        )


def _host_name(host: str) -> str:
    """The name in a Host header or a --host value, without its port: "[::1]:8080" is "::1"."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _is_loopback_address(name: str) -> bool:
    return _is_address(name) and ipaddress.ip_address(name).is_loopback
