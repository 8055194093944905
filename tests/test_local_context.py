"""The token estimate held against the real local model's exact counts, and the local server's own overflow,
on the real wire. Skipped only when the `local` extra is not installed.

The figures asserted here are the ones docs/context.md states: the estimate and the tokenizer are both
deterministic, so each bound is a measurement, not a tolerance for noise."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from moa_chat.config import Slot, load_config_text
from moa_chat.llm import ChatRequest, ContextOverflow, call_llm_request
from moa_chat.llm.exact_count import ServerTokenizer
from moa_chat.llm.tokens import TokenCounter, estimate_messages, estimate_text
from moa_chat.llm.windows import WindowFinder
from moa_chat.providers.local import INSTALL_HINT, LOCAL_MODEL, N_CTX_ENV, LocalServer, extra_installed

pytestmark = pytest.mark.skipif(not extra_installed(), reason=f"the local extra is not installed: {INSTALL_HINT}")

CORPUS = Path(__file__).parent / "fixtures" / "token_corpus"
N_CTX = 4096
# The estimate's error against SmolLM2's count, as docs/context.md states it.
WHOLE_TEXTS = (-0.07, 0.10)  # each text of the corpus (500 to 3,600 characters)
PASSAGES = (-0.14, 0.17)  # each paragraph of 80 characters or more
CORPUS_TOTAL = 0.01  # the whole corpus
REQUESTS = (-0.05, 0.07)  # a conversation's estimate_messages against the prompt_tokens the server reports
COUNTED_REQUESTS = 2  # a conversation counted by the server's tokenizer, when it has a system message


@pytest.fixture(scope="module")
def local_server():
    server = LocalServer(n_ctx=N_CTX)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tokenizer(local_server) -> ServerTokenizer:
    import openai

    client = openai.OpenAI(base_url=local_server.base_url, api_key="not-needed", max_retries=0)
    return ServerTokenizer(client, local_server.base_url, "llama-cpp-python", LOCAL_MODEL)


def corpus() -> dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(CORPUS.iterdir())}


def test_the_corpus_is_varied():
    names = " ".join(corpus())
    for kind in (
        "prose_en",
        "prose_zh",
        "prose_ja_ko",
        "prose_ru",
        "prose_fr_de",
        "code_",
        "json_",
        "numbers_",
        "markdown_tables",
        "shell_log",
        "chat_emoji",
    ):
        assert kind in names


def test_the_estimate_is_within_its_stated_error_of_the_local_models_exact_counts(tokenizer):
    errors: dict[str, float] = {}
    passages: list[tuple[float, str]] = []
    exact_total = estimated_total = 0
    for name, text in corpus().items():
        exact = tokenizer.count(text)
        assert exact is not None, tokenizer.failure
        estimated = estimate_text(text)
        errors[name] = (estimated - exact) / exact
        exact_total += exact
        estimated_total += estimated
        for passage in re.split(r"\n\s*\n|\n(?=\S)", text):
            if len(passage) >= 80:
                counted = tokenizer.count(passage)
                assert counted
                passages.append(((estimate_text(passage) - counted) / counted, passage[:60]))
    low, high = WHOLE_TEXTS
    assert all(low <= error <= high for error in errors.values()), errors
    low, high = PASSAGES
    assert len(passages) >= 70
    assert all(low <= error <= high for error, _ in passages), sorted(passages)[:3] + sorted(passages)[-3:]
    assert abs(estimated_total - exact_total) / exact_total <= CORPUS_TOTAL


def conversations() -> list[list[dict[str, str]]]:
    """Two short conversations over six kinds of text (a busy CPU reads a few dozen tokens a second)."""
    texts = corpus()
    found = []
    for names in (
        ("prose_en.txt", "code_python.py.txt", "prose_zh.txt"),
        ("json_api.json.txt", "numbers_csv.txt", "markdown_tables.md.txt"),
    ):
        roles = ("user", "assistant", "user")
        messages = [{"role": role, "content": texts[name][:250]} for role, name in zip(roles, names, strict=True)]
        found.append([{"role": "system", "content": "You are terse."}, *messages])
    return found


def test_a_requests_estimate_and_its_server_count_against_the_prompt_tokens_the_server_reports(local_server, tokenizer):
    import openai

    client = openai.OpenAI(base_url=local_server.base_url, api_key="not-needed", max_retries=0)
    counter = TokenCounter()
    errors = []
    for messages in conversations():
        reported = client.chat.completions.create(model=LOCAL_MODEL, messages=messages, max_tokens=1).usage
        errors.append((estimate_messages(messages) - reported.prompt_tokens) / reported.prompt_tokens)
        counted = counter.count_messages("local", LOCAL_MODEL, messages, exact=tokenizer)
        assert counted.counted and abs(counted.tokens - reported.prompt_tokens) <= COUNTED_REQUESTS
    low, high = REQUESTS
    assert all(low <= error <= high for error in errors), errors
    # A conversation without a system message: SmolLM2's template adds one of its own ("You are a helpful AI
    # assistant named SmolLM, trained by Hugging Face"), which no count of the messages can know.
    bare = [{"role": "user", "content": "Name a primary colour."}]
    reported = client.chat.completions.create(model=LOCAL_MODEL, messages=bare, max_tokens=1).usage
    assert reported.prompt_tokens - counter.count_messages("local", LOCAL_MODEL, bare, exact=tokenizer).tokens == 22


def test_the_local_servers_overflow_is_a_context_overflow_naming_its_window(local_server, monkeypatch):
    monkeypatch.setenv(N_CTX_ENV, str(N_CTX))
    config = load_config_text(f"providers:\n  mine:\n    base_url: {local_server.base_url}\n    max_retries: 0\n")
    too_long = "word " * (N_CTX + 200)
    request = ChatRequest(
        model=LOCAL_MODEL, provider="mine", config=config, messages=[{"role": "user", "content": too_long}]
    )
    with pytest.raises(ContextOverflow) as caught:
        call_llm_request(request)
    assert caught.value.window == N_CTX
    assert caught.value.prompt_tokens > N_CTX
    assert f"window {N_CTX:,} tokens" in str(caught.value)
    # Streamed, the same request gets an empty stream and nothing saying why: moa-chat's `local` provider knows
    # its window without asking and checks a request before sending it.
    stream = call_llm_request(dataclasses.replace(request, stream=True))
    assert list(stream) == []
    assert WindowFinder(load_config_text("")).known(Slot("local", LOCAL_MODEL)).tokens == N_CTX


# --------------------------------------------------------------------------- a long conversation, compacted

TINY_WINDOW = 512  # a few exchanges fill it: two compactions in about ten turns of a 135M model on the CPU
TINY = """
moa:
  default_preset: tiny
  presets:
    tiny:
      tools: []
      max_workers: 1
      reference_models:
        - {provider: local, model: smollm2, max_tokens: 32}
      aggregator: {provider: local, model: smollm2, max_tokens: 40}
