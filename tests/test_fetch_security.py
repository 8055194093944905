"""fetch_url cannot be walked into this machine or its network: not by a redirect, not by a DNS answer
that changes between the check and the fetch, not by `--yes`. Loopback addresses stand in for the
internet here: 127.0.0.2 plays a public host, 127.0.0.1 the local service holding a secret."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from moa_chat.engine.cancel import CancelToken
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall
from moa_chat.tools import ToolError
from moa_chat.tools.fetch import Resolver, address_concern, approval_reason, fetch
from test_cli import run

SECRET = "the-local-secret-4711"


def serve(host: str, answer):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            status, headers, body = answer(self.path)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server_type = ThreadingHTTPServer
    if ":" in host:

        class Server6(ThreadingHTTPServer):
            address_family = socket.AF_INET6

        server_type = Server6
    server = server_type((host, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def local_secret():
    server = serve("127.0.0.1", lambda path: (200, {"Content-Type": "text/plain"}, SECRET.encode()))
    yield server
    server.shutdown()


@pytest.fixture
def public_redirector(local_secret):
    port = local_secret.server_address[1]

    def answer(path):
        if path == "/page":
            return 200, {"Content-Type": "text/plain"}, b"a public page"
        return 302, {"Location": f"http://127.0.0.1:{port}/secret"}, b""

    server = serve("127.0.0.2", answer)
    yield server
    server.shutdown()


def stand_in(address: str) -> bool:
    """127.0.0.2 plays a public address; everything else is judged as usual."""
    return False if address == "127.0.0.2" else address_concern(address)


def test_a_public_page_redirecting_to_a_local_one_is_refused(public_redirector):
    resolver = Resolver(concern=stand_in)
    url = f"http://127.0.0.2:{public_redirector.server_address[1]}/go"
    assert approval_reason(resolver, {"url": url}) is None  # public: no approval asked
    with pytest.raises(ToolError, match=r"redirects to http://127\.0\.0\.1, a local or private address"):
        fetch(resolver, url, limit=10_000, timeout=5, cancel=CancelToken())
    page = f"http://127.0.0.2:{public_redirector.server_address[1]}/page"
    assert fetch(resolver, page, limit=10_000, timeout=5, cancel=CancelToken())[2] == b"a public page"


def test_the_address_checked_is_the_address_fetched(public_redirector, local_secret):
    """A DNS answer that turns local after the check (rebinding) does not reach the local service."""
    answers = iter(["127.0.0.2", "127.0.0.1"])

    def rebinding(host, port):
        return [(None, None, None, "", (next(answers), 0))]

    resolver = Resolver(concern=stand_in, lookup=rebinding)
    port = public_redirector.server_address[1]
    url = f"http://rebinding.test:{port}/page"
    assert approval_reason(resolver, {"url": url}) is None  # checked: 127.0.0.2, public
    _status, _kind, body, _cut = fetch(resolver, url, limit=10_000, timeout=5, cancel=CancelToken())
    assert body == b"a public page" and SECRET.encode() not in body  # fetched from the address checked


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.1.1",
        "169.254.169.254",
        "100.100.100.200",
        "168.63.129.16",
        "100.64.0.1",
        "100.127.255.254",
        "::1",
        "fe80::1",
        "::ffff:127.0.0.1",
        "0.0.0.0",
        "224.0.0.1",
    ],
)
def test_local_private_shared_and_metadata_addresses_ask_first(address):
    assert address_concern(address)


@pytest.mark.parametrize("address", ["93.184.215.14", "1.1.1.1", "2606:4700:4700::1111", "100.128.0.1"])
def test_public_addresses_read_freely(address):
    assert not address_concern(address)


def test_yes_does_not_allow_local_fetches_allow_local_does(
    wire_config, llm_server, home, local_secret, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    wire_config()
    url = f"http://127.0.0.1:{local_secret.server_address[1]}/secret"
    fetch_call = ScriptedToolCall("fetch_url", json.dumps({"url": url}), id="f1")
    rounds = [Reply(tool_calls=[fetch_call]), Reply(text="done")]
    llm_server.script("agg", rounds * 2)  # two runs of ask: a tool round and an answer each
    with_yes = run("ask", "read it", "--yes", "--no-save", "--json")
    assert with_yes.returncode == 0, with_yes.stderr
    assert "--allow-local" in with_yes.stderr and SECRET not in with_yes.stdout
    sent = llm_server.requests_for("agg")[1].messages
    denial = "not allowed in this non-interactive run: run with --allow-local to allow"
    assert any(m["role"] == "tool" and m["content"] == denial for m in sent)
    allowed = run("ask", "read it", "--allow-local", "--no-save")
    assert allowed.returncode == 0, allowed.stderr
    sent = llm_server.requests_for("agg")[-1].messages
    assert any(m["role"] == "tool" and SECRET in m["content"] for m in sent)


def test_a_local_host_is_fetched_only_after_its_approval_check(local_secret):
    resolver = Resolver()
    url = f"http://127.0.0.1:{local_secret.server_address[1]}/secret"
    with pytest.raises(ToolError, match="refused"):
        fetch(resolver, url, limit=10_000, timeout=5, cancel=CancelToken())  # never put to the user
    assert approval_reason(resolver, {"url": url})  # the check flags it: the user is asked
    assert fetch(resolver, url, limit=10_000, timeout=5, cancel=CancelToken())[2] == SECRET.encode()


def test_the_checked_address_holds_however_long_the_approval_takes(public_redirector, monkeypatch):
    """Before, a resolution was kept 60 s: an approval slower than that (or a fetch a minute later) saw a
    new DNS answer. Now a turn's resolver keeps its answers."""
    import moa_chat.tools.fetch as fetch_module

    answers = iter(["127.0.0.2", "127.0.0.1"])
    resolver = Resolver(concern=stand_in, lookup=lambda host, port: [(None, None, None, "", (next(answers), 0))])
    port = public_redirector.server_address[1]
    url = f"http://slow-approval.test:{port}/page"
    assert approval_reason(resolver, {"url": url}) is None
    monkeypatch.setattr(fetch_module.time, "monotonic", lambda: 10_000_000.0)  # much later
    assert fetch(resolver, url, limit=10_000, timeout=5, cancel=CancelToken())[2] == b"a public page"


