"""Counting tokens without a download: the estimate, its calibration per model (kept in the store), and the
model's own tokenizer where its server has one, asked on the real wire."""

from __future__ import annotations

import pytest
from moa_chat.config import Slot, load_config_text
from moa_chat.llm.exact_count import ServerTokenizer
from moa_chat.llm.tokens import (
    IMAGE_TOKENS,
    PER_MESSAGE,
    PER_REQUEST,
    PER_TOOL,
    PER_TOOL_CALL,
    Calibration,
    TokenCount,
    TokenCounter,
    estimate_messages,
    estimate_text,
)
from moa_chat.llm.windows import AskedWindows, WindowFinder
from moa_chat.providers.loopback_windows import ModelWindow, loopback_tokens
from moa_chat.store import SessionStore
from scripted_server import ScriptedServer

PROSE = (
    "When the river flooded in the spring of that year, the town did what it had always done: it waited. "
    "The old men outside the hardware store said the water would crest by Thursday."
)


def test_the_estimate_of_text():
    assert estimate_text("") == 0
    assert estimate_text("a") == 1
    assert estimate_text("hello world") == 2
    # Each kind of text at its own rate: English words, digits, CJK characters, a run of spaces.
    assert 30 <= estimate_text(PROSE) <= 45
    assert estimate_text(" 12345678") == 9  # a small vocabulary spells numbers digit by digit
    assert estimate_text("你好世界") == 7  # about two tokens a character
    assert estimate_text("a" + " " * 40 + "b") == 5  # a run of spaces is one token per sixteen
    # Additive, to within a token a piece: a conversation is estimated message by message.
    halves = [PROSE[:90], PROSE[90:]]
    assert abs(estimate_text(PROSE) - sum(estimate_text(half) for half in halves)) <= 2


def test_the_estimate_of_a_request_adds_the_templates_tokens_tool_calls_tools_and_images():
    user = {"role": "user", "content": PROSE}
    assert estimate_messages([user]) == PER_REQUEST + PER_MESSAGE + estimate_text(PROSE)
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}
    calling = {"role": "assistant", "content": None, "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "the file's text"}
    expected_call = PER_TOOL_CALL + estimate_text("read_file") + estimate_text('{"path": "a.txt"}')
    assert estimate_messages([user, calling, result]) == (
        PER_REQUEST + 3 * PER_MESSAGE + estimate_text(PROSE) + expected_call + estimate_text("the file's text")
    )
    tool = {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}
    assert estimate_messages([user], [tool]) > estimate_messages([user]) + PER_TOOL
    picture = {
        "role": "user",
        "content": [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "data:"}}],
    }
    assert estimate_messages([picture]) == PER_REQUEST + PER_MESSAGE + estimate_text("what is this?") + IMAGE_TOKENS


def test_a_calibration_follows_the_models_own_counts():
    fresh = Calibration()
    assert (fresh.ratio, fresh.samples, fresh.scaled(100)) == (1.0, 0, 100)
    assert fresh.observed(40, 80) is fresh  # too small a request to say much
    assert fresh.observed(1000, 9000) is fresh  # no tokenizer counts nine times the estimate: another count
    once = fresh.observed(1000, 800, now=5.0)
    assert (once.ratio, once.samples, once.updated) == (0.8, 1, 5.0)
    twice = once.observed(1000, 900)
    assert twice.ratio == pytest.approx(0.85)  # a running mean at first
    settled = twice
    for _ in range(40):
        settled = settled.observed(1000, 600)
    assert settled.ratio == pytest.approx(0.6, abs=0.01)  # then the latest requests weigh most
    assert Calibration(0.6, 3).scaled(1001) == 601  # rounded up: a count is never short
    assert settled.scaled(0) == 0


