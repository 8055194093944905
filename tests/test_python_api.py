"""The Python API (docs/python-api.md): its example runs as written, and the facade is the chat's engine.

The example is taken from the document itself and run in a fresh interpreter, offline, with its own
MOA_CHAT_HOME, so the page cannot drift from the code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import WIRE_CONFIG, write_config
from moa_chat.config import load_config
from moa_chat.llm import ChatRequest, Sampling
from moa_chat.moa import MoAChatCompletions
from moa_chat.providers.loopback_server import Reply

DOC = Path(__file__).resolve().parent.parent / "docs" / "python-api.md"
QUESTION = [{"role": "user", "content": "How do I reverse a list in Python?"}]


def _first_python_block(text: str) -> str:
    found = re.search(r"^```python\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)
    assert found is not None, "docs/python-api.md has no ```python block"
    return found.group(1)


def test_the_documented_example_runs_offline(tmp_path: Path) -> None:
    code = _first_python_block(DOC.read_text(encoding="utf-8"))
    home = tmp_path / "home"
    home.mkdir()
    keys = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENROUTER_API_KEY", "GROQ_API_KEY", "TOGETHER_API_KEY")
    env = {k: v for k, v in os.environ.items() if k not in keys}
    env.update(MOA_CHAT_HOME=str(home), MOA_CHAT_DEMO_PACE="0")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("*Simulated reply")
    references = [line for line in lines if line.startswith("reference ")]
    assert references == [
        "reference demo:simulated-analyst ok",
        "reference demo:simulated-skeptic ok",
        "reference demo:simulated-pragmatist ok",
    ]
    streamed = re.fullmatch(r"streamed (\d+) pieces", lines[-1])
    assert streamed is not None and int(streamed.group(1)) > 1


def test_the_facade_sends_what_the_chat_sends(wire_config, llm_server) -> None:
    """References get the advisor's view, the aggregator the conversation and their guidance, with usage asked."""
    config = wire_config()
    response = MoAChatCompletions("wire", config=config).create(messages=QUESTION, stream=False)
    assert response.choices[0].message.content == "ok from agg"
    [aggregator] = llm_server.requests_for("agg")
    assert aggregator.messages[0] == QUESTION[0]
    assert "guidance" in aggregator.messages[-1]["content"]
    assert "stream" not in aggregator.body
    [reference] = llm_server.requests_for("ref-a")
    assert reference.messages[0]["role"] == "system" and reference.body["stream"] is True
    assert reference.body["stream_options"] == {"include_usage": True}


def test_the_facade_applies_privacy_filter_full(home, llm_server) -> None:
    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="") + "privacy_filter: full\n"
    config = load_config(write_config(home, text))
    MoAChatCompletions("wire", config=config).create(
        messages=[{"role": "user", "content": "mail bob@example.org about it"}]
    )
    assert llm_server.requests
    for request in llm_server.requests:
        assert "bob@example.org" not in str(request.messages)
    assert "[email]" in str(llm_server.requests_for("agg")[0].messages)


def test_a_chat_request_in_the_seeds_keyword_form_holds_only_what_was_set() -> None:
    plain = ChatRequest(model="m", messages=QUESTION, provider="p", task="moa_aggregator")
    assert plain.as_call_kwargs() == {"task": "moa_aggregator", "provider": "p", "model": "m", "messages": QUESTION}
    streamed = ChatRequest(
        model="m",
        messages=QUESTION,
        sampling=Sampling(temperature=0.2, stop=("END",)),
        timeout=5.0,
        stream=True,
        stream_options={"include_usage": True},
    )
    kwargs = streamed.as_call_kwargs()
    assert kwargs["stream"] is True and kwargs["stream_options"] == {"include_usage": True}
    assert kwargs["temperature"] == 0.2 and kwargs["stop"] == ("END",) and kwargs["timeout"] == 5.0
    assert "max_tokens" not in kwargs and "tools" not in kwargs


def test_sampling_reaches_the_wire(wire_config, llm_server) -> None:
    from moa_chat.llm import call_llm_request

    config = wire_config()
    llm_server.script("agg", Reply(text="fine"))
    request = ChatRequest(
        model="agg",
        messages=QUESTION,
        provider="wire",
        sampling=Sampling(temperature=0.3, max_tokens=50, top_p=0.9, stop=("END", "STOP")),
        config=config,
    )
    call_llm_request(request)
    body = llm_server.requests_for("agg")[0].body
    assert (body["temperature"], body["max_tokens"], body["top_p"], body["stop"]) == (0.3, 50, 0.9, ["END", "STOP"])
    assert "stream" not in body
