"""Retries and time limits over real HTTP: what is sent again, when, and what never is.

Every test talks to the loopback server through the real SDK. Time limits are set to fractions of a
second and the server's silences to many seconds, so a test passes by a wide margin on a loaded machine;
no test asserts how long anything took, only what happened and how often the server was asked.
"""

from __future__ import annotations

import socket
import textwrap
import threading

import pytest
from conftest import WIRE_CONFIG, write_config
from loop_helpers import tool_loop
from moa_chat.config import load_config
from moa_chat.engine import CallRetrying, ReferenceFinished
from moa_chat.providers.loopback_server import Reply
from waiting import wait_until

QUESTION = [{"role": "user", "content": "How do I reverse a list in Python?"}]


@pytest.fixture
def net_config(home, llm_server):
    """The `wire` preset with a `network:` section (and retries on, unlike the other wire tests)."""

    def make(network: str = "max_retries: 2", preset: str = ""):
        text = WIRE_CONFIG.format(
            base_url=llm_server.base_url,
            extra=textwrap.indent(textwrap.dedent(preset).strip(), "      ") if preset else "",
        ).replace("    max_retries: 0\n", "")
        text += "network:\n" + textwrap.indent(textwrap.dedent(network).strip(), "  ") + "\n"
        return load_config(write_config(home, text))

    return make


def run(config, events=None):
    return tool_loop(config, observer=(events.append if events is not None else None)).run(QUESTION)


def retries(events) -> list[CallRetrying]:
    return [e for e in events if isinstance(e, CallRetrying)]


def references_done() -> None:
    """Waits until no reference's worker runs (a kept thread carries its work's name while it works): each
    retry is its worker's, announced by a CallRetrying event before it is sent, and the references' SDK
    retries are off, so from here on none can start."""
    wait_until(
        lambda: not any(thread.name == "moa-reference" for thread in threading.enumerate()),
        "the references' workers to finish",
    )


# --------------------------------------------------------------------------- retried before the first token


def test_a_503_before_the_first_token_is_retried_and_the_user_is_told(net_config, llm_server):
    llm_server.script("agg", [Reply(status=503, error="overloaded"), Reply(text="the whole answer")])
    events: list = []
    result = run(net_config(), events)
    assert result.status == "ok" and result.text == "the whole answer"
    assert len(llm_server.requests_for("agg")) == 2
    [retry] = retries(events)
    assert (retry.role, retry.label, retry.attempt, retry.attempts) == ("aggregator", "wire:agg", 2, 3)
    assert retry.reason == "HTTP 503: overloaded"
    assert 0.375 <= retry.delay <= 0.5  # the first backoff, less up to 25 % jitter


def test_a_reference_is_retried_too(net_config, llm_server):
    llm_server.script("ref-b", [Reply(status=502), Reply(text="second time lucky")])
    events: list = []
    result = run(net_config(), events)
    [ref_b] = [r for r in result.references if r.label == "wire:ref-b"]
    assert ref_b.status == "ok" and ref_b.text == "second time lucky"
    assert [(r.role, r.index) for r in retries(events)] == [("reference", 1)]


def test_a_stream_that_ends_before_any_answer_is_retried(net_config, llm_server):
    llm_server.script("agg", [Reply(text="lost", end_after=0), Reply(text="found")])
    result = run(net_config())
    assert result.status == "ok" and result.text == "found"
    assert len(llm_server.requests_for("agg")) == 2


def test_a_connection_closed_before_any_answer_is_retried(net_config, llm_server):
    llm_server.script("agg", [Reply(text="lost", drop_after=0), Reply(text="found")])
    events: list = []
    result = run(net_config(), events)
    assert result.status == "ok" and result.text == "found"
    assert "the connection was closed before any reply arrived" in retries(events)[0].reason


def test_an_empty_answer_is_retried(net_config, llm_server):
    llm_server.script("agg", [Reply(text=""), Reply(text="now with words")])
    result = run(net_config())
    assert result.status == "ok" and result.text == "now with words"


def test_an_empty_answer_cut_by_max_tokens_is_not_retried(net_config, llm_server):
    llm_server.script("agg", Reply(text="", finish_reason="length"))
    result = run(net_config())
    assert result.status == "failed"
    assert result.error == (
        "wire:agg failed: returned an empty answer (finish reason: length): max_tokens was used up before any "
        "answer text"
    )
    assert len(llm_server.requests_for("agg")) == 1


def test_retries_are_bounded_and_the_last_error_is_shown(net_config, llm_server):
    llm_server.script("agg", Reply(status=500, error="still broken"))
    events: list = []
    result = run(net_config("max_retries: 2"), events)
    assert result.status == "failed"
    assert result.error == "wire:agg failed: HTTP 500: still broken"
    assert len(llm_server.requests_for("agg")) == 3
    assert [r.attempt for r in retries(events)] == [2, 3]


