"""fetch_url: an http(s) page for the model, without letting it reach this machine or its network unasked.

A URL whose host resolves to a local, private or otherwise non-public address (localhost, the LAN, the
shared 100.64.0.0/10 range, link-local and cloud metadata such as 169.254.169.254, 100.100.100.200 or
168.63.129.16) needs the user's approval. Two ways around a one-time check are closed:

- Redirects are followed by hand, each hop checked the same way: a public page that redirects to a
  local one is refused (unless it stays on the local host the user approved).
- The host is resolved once, for the check and the connection alike (the connection goes to that very
  address, TLS still verified for the name), so a DNS answer cannot change in between.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..engine.cancel import CancelToken
from .registry import ToolArguments, ToolError

if TYPE_CHECKING:
    import http.client

    Connect = Callable[["Target", float], http.client.HTTPConnection]

MAX_REDIRECTS = 5
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_METADATA = {ipaddress.ip_address(a) for a in ("169.254.169.254", "100.100.100.200", "168.63.129.16", "fd00:ec2::254")}


def address_concern(address: str) -> bool:
    """True for an address that is not plainly on the public internet."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip in _METADATA or ip in _SHARED or not ip.is_global or ip.is_multicast


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str  # with the query
    addresses: tuple[str, ...]
    local: bool  # an address of it is local, private or otherwise not plainly public


# One answer of socket.getaddrinfo: (family, type, proto, canonname, sockaddr); sockaddr[0] is the address.
AddressInfo = tuple[object, object, object, object, tuple[object, ...]]


class Resolver:
    """Resolves each host once and keeps the answer for its whole life (one turn's tool set), so the
    approval check and the fetch that follows it, however long the user took, see the same addresses.
    It also remembers which hosts the check found local: only those were put to the user."""

    def __init__(
        self,
        *,
        concern: Callable[[str], bool] = address_concern,
        lookup: Callable[[str, None], Sequence[AddressInfo]] = socket.getaddrinfo,
    ) -> None:
        self._concern, self._lookup = concern, lookup
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[str, ...]] = {}
        self.asked: set[tuple[str, int]] = set()  # local (host, port)s the approval check flagged

    def target(self, url: str) -> Target:
        parts = urllib.parse.urlsplit(url)
        scheme = (parts.scheme or "").lower()
        if scheme not in ("http", "https") or not parts.hostname:
            raise ToolError("only http:// and https:// URLs with a host can be fetched")
        try:
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError as exc:
            raise ToolError(f"bad port in {url}") from exc
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        addresses = self.addresses(parts.hostname)
        return Target(scheme, parts.hostname, port, path, addresses, any(self._concern(a) for a in addresses))

    def addresses(self, host: str) -> tuple[str, ...]:
        with self._lock:
            seen = self._seen.get(host)
        if seen:
            return seen
        try:
            # getaddrinfo's order (the system's preference), without repeats.
            found = tuple(dict.fromkeys(str(info[4][0]) for info in self._lookup(host, None)))
        except (OSError, UnicodeError) as exc:
            raise ToolError(f"cannot resolve {host}: {exc}") from exc
        if not found:
            raise ToolError(f"cannot resolve {host}: no addresses")
        with self._lock:
            return self._seen.setdefault(host, found)


def approval_reason(resolver: Resolver, args: ToolArguments) -> str | None:
    try:
        target = resolver.target(str(args.get("url", "")))
    except ToolError:
        return None  # it will not be fetched either
    if target.local:
        resolver.asked.add((target.host, target.port))
        shown = ", ".join(target.addresses)
        return f"{target.host} is a local or private address ({shown}): fetching it reaches this machine or its network"
    return None


def url_host(host: str) -> str:
    """A host as a URL spells it: an IPv6 literal goes in brackets (RFC 3986), or its colons would read as a
    port (`http://::1:8080/` names no host at all; `http://[::1]:8080/` is the loopback)."""
    return f"[{host}]" if ":" in host else host


