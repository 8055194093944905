"""`moa-chat api` when things go wrong or someone is not allowed: error mapping, auth, origins, the body cap,
a client that leaves, the cap on turns in flight, and stopping with streams in flight. The real process,
the scripted provider behind it; every wait is on an event (a log line, a scripted server's request)."""

from __future__ import annotations

import json
import signal
import socket
import stat
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from api_helpers import QUESTION, ApiProcess, client, configure, start_api
from moa_chat.providers.loopback_server import Reply
from scripted_server import ScriptedServer

WAIT = 30.0


def post(api: ApiProcess, body: bytes, headers: dict[str, str], method: str = "POST") -> tuple[int, dict, dict]:
    request = urllib.request.Request(f"{api.base_url}/chat/completions", data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            data = response.read()
            return response.status, dict(response.headers), json.loads(data) if data else {}
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read() or b"{}")


def open_stream(api: ApiProcess, messages: list[dict[str, object]] = QUESTION) -> socket.socket:
    """A streamed request on a raw socket, left open: the test closes it to leave mid-turn."""
    body = json.dumps({"model": "wire", "messages": messages, "stream": True}).encode()
    host, port = api.root.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=WAIT)
    sock.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (api.root.removeprefix("http://").encode(), api.token.encode(), len(body), body)
    )
    return sock


# --------------------------------------------------------------------------- who may call


