"""`moa-chat api` against forged, slow and greedy clients: the real process on a free port, the scripted provider
behind it, raw sockets where a client misbehaves below what an HTTP library lets one do."""

from __future__ import annotations

import json
import socket

import pytest
from api_helpers import QUESTION, ApiProcess, client
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