@pytest.fixture
def ipv6_local():
    """A local service on the IPv6 loopback: /secret holds the secret, /start redirects to it relatively."""

    def answer(path):
        if path == "/start":
            return 302, {"Location": "/secret"}, b""
        return 200, {"Content-Type": "text/plain"}, SECRET.encode()

    try:
        server = serve("::1", answer)
    except OSError as exc:  # no IPv6 on this machine (a container without it, say)
        pytest.skip(f"no IPv6 loopback: {exc}")
    yield server
    server.shutdown()


def test_a_redirect_to_an_ipv6_loopback_is_refused_like_127_0_0_1(ipv6_local):
    port = ipv6_local.server_address[1]
    redirector = serve("127.0.0.2", lambda path: (302, {"Location": f"http://[::1]:{port}/secret"}, b""))
    try:
        resolver = Resolver(concern=stand_in)
        url = f"http://127.0.0.2:{redirector.server_address[1]}/go"
        assert approval_reason(resolver, {"url": url}) is None
        with pytest.raises(ToolError, match=r"redirects to http://\[::1\], a local or private address \(::1\)"):
            fetch(resolver, url, limit=10_000, timeout=5, cancel=CancelToken())
    finally:
        redirector.shutdown()
    # Fetched itself, the same URL is put to the user first, like 127.0.0.1.
    direct = f"http://[::1]:{port}/secret"
    with pytest.raises(ToolError, match="refused"):
        fetch(resolver, direct, limit=10_000, timeout=5, cancel=CancelToken())
    assert "::1 is a local or private address" in (approval_reason(resolver, {"url": direct}) or "")


def test_an_approved_ipv6_host_may_redirect_within_itself(ipv6_local):
    """The relative Location resolves against the bracketed host: before, against `http://::1:PORT/`, which
    parses to no host at all, so every relative redirect on an IPv6 host failed."""
    resolver = Resolver()
    url = f"http://[::1]:{ipv6_local.server_address[1]}/start"
    assert approval_reason(resolver, {"url": url})  # the user is asked, and (here) approves
    assert fetch(resolver, url, limit=10_000, timeout=5, cancel=CancelToken())[2] == SECRET.encode()