def test_a_client_error_is_not_retried(net_config, llm_server):
    llm_server.script("agg", Reply(status=400, error="bad request"))
    run(net_config())
    assert len(llm_server.requests_for("agg")) == 1


# --------------------------------------------------------------------------- never after it


def test_no_silent_retry_once_text_has_arrived(net_config, llm_server):
    llm_server.script("agg", [Reply(text="one two three four five", drop_after=2), Reply(text="another answer")])
    result = run(net_config())
    assert result.status == "cut_off"
    assert result.text == "one two"
    assert result.error.startswith("the reply from wire:agg was cut off: the connection was closed mid-reply")
    assert len(llm_server.requests_for("agg")) == 1


# --------------------------------------------------------------------------- Retry-After


def test_retry_after_is_honoured(net_config, llm_server):
    llm_server.script("agg", [Reply(status=429, error="slow down", headers={"Retry-After": "1"}), Reply(text="ok")])
    events: list = []
    result = run(net_config(), events)
    assert result.status == "ok"
    assert retries(events)[0].delay == 1.0
    first, second = llm_server.requests_for("agg")
    assert second.received_at - first.received_at >= 0.9  # it waited; how much longer does not matter


def test_retry_after_ms_is_honoured(net_config, llm_server):
    llm_server.script("agg", [Reply(status=429, headers={"retry-after-ms": "250"}), Reply(text="ok")])
    events: list = []
    assert run(net_config(), events).status == "ok"
    assert retries(events)[0].delay == 0.25


def test_a_retry_after_longer_than_the_limit_fails_at_once_saying_how_long(net_config, llm_server):
    llm_server.script("agg", Reply(status=429, error="Rate limit reached", headers={"Retry-After": "600"}))
    result = run(net_config("max_retry_wait: 30"))
    assert result.status == "failed"
    assert result.error == (
        "wire:agg failed: HTTP 429: Rate limit reached (rate limited; the provider asks to wait 10 min); not "
        "retried: that is longer than network: max_retry_wait (30 s)"
    )
    assert len(llm_server.requests_for("agg")) == 1


# --------------------------------------------------------------------------- time limits


def test_an_aggregator_that_never_answers_times_out(net_config, llm_server):
    llm_server.script("agg", Reply(text="too late", delay=60))
    result = run(net_config("first_token_timeout: 0.5"))
    assert result.status == "failed"
    assert result.error == "wire:agg failed: no answer began within 0.5 s (network: first_token_timeout)"
    assert len(llm_server.requests_for("agg")) == 1  # a time limit is not retried
    assert result.ledger.records[-1].status == "timeout"


def test_keep_alives_do_not_count_as_an_answer_beginning(net_config, llm_server):
    # Headers, an empty role chunk and a comment every 0.1 s, but no token for 60 s.
    llm_server.script("agg", Reply(text="too late", pause_after=0, pause=60, keepalive=0.1))
    result = run(net_config("first_token_timeout: 0.5"))
    assert result.status == "failed"
    assert "first_token_timeout" in result.error


def test_a_stream_that_stalls_mid_answer_is_cut_off(net_config, llm_server):
    llm_server.script("agg", Reply(text="one two three four", pause_after=2, pause=60))
    result = run(net_config("stall_timeout: 0.5"))
    assert result.status == "cut_off"
    assert result.text == "one two"
    assert result.error == (
        "the reply from wire:agg was cut off: the answer stalled: nothing arrived for 0.5 s (network: stall_timeout)"
    )


def test_keep_alives_keep_a_slow_stream_alive(net_config, llm_server):
    llm_server.script("agg", Reply(text="one two three four", pause_after=2, pause=1.5, keepalive=0.1))
    result = run(net_config("stall_timeout: 0.6"))
    assert result.status == "ok" and result.text == "one two three four"


def test_a_reference_past_its_first_token_limit_is_timed_out_not_retried(net_config, llm_server):
    llm_server.script("ref-a", Reply(text="never", delay=60))
    events: list = []
    result = run(net_config("first_token_timeout: 0.5\nmax_retries: 2"), events)
    [ref_a] = [r for r in result.references if r.label == "wire:ref-a"]
    assert (ref_a.status, ref_a.error) == ("timeout", "no answer began within 0.5 s (network: first_token_timeout)")
    assert result.status == "ok"
    references_done()
    assert [r for r in retries(events) if r.label == "wire:ref-a"] == []
    assert len(llm_server.requests_for("ref-a")) == 1


