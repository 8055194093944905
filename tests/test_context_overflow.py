"""An overflow is recognised in each family's words and numbers, and raised as a ContextOverflow (never as a
network or protocol failure), on the real wire through the openai SDK."""

from __future__ import annotations

import json

import pytest
from moa_chat.config import load_config_text
from moa_chat.llm import ChatRequest, ContextOverflow, LLMCallError, call_llm_request, overflow_in
from moa_chat.llm.overflow import Overflow, parse_overflow
from moa_chat.providers.loopback_server import Reply
from moa_chat.providers.loopback_windows import ModelWindow, loopback_tokens, prompt_tokens
from scripted_server import ScriptedServer

LONG = "word " * 1200  # 1,200 loopback tokens, and a few around them

# (status, the error object as the SDK keeps it, the window, the prompt, the answer's share)
WORDINGS = [
    (
        400,
        {
            "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in "
            "130412 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        },
        128000,
        130412,
        None,
    ),
    (
        400,
        {
            "message": "This model's maximum context length is 65536 tokens. However, you requested 70,000 tokens "
            "(66000 in the messages, 4000 in the completion). Please reduce the length of the messages or completion.",
            "code": "context_length_exceeded",
        },
        65536,
        66000,
        4000,
    ),
    (
        400,
        {
            "message": "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 280000 "
            "tokens. Please reduce the length of the messages.",
            "code": "context_length_exceeded",
        },
        272000,
        280000,
        None,
    ),
    (
        400,
        {
            "code": 400,
            "message": "request (9100 tokens) exceeds the available context size (8192 tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 9100,
            "n_ctx": 8192,
        },
        8192,
        9100,
        None,
    ),
    (
        400,
        {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "invalid_request_error",
        },
        None,
        None,
        None,
    ),
    (
        500,
        {"message": "Requested tokens (9100) exceed context window of 8192", "type": "internal_server_error"},
        8192,
        9100,
        None,
    ),
    (
        400,
        {
            "message": "This model's maximum context length is 4096 tokens. However, your request has 5000 input "
            "tokens. Please reduce the length of the input messages.",
            "type": "BadRequestError",
            "code": 400,
        },
        4096,
        5000,
        None,
    ),
    (
        400,
        {
            "message": "'max_tokens' or 'max_completion_tokens' is too large: 1000. This model's maximum context "
            "length is 4096 tokens and your request has 3800 input tokens (1000 > 4096 - 3800).",
            "code": 400,
        },
        4096,
        3800,
        1000,
    ),
    (
        400,
        {
            "message": "This endpoint's maximum context length is 163840 tokens. However, you requested about 170000 "
            "tokens (165000 of text input, 5000 in the output). Please reduce the length of either one, or use the "
            '"middle-out" transform to compress your prompt automatically.',
            "code": 400,
        },
        163840,
        165000,
        5000,
    ),
    (
        400,
        {"type": "invalid_request_error", "message": "prompt is too long: 208310 tokens > 200000 maximum"},
        200000,
        208310,
        None,
    ),
    (
        400,
        {"message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."},
        1048576,
        1200000,
        None,
    ),
    (
        400,
        {"message": "This model's maximum prompt length is 131072 but the request contains 140000 tokens."},
        131072,
        140000,
        None,
    ),
    (
        400,
        {
            "message": "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum "
            "context length"
        },
        32768,
        40000,
        None,
    ),
    (
        400,
        {"message": "Please reduce the length of the messages or completion.", "code": "context_length_exceeded"},
        None,
        None,
        None,
    ),
    (None, {"message": "This endpoint's maximum context length is 16384 tokens", "code": 400}, 16384, None, None),
]


@pytest.mark.parametrize(("status", "error", "window", "prompt", "output"), WORDINGS)
def test_each_familys_wording_gives_its_numbers(status, error, window, prompt, output):
    assert parse_overflow(status, error, "") == Overflow(window, prompt, output)
    # The same, when only the SDK's message text holds it.
    assert parse_overflow(status, None, f"Error code: {status} - {json.dumps({'error': error})}") == Overflow(
        window, prompt, output
    )


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (429, "Rate limit reached: Limit 6000, Requested 7000 tokens. This model's maximum context length is 8192"),
        (413, "Request too large for model llama-3.3-70b on tokens per minute (TPM): Limit 6000, Requested 7200"),
        (400, "Invalid 'messages[2].content': string too long. Expected a string with maximum length 10485760"),
        (401, "Incorrect API key provided"),
        (500, "the request exceeds the available context size somewhere upstream"),
        (404, "model 'gpt-9' not found"),
    ],
)
def test_other_errors_are_not_overflows(status, message):
    assert parse_overflow(status, {"message": message}, "") is None


@pytest.fixture
def windows_server():
    server = ScriptedServer(
        windows={
            "gpt": ModelWindow(1000, "openai"),
            "llama": ModelWindow(1000, "llama.cpp"),
            "smol": ModelWindow(1000, "llama-cpp-python"),
            "routed": ModelWindow(1000, "openrouter"),
            "claude": ModelWindow(1000, "anthropic"),
            "served": ModelWindow(1000, "vllm"),
            "fast": ModelWindow(1000, "groq"),
            "pulled": ModelWindow(1000, "ollama"),
        }
    )
    yield server
    server.stop()


