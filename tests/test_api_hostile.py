"""`moa-chat api` against forged, slow and greedy clients: the real process on a free port, the scripted provider
behind it, raw sockets where a client misbehaves below what an HTTP library lets one do."""

from __future__ import annotations

import json
import select
import socket
import time
from pathlib import Path

import pytest
from api_helpers import QUESTION, ApiProcess, client, configure, start_api
from moa_chat.providers.loopback_server import Reply

WAIT = 60.0
CSI = "\x9b"  # C1 CSI: one byte that a terminal reads as ESC [


def address(api: ApiProcess) -> tuple[str, int]:
    host, port = api.root.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def raw_request(api: ApiProcess, head: bytes, body: bytes = b"") -> bytes:
    """Send `head` (request line and headers, without the blank line) and `body`; the whole answer."""
    with socket.create_connection(address(api), timeout=WAIT) as sock:
        sock.sendall(head + b"\r\nConnection: close\r\n\r\n" + body)
        answer = b""
        while data := sock.recv(65536):
            answer += data
    return answer


def completion_head(api: ApiProcess, body: bytes, host: str | None = None) -> bytes:
    host = host or api.root.removeprefix("http://")
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d" % (host.encode(), api.token.encode(), len(body))
    )


# --------------------------------------------------------------------------- what the answer carries


@pytest.mark.parametrize("stream", [False, True])
def test_c1_controls_are_escaped_in_the_json_the_api_sends(api, llm_server, stream):
    llm_server.script("agg", Reply(text=f"before {CSI}2J after", pieces=["before ", f"{CSI}2J", " after"]))
    body = json.dumps({"model": "wire", "messages": QUESTION, "stream": stream}).encode()
    answer = raw_request(api, completion_head(api, body), body)
    assert b" 200 OK" in answer.split(b"\r\n", 1)[0]
    assert CSI.encode() not in answer  # U+009B as UTF-8 (C2 9B): never on the wire raw
    assert b"\\u009b2J" in answer
    # Other text stays itself, not \u-escaped: the client reads exactly what the model wrote.
    reply = client(api).chat.completions.create(model="wire", messages=QUESTION)
    assert reply.choices[0].message.content == f"before {CSI}2J after"


# --------------------------------------------------------------------------- who may call


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "attacker.test.:{port}", "10.9.8.7:{port}"])
def test_a_host_other_than_the_address_served_is_refused_even_with_the_token(api, llm_server, host):
    """A page that renamed this machine (DNS rebinding) sends its own name as Host, and the token if it has it."""
    _, port = address(api)
    body = json.dumps({"model": "wire", "messages": QUESTION}).encode()
    answer = raw_request(api, completion_head(api, body, host=host.format(port=port)), body)
    status_line, _, rest = answer.partition(b"\r\n")
    assert b" 403 " in status_line, answer[:300]
    error = json.loads(rest.partition(b"\r\n\r\n")[2])["error"]
    assert error["code"] == "host_refused" and "DNS rebinding" in error["message"]
    assert "--allow-host" in error["message"]
    assert llm_server.requests == []
    assert "(host_refused)" in api.log_line("POST /v1/chat/completions")


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST", "[::1]:{port}"])
def test_the_addresses_served_are_answered(api, host):
    _, port = address(api)
    body = json.dumps({"model": "wire", "messages": QUESTION}).encode()
    answer = raw_request(api, completion_head(api, body, host=host.format(port=port)), body)
    assert b" 200 OK" in answer.split(b"\r\n", 1)[0], answer[:300]


def test_allow_host_adds_a_name_a_proxy_passes(home, llm_server):
    configure(home, llm_server)
    api = start_api(home, "--allow-host", "moa.internal")
    try:
        body = json.dumps({"model": "wire", "messages": QUESTION}).encode()
        answer = raw_request(api, completion_head(api, body, host="moa.internal"), body)
        assert b" 200 OK" in answer.split(b"\r\n", 1)[0], answer[:300]
        refused = raw_request(api, completion_head(api, body, host="other.internal"), body)
        assert b" 403 " in refused.split(b"\r\n", 1)[0]
    finally:
        api.stop()


# --------------------------------------------------------------------------- clients that misbehave on the wire