def test_a_dropped_reference_stays_dropped(net_config, llm_server):
    # Its reference_timeout passes while it waits; no retry may start behind the fan-out's back.
    llm_server.script("ref-a", Reply(status=503))
    llm_server.script("ref-b", Reply(text="slow", delay=60))
    events: list = []
    result = run(net_config("max_retries: 5\nfirst_token_timeout: off", preset="reference_timeout: 0.5"), events)
    statuses = {r.label: r.status for r in result.references}
    assert statuses["wire:ref-b"] == "timeout"
    references_done()
    assert [r for r in retries(events) if r.label == "wire:ref-b"] == []
    assert len(llm_server.requests_for("ref-b")) == 1


def test_a_provider_may_override_the_limits(home, llm_server):
    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="").replace(
        "    max_retries: 0\n", "    max_retries: 0\n    first_token_timeout: 0.5\n"
    )
    config = load_config(write_config(home, text + "network:\n  first_token_timeout: 300\n"))
    assert config.limits("wire").first_token_timeout == 0.5
    assert config.limits("openai").first_token_timeout == 300
    llm_server.script("agg", Reply(text="too late", delay=60))
    assert "first_token_timeout" in run(config).error


# --------------------------------------------------------------------------- what the messages say


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_refused_names_the_url_and_asks_whether_the_local_server_runs(home):
    port = _closed_port()
    config = load_config(
        write_config(
            home,
            f"""
            providers:
              ollama:
                base_url: http://127.0.0.1:{port}/v1
            moa:
              presets:
                wire:
                  reference_models: [{{provider: ollama, model: llama3}}]
                  aggregator: {{provider: ollama, model: llama3}}
            network:
              max_retries: 1
            """,
        )
    )
    events: list = []
    result = run(config, events)
    assert result.status == "failed"
    assert result.error == (
        f"ollama:llama3 failed: connection refused by http://127.0.0.1:{port}/v1 — is the ollama server running "
        "on this machine? (start it with `ollama serve`)"
    )
    # A refused connection is worth one more try: the server may be starting.
    assert [r.role for r in retries(events)] == ["reference", "aggregator"]
    assert result.references[0].error == result.error.removeprefix("ollama:llama3 failed: ")


def test_a_host_that_does_not_resolve_is_named_and_said_not_to_resolve(home):
    # .invalid never resolves (RFC 6761), so no network is needed for the lookup to fail.
    config = load_config(
        write_config(
            home,
            """
            providers:
              nowhere:
                base_url: http://no-such-host.invalid/v1
            moa:
              presets:
                wire:
                  reference_models: [{provider: nowhere, model: m}]
                  aggregator: {provider: nowhere, model: m}
            network:
              max_retries: 0
            """,
        )
    )
    result = run(config)
    assert result.status == "failed"
    assert result.error == (
        "nowhere:m failed: the host no-such-host.invalid could not be resolved (DNS): check base_url "
        "http://no-such-host.invalid/v1 and the network"
    )


def test_the_ask_command_says_it_is_retrying(net_config, llm_server, capsys):
    from moa_chat.cli import main

    net_config()
    llm_server.script("agg", [Reply(status=503, error="overloaded"), Reply(text="fine")])
    assert main(["ask", "--preset", "wire", "--no-save", "hello"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == "fine"
    assert "↻ wire:agg: HTTP 503: overloaded — retrying in 0." in captured.err
    assert "(attempt 2 of 3)" in captured.err


def test_reference_results_carry_the_retry_free_status(net_config, llm_server):
    # A reference retried into success is simply ok: the retry is news while it happens, not after.
    llm_server.script("ref-c", [Reply(status=503), Reply(text="fine")])
    events: list = []
    run(net_config(), events)
    finished = [e for e in events if isinstance(e, ReferenceFinished) and e.label == "wire:ref-c"]
    assert [f.status for f in finished] == ["ok"]


# --------------------------------------------------------------------------- in the TUI


async def test_the_sidebar_card_shows_a_retry_while_it_waits(net_config, llm_server):
    from moa_chat.tui.widgets.sidebar import ReferenceSidebar
    from tui_helpers import make_app, run_turn, wait_until

    llm_server.script("ref-a", [Reply(status=429, error="slow down", headers={"Retry-After": "2"}), Reply(text="ok")])
    app = make_app(net_config(), "wire")
    async with app.run_test(size=(120, 36)) as pilot:
        card = app.query_one(ReferenceSidebar).card(0)
        turn = pilot.app.run_worker(run_turn(pilot, "hello", timeout=30))
        await wait_until(pilot, lambda: card.retry is not None, describe="the retry note on ref-a's card")
        lines = card.render().plain.splitlines()
        assert lines[2].startswith("  ↻ retry 1/2 in ") and lines[2].endswith("s"), lines
        assert lines[3].startswith("  HTTP 429: slow down"), lines
        await turn.wait()
        assert card.status == "ok" and card.retry is None
        assert "retry" not in card.render().plain