def test_a_request_without_the_token_or_with_a_wrong_one_is_401(api):
    status, _headers, body = post(api, b"{}", {"Content-Type": "application/json"})
    assert status == 401 and body["error"]["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=api.base_url, api_key="moa-wrong", max_retries=0).models.list()
    status, _headers, body = post(api, b"{}", {"Authorization": f"Basic {api.token}"})
    assert status == 401


def test_a_page_from_another_origin_is_refused_even_with_the_token(api):
    headers = {"Authorization": f"Bearer {api.token}", "Origin": "https://evil.example"}
    status, response_headers, body = post(api, json.dumps({"messages": QUESTION}).encode(), headers)
    assert status == 403 and body["error"]["code"] == "origin_refused"
    assert "Access-Control-Allow-Origin" not in response_headers
    status, _headers, _body = post(api, b"", {"Origin": "https://evil.example"}, method="OPTIONS")
    assert status == 403


def test_cors_lets_the_named_origin_in(home, llm_server):
    configure(home, llm_server)
    api = start_api(home, "--cors", "http://localhost:3000")
    try:
        allowed = "http://localhost:3000"
        status, headers, _body = post(api, b"", {"Origin": allowed, "Access-Control-Request-Method": "POST"}, "OPTIONS")
        assert status == 204 and headers["Access-Control-Allow-Origin"] == allowed
        assert "Authorization" in headers["Access-Control-Allow-Headers"]
        body = json.dumps({"model": "wire", "messages": QUESTION}).encode()
        status, headers, answer = post(api, body, {"Origin": allowed, "Authorization": f"Bearer {api.token}"})
        assert status == 200 and headers["Access-Control-Allow-Origin"] == allowed
        assert answer["choices"][0]["message"]["content"] == "ok from agg"
        status, _headers, _body = post(
            api, body, {"Origin": "http://localhost:3001", "Authorization": f"Bearer {api.token}"}
        )
        assert status == 403
    finally:
        api.stop()


def test_a_body_over_the_cap_is_413(api, llm_server):
    huge = json.dumps({"model": "wire", "messages": [{"role": "user", "content": "x" * (5 * 1024 * 1024)}]})
    status, _headers, body = post(api, huge.encode(), {"Authorization": f"Bearer {api.token}"})
    assert status == 413 and body["error"]["code"] == "request_too_large"
    assert llm_server.requests == []


def test_a_generated_token_is_printed_once_and_kept_0600(home, llm_server):
    configure(home, llm_server)
    first = start_api(home, token=None)
    try:
        path = home / "api-token"
        token = path.read_text().strip()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert any(token in line and "shown this once" in line for line in first.banner)
        first.token = token
        assert client(first).models.list().data[0].id == "wire"
    finally:
        first.stop()
    second = start_api(home, token=None)
    try:
        assert not any(token in line for line in second.banner)
        assert any(f"kept in {path}" in line for line in second.banner)
    finally:
        second.stop()


# --------------------------------------------------------------------------- failures, mapped


def test_an_upstream_failure_before_any_text_is_502_naming_slot_and_provider(api, llm_server):
    llm_server.script("agg", Reply(status=500, error="the model crashed"))
    for stream in (False, True):
        with pytest.raises(openai.InternalServerError) as caught:
            response = client(api).chat.completions.create(model="wire", messages=QUESTION, stream=stream)
            list(response) if stream else None
        assert caught.value.status_code == 502
        assert caught.value.body["message"] == (
            "the aggregator wire:agg (provider wire) failed: HTTP 500: the model crashed"
        )
    assert "(upstream_error)" in api.log_line(" 502 ")


def test_a_time_limit_is_504(home, llm_server):
    configure(home, llm_server, "network:\n  first_token_timeout: 0.5\n")
    api = start_api(home)
    try:
        llm_server.script("agg", Reply(text="too late", delay=60))
        with pytest.raises(openai.APIStatusError) as caught:
            client(api).chat.completions.create(model="wire", messages=QUESTION)
        assert caught.value.status_code == 504 and "no answer began within 0.5 s" in caught.value.body["message"]
    finally:
        api.stop()


def test_a_failure_mid_stream_ends_with_an_error_event_never_stop(api, llm_server):
    llm_server.script("agg", Reply(text="one two three four five", drop_after=2))
    stream = client(api).chat.completions.create(model="wire", messages=QUESTION, stream=True)
    seen = []
    with pytest.raises(openai.APIError) as caught:
        for chunk in stream:
            seen.append(chunk)
    assert "".join(c.choices[0].delta.content or "" for c in seen if c.choices) == "one two"
    assert all(c.choices[0].finish_reason is None for c in seen if c.choices)
    assert "cut off" in str(caught.value) and "wire:agg" in str(caught.value)


@pytest.fixture
def retrying_api(home: Path, llm_server: ScriptedServer) -> Iterator[ApiProcess]:
    """The API with retries on (the shared wire config switches them off)."""
    configure(home, llm_server)
    (home / "config.yaml").write_text((home / "config.yaml").read_text().replace("max_retries: 0", "max_retries: 2"))
    server = start_api(home)
    yield server
    server.stop()


CUT_AFTER_TEXT = Reply(text="one two three four five", end_after=2)  # "one two", then an end with no finish


def test_a_whole_reply_whose_stream_is_cut_after_text_is_asked_again(retrying_api, llm_server):
    """The client of a non-streamed request has seen nothing: the cut-off reply is asked for again, as `ask`
    into a pipe does, and only the whole one is answered."""
    llm_server.script("agg", [CUT_AFTER_TEXT, Reply(text="the whole reply")])
    answer = client(retrying_api).chat.completions.create(model="wire", messages=QUESTION)
    assert answer.choices[0].message.content == "the whole reply"
    assert answer.choices[0].finish_reason == "stop"
    assert len(llm_server.requests_for("agg")) == 2


def test_a_streamed_reply_cut_after_text_is_never_asked_again(retrying_api, llm_server):
    """The client of a stream has the text already: a second reply would follow it, glued on."""
    llm_server.script("agg", [CUT_AFTER_TEXT, Reply(text="the whole reply")])
    stream = client(retrying_api).chat.completions.create(model="wire", messages=QUESTION, stream=True)
    seen = []
    with pytest.raises(openai.APIError) as caught:
        for chunk in stream:
            seen.append(chunk)
    assert "".join(c.choices[0].delta.content or "" for c in seen if c.choices) == "one two"
    assert "cut off" in str(caught.value)
    assert len(llm_server.requests_for("agg")) == 1


def test_provider_keys_never_reach_responses_or_the_log(home, llm_server):
    secret = "sk-live-0123456789abcdefSECRET"
    configure(home, llm_server)
    text = (
        (home / "config.yaml")
        .read_text()
        .replace("    max_retries: 0", "    max_retries: 0\n    api_key_env: WIRE_KEY", 1)
    )
    (home / "config.yaml").write_text(text)
    api = start_api(home, env={"WIRE_KEY": secret})
    try:
        llm_server.script("agg", Reply(status=401, error=f"invalid key {secret} for this org"))
        with pytest.raises(openai.APIStatusError) as caught:
            client(api).chat.completions.create(model="wire", messages=QUESTION)
        assert secret not in json.dumps(caught.value.body) and "[redacted]" in caught.value.body["message"]
        assert llm_server.requests_for("agg")[0].authorization  # the key did go to the provider
    finally:
        api.stop()
    log = "\n".join(api.banner) + "\n" + "\n".join(iter(api.lines.get_nowait, "<eof>"))
    assert secret not in log


# --------------------------------------------------------------------------- load and cancellation


def test_a_client_that_leaves_mid_stream_closes_the_upstream_stream(api, llm_server):
    llm_server.script("agg", Reply(text="one two three", pause_after=1, pause=120))
    stream = client(api).chat.completions.create(model="wire", messages=QUESTION, stream=True)
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    upstream = llm_server.wait_for_request("agg")
    assert upstream.stalled.wait(WAIT)
    stream.close()
    assert upstream.finished.wait(WAIT) and upstream.disconnected
    assert "(client left)" in api.log_line("POST /v1/chat/completions")


def test_a_client_that_leaves_while_the_references_run_cancels_them(api, llm_server):
    # The reference's stream is open (headers sent, as providers send them at once) and silent.
    llm_server.script("ref-a", Reply(text="slow", pause_after=0, pause=120))
    sock = open_stream(api)
    upstream = llm_server.wait_for_request("ref-a")
    assert upstream.stalled.wait(WAIT)
    sock.close()
    assert upstream.finished.wait(WAIT) and upstream.disconnected
    api.log_line("(client left)")
    assert llm_server.requests_for("agg") == []  # the turn ended: the aggregator was never asked


def test_over_the_cap_on_turns_in_flight_is_429_with_retry_after(home, llm_server):
    configure(home, llm_server)
    api = start_api(home, "--max-turns", "1")
    try:
        llm_server.script("ref-a", Reply(text="slow", delay=120))
        sock = open_stream(api)
        assert llm_server.wait_for_request("ref-a").stalled.wait(WAIT)
        with pytest.raises(openai.RateLimitError) as caught:
            client(api).chat.completions.create(model="wire", messages=QUESTION)
        assert caught.value.response.headers["Retry-After"] == "1"
        assert caught.value.body["code"] == "rate_limit_exceeded"
        sock.close()
        api.log_line("(client left)")
        llm_server.script("ref-a", Reply(text="fast now"))
        assert client(api).chat.completions.create(model="wire", messages=QUESTION).choices[0].message.content
    finally:
        api.stop()


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_ends_streams_in_flight_with_an_error_event_and_stops(api, llm_server, number):
    """SIGTERM, SIGHUP (the terminal closed) and Ctrl+C stop the server alike, and it exits as `ask` does."""
    llm_server.script("agg", Reply(text="one two three", pause_after=1, pause=120))
    stream = client(api).chat.completions.create(model="wire", messages=QUESTION, stream=True)
    chunks = iter(stream)
    for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    upstream = llm_server.wait_for_request("agg")
    assert upstream.stalled.wait(WAIT)
    api.proc.send_signal(number)
    with pytest.raises(openai.APIError) as caught:
        for chunk in chunks:
            assert not (chunk.choices and chunk.choices[0].finish_reason)
    assert "the server is stopping" in str(caught.value)
    assert api.proc.wait(WAIT) == (130 if number == signal.SIGINT else 128 + number)
    assert upstream.finished.wait(WAIT) and upstream.disconnected
    api.log_line(f"moa-chat api: stopping ({signal.Signals(number).name})")
    api.log_line("moa-chat api: stopped")


def test_progress_streams_as_reasoning_content_before_the_reply(api, llm_server):
    stream = client(api).chat.completions.create(
        model="wire", messages=QUESTION, stream=True, extra_body={"moa_progress": True}
    )
    kinds = []
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if (delta.model_extra or {}).get("reasoning_content"):
            kinds.append(("progress", delta.model_extra["reasoning_content"]))
        elif delta.content:
            kinds.append(("text", delta.content))
    progress = "".join(text for kind, text in kinds if kind == "progress")
    assert "wire:ref-a answered" in progress and "wire:agg writes the reply (3 of 3" in progress
    first_text = next(n for n, (kind, _) in enumerate(kinds) if kind == "text")
    assert all(kind == "progress" for kind, _ in kinds[:first_text])
    assert "".join(text for kind, text in kinds if kind == "text") == "ok from agg"


def test_a_model_name_with_escapes_and_line_breaks_stays_one_inert_log_line(api):
    with pytest.raises(openai.NotFoundError):
        client(api).chat.completions.create(model="evil\x1b[2J\nFAKE 200 line", messages=QUESTION)
    line = api.log_line("POST /v1/chat/completions")
    assert "\x1b" not in line and "404" in line and "FAKE 200 line" in line  # the same line, not a new one