def test_calibrations_are_kept_in_the_store_so_a_later_process_starts_calibrated(home):
    store = SessionStore()
    counter = TokenCounter(store.model_facts)
    assert counter.calibration("openrouter", "deepseek/deepseek-chat") == Calibration()
    after = counter.observe("openrouter", "deepseek/deepseek-chat", 2000, 1500)
    assert after.ratio == 0.75
    messages = [{"role": "user", "content": PROSE}]
    estimated = estimate_messages(messages)
    assert counter.count_messages("openrouter", "deepseek/deepseek-chat", messages) == TokenCount(
        -(-estimated * 3 // 4), False
    )
    assert counter.count_messages("openai", "gpt-4o", messages) == TokenCount(estimated, False)  # another model
    store.close()

    later = TokenCounter(SessionStore().model_facts)
    kept = later.calibration("openrouter", "deepseek/deepseek-chat")
    assert (kept.ratio, kept.samples) == (0.75, 1)
    assert later.calibration("openrouter", "another") == Calibration()


@pytest.fixture
def counting_server():
    server = ScriptedServer(
        windows={"smol": ModelWindow(8192, "llama-cpp-python"), "llama": ModelWindow(8192, "llama.cpp")}
    )
    yield server
    server.stop()


def tokenizer_for(server: ScriptedServer, kind, model: str) -> ServerTokenizer:
    import openai

    client = openai.OpenAI(base_url=server.base_url, api_key="not-needed", max_retries=0)
    return ServerTokenizer(client, server.base_url, kind, model)


@pytest.mark.parametrize(
    ("kind", "model", "endpoint"),
    [("llama-cpp-python", "smol", "/extras/tokenize/count"), ("llama.cpp", "llama", "/tokenize")],
)
def test_a_servers_own_tokenizer_counts_exactly_and_each_text_once(counting_server, kind, model, endpoint):
    tokenizer = tokenizer_for(counting_server, kind, model)
    assert tokenizer.count(PROSE) == loopback_tokens(PROSE)
    assert tokenizer.count(PROSE) == loopback_tokens(PROSE)
    assert tokenizer.count("") == 0
    asked = [path for path in counting_server.server.windows.asked if path == endpoint]
    # Once for the text; llama-cpp-python also once for no text at all (a BOS token it may count).
    assert len(asked) == (2 if kind == "llama-cpp-python" else 1)


def test_the_counted_prompt_of_a_request_is_the_servers_own_count(counting_server):
    tokenizer = tokenizer_for(counting_server, "llama-cpp-python", "smol")
    messages = [
        {"role": "system", "content": "You advise."},
        {"role": "user", "content": PROSE},
        {"role": "assistant", "content": "It waited, as always."},
    ]
    counted = TokenCounter().count_messages("wire", "smol", messages, exact=tokenizer)
    import openai

    client = openai.OpenAI(base_url=counting_server.base_url, api_key="x", max_retries=0)
    reported = client.chat.completions.create(model="smol", messages=messages).usage.prompt_tokens
    assert counted == TokenCount(reported, True)


def test_a_server_that_cannot_count_is_not_asked_again_and_the_estimate_takes_over(counting_server):
    tokenizer = tokenizer_for(counting_server, "llama.cpp", "llama")
    counting_server.stop()
    assert tokenizer.count(PROSE) is None
    assert tokenizer.failure and "APIConnectionError" in tokenizer.failure
    counted = TokenCounter().count_text("wire", "llama", PROSE, exact=tokenizer)
    assert counted == TokenCount(estimate_text(PROSE), False)


def test_the_finder_offers_a_llama_cpp_servers_tokenizer_once_it_has_found_one(counting_server):
    config = load_config_text(f"providers:\n  wire:\n    base_url: {counting_server.base_url}\n")
    finder = WindowFinder(config, asked=AskedWindows())
    slot = Slot("wire", "llama")
    assert finder.tokenizer(slot) is None  # nothing asked yet: nothing known of its server
    assert finder.window(slot).tokens == 8192
    tokenizer = finder.tokenizer(slot)
    assert tokenizer is not None and tokenizer.kind == "llama.cpp"
    assert tokenizer.count(PROSE) == loopback_tokens(PROSE)
    assert finder.tokenizer(slot) is tokenizer
    assert finder.tokenizer(Slot("wire", "smol")) is None  # llama-cpp-python's /models says nothing of itself
