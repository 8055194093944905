"""The engine reads an SDK stream one level down (llm.stream_chunks): each SSE event's JSON as a plain dict,
not a model object per chunk. What it reads, and how it fails, must be what the SDK's own iteration gives:
each case here reads the same scripted answer both ways, through the real SDK and a real socket."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from moa_chat import llm
from moa_chat.engine import TurnEnv
from moa_chat.engine.calls import ModelCall
from moa_chat.engine.panel import Seat
from moa_chat.engine.reading import Reading
from moa_chat.llm.stream import StreamAssembler, stream_chunks
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall

QUESTION = [{"role": "user", "content": "hi"}]


def _open(wire_config, llm_server, reply: Reply) -> Any:
    config = wire_config()
    llm_server.script("m", reply)
    return llm.call_llm(
        provider="wire",
        model="m",
        config=config,
        stream=True,
        stream_options={"include_usage": True},
        messages=QUESTION,
    )


def _both(wire_config, llm_server, reply: Reply) -> tuple[list[Any], list[Any]]:
    """The same answer read by the SDK (model objects, as dicts) and by stream_chunks."""
    sdk = [chunk.model_dump(exclude_unset=True) for chunk in _open(wire_config, llm_server, reply)]
    plain = list(stream_chunks(_open(wire_config, llm_server, reply)))
    assert all(type(chunk) is dict for chunk in plain)
    return [_but_id(c) for c in sdk], [_but_id(c) for c in plain]


def _but_id(chunk: dict[str, Any]) -> dict[str, Any]:
    """A chunk without its completion id, which the server numbers per request."""
    return {key: value for key, value in chunk.items() if key != "id"}


@pytest.mark.parametrize(
    "reply",
    [
        Reply(text="Hello, streaming world."),
        Reply(text="Let me check.", tool_calls=[ScriptedToolCall("get_time", '{"tz": "UTC"}', id="c1")]),
        Reply(text="one two three four", pause_after=2, pause=0.2, keepalive=0.05),  # SSE comments between
        Reply(text="no envelope", bare_chunks=True),
    ],
    ids=["text", "tool-call", "keep-alive-comments", "bare-chunks"],
)
def test_plain_chunks_carry_what_the_sdks_objects_carry(wire_config, llm_server, reply: Reply) -> None:
    sdk, plain = _both(wire_config, llm_server, reply)
    assert plain == sdk
    assert plain[-1]["usage"]["completion_tokens"] > 0  # the usage chunk, then [DONE] ended the read


def _read_until_raised(wire_config, llm_server, reply: Reply, kind: type[Exception]) -> list[tuple[Any, int]]:
    """Reads the answer the SDK's way, then the engine's: each time, what it raised after how many chunks."""
    outcomes = []
    for read in (iter, stream_chunks):
        chunks = 0
        with pytest.raises(kind) as caught:
            for _chunk in read(_open(wire_config, llm_server, reply)):
                chunks += 1
        outcomes.append((caught.value, chunks))
    return outcomes


def test_an_error_sent_in_the_stream_raises_as_the_sdk_raises_it(wire_config, llm_server) -> None:
    reply = Reply(text="half an", stream_error="the upstream provider failed")
    sdk, plain = _read_until_raised(wire_config, llm_server, reply, openai.APIError)
    assert [(type(e), e.message, e.body, n) for e, n in (sdk, plain)] == [
        (openai.APIError, "the upstream provider failed", {"message": "the upstream provider failed", "code": 502}, 3)
    ] * 2


def test_a_connection_dropped_midway_raises_as_the_sdk_raises_it(wire_config, llm_server) -> None:
    reply = Reply(text="one two three four five six", drop_after=3)
    sdk, plain = _read_until_raised(wire_config, llm_server, reply, openai.APIConnectionError)
    assert (type(plain[0]), plain[1], type(plain[0].__cause__)) == (type(sdk[0]), sdk[1], type(sdk[0].__cause__))
    assert plain[1] == 4  # the role chunk and three words
    assert llm.closed_midway(plain[0])  # what the engine reports as a reply cut off


def test_a_clean_end_without_done_just_ends(wire_config, llm_server) -> None:
    sdk, plain = _both(wire_config, llm_server, Reply(text="one two three four", end_after=2))
    assert plain == sdk and len(plain) == 3  # the role chunk and two words; the engine calls that cut off


def test_a_stream_that_is_not_the_sdks_is_read_as_it_is() -> None:
    chunks = [{"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "stop"}]}]
    assert stream_chunks(chunks) is chunks


def test_the_engine_reads_plain_chunks(wire_config, llm_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """No model object is built per chunk on the thread that shares the GIL with the UI."""
    fed: list[type] = []
    feed = StreamAssembler.feed

    def spy(self: StreamAssembler, chunk: Any) -> str:
        fed.append(type(chunk))
        return feed(self, chunk)

    monkeypatch.setattr(StreamAssembler, "feed", spy)
    config = wire_config()
    llm_server.script("agg", Reply(text="the answer, in a few words"))
    slot = config.preset("wire").aggregator
    request = llm.ChatRequest(model="agg", messages=QUESTION, provider="wire", stream=True, config=config)
    call = ModelCall(TurnEnv(config), "aggregator", Seat(0, 1, slot, slot.label), request)
    texts: list[str] = []
    call.run(Reading(texts.append))
    assert "".join(texts) == "the answer, in a few words"
    assert call.assembler.finish_reason == "stop"
    assert fed and set(fed) == {dict}
