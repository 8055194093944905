"""`moa-chat api`'s `usage` is what the providers reported, summed over every call of the turn: null when none
reported any (llama.cpp's server streams none), and marked partial when some did not, never an invented 0."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from api_helpers import QUESTION, ApiProcess, client, configure, start_api
from moa_chat.providers.loopback_server import Reply
from scripted_server import ScriptedServer


@pytest.fixture
def api(home: Path, llm_server: ScriptedServer) -> Iterator[ApiProcess]:
    configure(home, llm_server)
    server = start_api(home)
    yield server
    server.stop()


def test_no_call_reported_usage_so_the_response_has_none(api: ApiProcess, llm_server: ScriptedServer) -> None:
    for model in ("ref-a", "ref-b", "ref-c", "agg"):
        llm_server.script(model, Reply(text=f"from {model}", usage_chunk=False))  # as llama.cpp's server streams
    response = client(api).chat.completions.create(model="wire", messages=QUESTION)
    assert response.usage is None
    assert response.model_extra["moa_chat"]["usage_complete"] is False
    stream = client(api).chat.completions.create(
        model="wire", messages=QUESTION, stream=True, stream_options={"include_usage": True}
    )
    assert list(stream)[-1].usage is None


def test_a_sum_that_leaves_calls_out_says_so(api: ApiProcess, llm_server: ScriptedServer) -> None:
    llm_server.script("ref-b", Reply(text="from ref-b", usage_chunk=False))
    response = client(api).chat.completions.create(model="wire", messages=QUESTION)
    sent = [r.usage_sent["total_tokens"] for r in llm_server.requests if r.usage_sent]
    assert len(sent) == 3
    assert response.usage is not None and response.usage.total_tokens == sum(sent)
    assert response.usage.model_extra == {"partial": True, "calls_without_usage": 1}
    assert f" {response.usage.total_tokens:,}+ tokens" in api.log_line("POST /v1/chat/completions")
    assert response.model_extra["moa_chat"]["usage_complete"] is False


def test_every_call_reported_so_the_sum_is_whole(api: ApiProcess, llm_server: ScriptedServer) -> None:
    response = client(api).chat.completions.create(model="wire", messages=QUESTION)
    assert response.usage is not None and not response.usage.model_extra
    assert response.model_extra["moa_chat"]["usage_complete"] is True