def config_for(server: ScriptedServer):
    return load_config_text(f"providers:\n  wire:\n    base_url: {server.base_url}\n    max_retries: 0\n")


def send(config, model: str, content: str, **fields) -> object:
    request = ChatRequest(
        model=model, provider="wire", config=config, messages=[{"role": "user", "content": content}], **fields
    )
    return call_llm_request(request)


@pytest.mark.parametrize(
    ("model", "window", "said_prompt"),
    [
        ("gpt", 1000, True),
        ("llama", 1000, True),
        ("smol", 1000, True),
        ("claude", 1000, True),
        ("served", 1000, True),
        ("fast", None, False),
    ],
)
def test_a_request_over_the_window_raises_a_context_overflow_with_the_servers_numbers(
    windows_server, model, window, said_prompt
):
    config = config_for(windows_server)
    with pytest.raises(ContextOverflow) as caught:
        send(config, model, LONG)
    error = caught.value
    sent = windows_server.requests_for(model)[-1]
    assert sent.refused and sent.prompt_tokens == prompt_tokens(sent.body) > 1000
    assert (error.window, error.prompt_tokens) == (window, sent.prompt_tokens if said_prompt else None)
    assert error.status == 400 and not error.transient and error.retry_after is None
    assert error.provider == "wire" and error.model == model
    if window is None:
        assert (
            error.reason == "the conversation is longer than the model's context window (the provider did not "
            "say its window)"
        )
    else:
        assert error.reason == (
            f"the conversation is longer than the model's context window ({sent.prompt_tokens:,} tokens sent, "
            "window 1,000 tokens)"
        )
    assert "connect" not in str(error) and "network" not in str(error)


def test_a_prompt_that_fits_but_not_with_its_answer_says_both(windows_server):
    config = config_for(windows_server)
    content = "word " * 900
    with pytest.raises(ContextOverflow) as caught:
        send(config, "routed", content, sampling=_sampling(max_tokens=300))
    sent = windows_server.requests_for("routed")[-1].prompt_tokens
    assert (caught.value.window, caught.value.prompt_tokens, caught.value.output_tokens) == (1000, sent, 300)
    assert f"({sent:,} tokens sent and 300 asked for the answer, window 1,000 tokens)" in caught.value.reason
    # Without max_tokens the same prompt fits: answered.
    send(config, "routed", content)


def test_a_request_within_the_window_is_answered_and_ollama_never_refuses(windows_server):
    config = config_for(windows_server)
    assert send(config, "gpt", "a short question").choices[0].message.content == "ok from gpt"
    assert send(config, "pulled", LONG).choices[0].message.content == "ok from pulled"  # Ollama cuts, silently
    assert windows_server.requests_for("pulled")[-1].prompt_tokens > 1000


def test_the_servers_usage_is_its_own_count_of_the_prompt(windows_server):
    config = config_for(windows_server)
    response = send(config, "gpt", "How many tokens is this sentence, counted by the server?")
    assert response.usage.prompt_tokens == windows_server.requests_for("gpt")[-1].prompt_tokens
    assert loopback_tokens("counted, by the server") == 6  # "counte" "d" "," "by" "the" "server"


def test_llama_cpp_pythons_stream_over_its_window_ends_empty_and_the_connection_is_reset(windows_server):
    """What llama-cpp-python's server does with a streamed prompt past n_ctx: a 200, an event stream with
    nothing in it, and the connection closed with a reset. Nothing in it says why: the `local` provider knows
    its window and checks before sending."""
    config = config_for(windows_server)
    stream = send(config, "smol", LONG, stream=True)
    assert list(stream) == []
    sent = windows_server.requests_for("smol")[-1]
    assert sent.refused and sent.finished.wait(5)


def test_an_overflow_reported_mid_stream_is_recognised(windows_server):
    """OpenRouter reports an upstream's refusal as an error event in the stream."""
    windows_server.script(
        "mid",
        Reply(
            text="",
            stream_error="This endpoint's maximum context length is 16384 tokens. However, you "
            "requested about 20000 tokens (19000 of text input, 1000 in the output).",
        ),
    )
    config = config_for(windows_server)
    with pytest.raises(Exception) as caught:
        list(send(config, "mid", "hello", stream=True))
    assert overflow_in(caught.value) == Overflow(16384, 19000, 1000)


def test_other_failures_stay_llm_call_errors(windows_server):
    windows_server.script("broken", Reply(status=503, error="upstream overloaded"))
    config = config_for(windows_server)
    with pytest.raises(LLMCallError) as caught:
        send(config, "broken", "hi")
    assert not isinstance(caught.value, ContextOverflow)
    assert caught.value.transient and caught.value.status == 503


def _sampling(**fields):
    from moa_chat.llm import Sampling

    return Sampling(**fields)