def _connect(addresses: tuple[str, ...], port: int, timeout: float | None) -> socket.socket:
    """A connection to the first of the checked addresses that answers (and to no other)."""
    error: OSError | None = None
    for address in addresses:
        try:
            return socket.create_connection((address, port), timeout)
        except OSError as exc:
            error = exc
    raise error or OSError("no address to connect to")


@functools.cache
def _pinned_connections() -> tuple[Connect, Connect]:
    """HTTP and HTTPS connections to the checked addresses. Made on the first fetch: http.client (and the email
    package it parses headers with) would otherwise be paid at every start-up, for a tool most turns never call."""
    import http.client

    class PinnedHTTP(http.client.HTTPConnection):
        def __init__(self, target: Target, timeout: float) -> None:
            super().__init__(target.host, target.port, timeout=timeout)
            self._addresses = target.addresses

        def connect(self) -> None:
            self.sock = _connect(self._addresses, self.port, self.timeout)

    class PinnedHTTPS(http.client.HTTPSConnection):
        def __init__(self, target: Target, timeout: float) -> None:
            super().__init__(target.host, target.port, timeout=timeout, context=ssl.create_default_context())
            self._addresses = target.addresses

        def connect(self) -> None:
            sock = _connect(self._addresses, self.port, self.timeout)
            try:
                self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]
            except BaseException:
                sock.close()
                raise

    return PinnedHTTP, PinnedHTTPS


def fetch(
    resolver: Resolver, url: str, *, limit: int, timeout: float, cancel: CancelToken
) -> tuple[int, str, bytes, bool]:
    """(status, content type, body up to `limit`, whether it was cut), following redirects safely."""
    import http.client

    pinned_http, pinned_https = _pinned_connections()
    first = resolver.target(url)
    # A local first host the approval check flagged was put to the user (a denied call never gets here):
    # it may redirect within itself. Any other local hop was never asked about.
    approved_local = (first.host, first.port) if first.local and (first.host, first.port) in resolver.asked else None
    target = first
    started = time.monotonic()
    for _hop in range(MAX_REDIRECTS + 1):
        if target.local and (target.host, target.port) != approved_local and target is first:
            raise ToolError(
                f"refused: {url} reaches a local or private address ({', '.join(target.addresses)}) and was not "
                "approved"
            )
        if target.local and (target.host, target.port) != approved_local:
            raise ToolError(
                f"refused: {url} redirects to {target.scheme}://{url_host(target.host)}, a local or private address "
                f"({', '.join(target.addresses)}); fetch that URL itself if you mean it (it asks first)"
            )
        connection = (pinned_https if target.scheme == "https" else pinned_http)(target, timeout)
        try:
            connection.request("GET", target.path, headers={"User-Agent": "moa-chat (fetch_url tool)"})
            response = connection.getresponse()
            if response.status in (301, 302, 303, 307, 308) and response.getheader("Location"):
                # The base is rebuilt from the parsed target, so an IPv6 host needs its brackets back: a relative
                # Location on [::1] resolved against "http://::1:80/", a URL with no host Python can parse.
                base = f"{target.scheme}://{url_host(target.host)}:{target.port}{target.path}"
                location = urllib.parse.urljoin(base, response.getheader("Location", ""))
                target = resolver.target(location)
                continue
            kind = response.getheader("Content-Type", "") or ""
            chunks, size = [], 0
            while size <= limit:
                cancel.raise_if_cancelled()
                if time.monotonic() - started > timeout:
                    raise ToolError(f"gave up after {timeout:g}s")
                chunk = response.read1(16_384)  # what has arrived: read() would wait for all 16 KB
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            data = b"".join(chunks)
            if response.status >= 400:
                raise ToolError(f"HTTP {response.status} {response.reason} from {url}")
            return response.status, kind, data[:limit], len(data) > limit
        except (OSError, http.client.HTTPException) as exc:
            raise ToolError(f"cannot fetch {url}: {exc}") from exc
        finally:
            connection.close()
    raise ToolError(f"too many redirects (more than {MAX_REDIRECTS}) from {url}")