def test_a_megabyte_header_is_a_431_in_openais_shape_with_one_log_line_and_no_traceback(api, llm_server):
    body = json.dumps({"model": "wire", "messages": QUESTION}).encode()
    head = completion_head(api, body) + b"\r\nX-Padding: " + b"SECRETPAD" * 116_000  # about 1 MB
    answer = raw_request(api, head, body)
    status_line, _, rest = answer.partition(b"\r\n")
    assert b" 431 " in status_line, answer[:300]
    error = json.loads(rest.partition(b"\r\n\r\n")[2])["error"]
    assert error["code"] == "request_header_fields_too_large" and "8,190 bytes" in error["message"]
    line = api.log_line("431")
    assert "(request_header_fields_too_large)" in line and "SECRETPAD" not in line
    assert llm_server.requests == []
    api.stop()
    rest_of_log = []
    while (line := api.lines.get(timeout=WAIT)) != "<eof>":
        rest_of_log.append(line)
    assert not any("Traceback" in line or "SECRETPAD" in line for line in rest_of_log), rest_of_log


def test_clients_that_send_their_headers_a_byte_at_a_time_are_disconnected_after_the_header_timeout(home, llm_server):
    configure(home, llm_server)
    api = start_api(home, "--header-timeout", "1")
    sockets = [socket.create_connection(address(api), timeout=WAIT) for _ in range(50)]
    try:
        closed = 0
        for sock in sockets:
            sock.sendall(completion_head(api, b"{}") + b"\r\nX-Slow: ")
        # Each goes on sending its last header a byte at a time, never ending it; the server closes each once
        # the timeout has passed (WAIT bounds the test, it measures nothing).
        deadline = time.monotonic() + WAIT
        while (still := [s for s in sockets if s.fileno() >= 0]) and time.monotonic() < deadline:
            for sock in still:
                try:
                    sock.sendall(b"a")
                    gone = bool(select.select([sock], [], [], 0)[0]) and sock.recv(1024) == b""
                except OSError:  # the server's reset reached us
                    gone = True
                if gone:
                    sock.close()
                    closed += 1
            select.select([s for s in still if s.fileno() >= 0], [], [], 0.2)  # a byte every 0.2 s
        assert closed == 50
        assert llm_server.requests == []
        # A client that sends its request at once is served as before.
        assert client(api).chat.completions.create(model="wire", messages=QUESTION).choices[0].message.content
    finally:
        for sock in sockets:
            sock.close()
        api.stop()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_client_that_never_reads_its_stream_stops_the_upstream_and_is_cut_after_the_send_timeout(home, llm_server):
    """64 MB of reply: unbounded, the server read it all into memory for a client that reads nothing."""
    configure(home, llm_server)
    api = start_api(home, "--send-timeout", "2")
    try:
        # Warm (another preset): the first turn loads the openai SDK and the engine, which the figure below must
        # not count.
        assert client(api).chat.completions.create(model="wire-each", messages=QUESTION).choices[0].message.content
        api.log_line("POST /v1/chat/completions")
        piece = "0123456789abcdef" * 512  # 8 KB
        llm_server.script("agg", Reply(text=piece * 8192, pieces=[piece] * 8192))
        before = rss_mb(api.proc.pid)
        body = json.dumps({"model": "wire", "messages": QUESTION, "stream": True}).encode()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(address(api))
        sock.sendall(completion_head(api, body) + b"\r\n\r\n" + body)  # and never reads a byte
        upstream = llm_server.wait_for_request("agg", timeout=WAIT)
        line = api.log_line("POST /v1/chat/completions")
        assert "(client not reading for 2s)" in line, line
        # The turn was cancelled: its upstream stream closed before the provider could send the whole reply.
        assert upstream.finished.wait(WAIT) and upstream.disconnected
        grown = rss_mb(api.proc.pid) - before
        print(f"RSS {before:.1f} MB before, grown by {grown:.1f} MB")
        assert grown < 16
        sock.close()
        # The server goes on serving.
        llm_server.script("agg", Reply(text="fine again"))
        assert client(api).chat.completions.create(model="wire", messages=QUESTION).choices[0].message.content
    finally:
        api.stop()


def test_a_client_that_reads_slowly_gets_the_whole_reply(home, llm_server):
    """Backpressure waits for a slow reader: the reply arrives whole, in order, however it is read."""
    configure(home, llm_server)
    api = start_api(home, "--send-timeout", "30")
    try:
        piece = "slow-reader-" * 700  # 8.4 KB
        pieces = [f"{n:05d}{piece}" for n in range(4000)]  # 34 MB: far more than every buffer on the way holds
        llm_server.script("agg", Reply(text="".join(pieces), pieces=pieces))
        stream = client(api).chat.completions.create(model="wire", messages=QUESTION, stream=True)
        text, finish = [], None
        for n, chunk in enumerate(stream):
            if n == 1:
                upstream = llm_server.wait_for_request("agg", timeout=WAIT)
                assert not upstream.finished.is_set()  # the provider waits for this client too
            if chunk.choices:
                text.append(chunk.choices[0].delta.content or "")
                finish = chunk.choices[0].finish_reason or finish
        assert "".join(text) == "".join(pieces) and finish == "stop"
    finally:
        api.stop()