"""


def test_a_long_conversation_on_the_real_local_model_compacts_twice_and_every_turn_is_whole(home, monkeypatch):
    """The local model run with a small window (MOA_CHAT_LOCAL_N_CTX): a session long enough to be compacted
    twice, every turn whole; every request fits the window the server enforces (it resets a streamed request
    past it); a reopened session sends the same summary."""
    from moa_chat.engine.events import CompactionEnded
    from moa_chat.llm import call_llm_request
    from moa_chat.prompts import SUMMARY_HEADER
    from moa_chat.providers import lifecycle
    from moa_chat.session import ChatSession
    from moa_chat.store import SessionStore

    monkeypatch.setenv(N_CTX_ENV, str(TINY_WINDOW))
    lifecycle.stop_all()  # a local server started earlier in this process runs with another window
    config = load_config_text(TINY)
    sent: list[ChatRequest] = []

    def recorded(request: ChatRequest) -> object:
        sent.append(request)
        return call_llm_request(request)

    store = SessionStore()
    session = ChatSession(config, config.preset("tiny"), store=store, call=recorded)
    events: list[object] = []
    turns = 0
    try:
        while sum(isinstance(e, CompactionEnded) and e.error is None for e in events) < 2:
            turns += 1
            assert turns <= 30, "no second compaction in 30 exchanges"
            result = session.send(f"Tell me one short fact about the number {turns}.", observer=events.append)
            assert result.status == "ok", f"exchange {turns}: {result.error}"
        failed = [e for e in events if isinstance(e, CompactionEnded) and e.error is not None]
        assert not failed, failed
        summary = session.context.summary
        assert summary is not None and summary.exchanges >= 4
        reopened = ChatSession(config, config.preset("tiny"), store=SessionStore(), call=recorded)
        reopened.open(session.id)
        assert reopened.context.summary == summary
        assert reopened.send("And one fact about zero?").status == "ok"
        last = [r for r in sent if r.task == "moa_aggregator"][-1]
        assert [m for m in last.messages if str(m.get("content", "")).startswith(SUMMARY_HEADER)] == [summary.message()]
    finally:
        lifecycle.stop_all()
