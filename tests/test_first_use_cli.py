"""What a new user meets on the command line after the demo, run as real processes: which presets can run (and
why not, in the same words everywhere), `moa-chat api`'s catalogue, `eval`'s judge and figures, `export`'s
versions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx2 as httpx
import pytest
from api_helpers import start_api
from conftest import write_config
from moa_chat.config import load_config
from moa_chat.providers import ollama
from test_ollama_picker import FakeOllama, closed_port

WAIT = 120


def moa(home: Path, *args: str, cwd: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`moa-chat ARGS` as a process of its own, offline, with its own MOA_CHAT_HOME."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(MOA_CHAT_HOME=str(home), MOA_CHAT_DEMO_PACE="0", MOA_CHAT_OFFLINE_PRESET="demo")
    return subprocess.run(
        [sys.executable, "-m", "moa_chat", *args],
        cwd=cwd or home,
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=WAIT,
    )


# --------------------------------------------------------------------------------------------- presets that cannot run


def test_presets_and_its_json_agree_that_a_stopped_ollama_cannot_run(home):
    address = f"http://127.0.0.1:{closed_port()}"
    write_config(home, f"providers:\n  ollama:\n    base_url: {address}/v1\n")
    reason = f"needs Ollama running at {address} (start it with `ollama serve`)"
    text = moa(home, "presets")
    assert text.returncode == 0, text.stderr
    assert f"cannot run: {reason}" in text.stdout
    listed = moa(home, "presets", "--json")
    by_name = {p["name"]: p for p in json.loads(listed.stdout)}
    assert by_name["ollama"]["runnable"] is False
    assert by_name["ollama"]["reason"] == reason
    assert reason in by_name["ollama"]["problem"]
    assert by_name["frontier"]["reason"] == "needs OPENROUTER_API_KEY"
    assert "cannot run: needs OPENROUTER_API_KEY" in text.stdout
    # A model asked several times shows how many: the panel the picker and the palette count.
    assert "references: local:smollm2 ×3" in text.stdout


def test_api_leaves_out_a_stopped_ollama_and_says_why(home):
    address = f"http://127.0.0.1:{closed_port()}"
    write_config(home, f"providers:\n  ollama:\n    base_url: {address}/v1\n")
    api = start_api(home, "--preset", "demo")
    try:
        reason = f"needs Ollama running at {address} (start it with `ollama serve`)"
        assert f"  left out: ollama ({reason})" in api.banner
        assert "  left out: frontier (needs OPENROUTER_API_KEY)" in api.banner
        headers = {"Authorization": f"Bearer {api.token}"}
        models = httpx.get(f"{api.base_url}/models", headers=headers, timeout=WAIT).json()
        assert "ollama" not in [m["id"] for m in models["data"]]
        answer = httpx.post(
            f"{api.base_url}/chat/completions",
            headers=headers,
            json={"model": "ollama", "messages": [{"role": "user", "content": "hi"}]},
            timeout=WAIT,
        )
        assert answer.status_code == 404
        assert answer.json()["error"]["message"] == f"The model 'ollama' is not served: {reason}"
    finally:
        api.stop()


def test_the_api_catalogue_serves_ollama_once_it_answers(home):
    """Asked again when a request names the preset left out, at most every RECHECK seconds (on its clock)."""
    from moa_chat.api.catalog import RECHECK, Catalog
    from moa_chat.api.wire import ApiError

    server = FakeOllama()
    server.up = False
    try:
        write_config(home, f"providers:\n  ollama:\n    base_url: {server.base_url}\n")
        config = load_config()
        now = [100.0]
        catalog = Catalog(config, "demo", clock=lambda: now[0])
        catalog.recheck(force=True)
        assert "ollama" in catalog.left_out and "ollama" not in catalog.served
        server.up = True
        with pytest.raises(ApiError):  # the last answer stands for RECHECK seconds
            catalog.preset("ollama")
        now[0] += RECHECK
        assert catalog.preset("ollama").name == "ollama"
        assert "ollama" in [m["id"] for m in catalog.models(0)["data"]]  # type: ignore[index]
        server.up = False
        now[0] += RECHECK
        assert "ollama" not in [m["id"] for m in catalog.models(0)["data"]]  # type: ignore[index]
        assert ollama.last_answer(config) == ollama.Answer(None)
    finally:
        server.stop()


# --------------------------------------------------------------------------------------------- export


def test_export_keeps_every_version_of_an_exchange(home):
    """Re-asked, regenerated and edited: the JSON has every message the turns point to, the Markdown every reply."""
    from moa_chat.session import ChatSession
    from moa_chat.store import SessionStore

    config = load_config()
    store = SessionStore()
    session = ChatSession(config, config.preset("demo"), store=store)
    session.send("first question")
    session.send("second question")
    session.rerun(aggregator_only=False)
    session.rerun(aggregator_only=True)
    session.edit("second question, edited")
    session.send("third question")
    session_id = session.id
    assert session_id is not None
    store.close()

    exported = moa(home, "export", session_id, "--format", "json")
    assert exported.returncode == 0, exported.stderr
    data = json.loads(exported.stdout)
    ids = {m["id"] for m in data["messages"]}
    assert ids == set(range(1, max(ids) + 1))  # no gap: every version's messages
    assert all(turn["user_message_id"] in ids for turn in data["turns"])
    replies = [m for m in data["messages"] if m["role"] == "assistant"]
    assert {m["turn_id"] for m in replies} == {turn["id"] for turn in data["turns"]}  # each turn's reply is there
    shown = [m["content"] for m in data["messages"] if m["shown"] and m["role"] == "user"]
    assert shown == ["first question", "second question, edited", "third question"]

    markdown = moa(home, "export", session_id)
    assert markdown.returncode == 0, markdown.stderr
    text = markdown.stdout
    assert "Other versions of this exchange: 3" in text
    for version in ("Version 1 of 4 (asked)", "Version 2 of 4 (re-asked)", "Version 3 of 4 (regenerated)"):
        assert version in text
    assert text.count("#### moa-chat (demo:simulated-synthesizer)") == 3  # the three replies not shown
    assert text.index("second question, edited") < text.index("Version 1 of 4") < text.index("third question")


# --------------------------------------------------------------------------------------------- eval's judge


def test_a_judge_that_gives_no_verdict_says_so_per_task_in_the_summary_and_in_the_exit_status(home, llm_server):
    write_config(home, f"providers:\n  wire:\n    base_url: {llm_server.base_url}\n    max_retries: 0\n")
    report = home / "report"
    args = ["eval", "open_ended", "--preset", "demo", "--limit", "2", "--judge", "wire:judge", "--report", str(report)]
    for rubric in ([], ["--rubric"]):
        done = moa(home, *args, *rubric, "--json")
        assert done.returncode == 1, done.stderr
        out = json.loads(done.stdout)
        assert out["unjudged"] and all("wire:judge gave no" in item["error"] for item in out["unjudged"])
        asked = len(out["unjudged"])
        assert f"the judge gave no verdict for {asked} of {asked} answers" in done.stderr
        rows = [json.loads(line) for line in (report / "results.jsonl").read_text().splitlines()]
        verdicts = [v for row in rows for v in row["verdicts"].values()]
        assert verdicts and all(v["score"] is None and v["error"] for v in verdicts)
    table = moa(home, *args)
    assert table.returncode == 1
    assert "judge: the judge gave no verdict for" in table.stdout


def test_the_demo_can_judge(home):
    """`--judge demo:…` answers in the judge's format, so the offline demo shows a judged run whole."""
    for rubric in ([], ["--rubric"]):
        done = moa(home, "eval", "open_ended", "--preset", "demo", "--limit", "2", "--solo", "--json", *rubric,
                   "--judge", "demo:simulated-synthesizer")  # fmt: skip
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert out["unjudged"] == []
        assert all(system["n"] == 2 for system in out["systems"])


# --------------------------------------------------------------------------------------------- eval's figures


def test_eval_says_tokens_n_a_where_no_provider_reported_any_and_resume_says_what_it_kept(home, llm_server):
    """llama.cpp's server sends no usage in a stream: `ask` says "n/a", and so does eval's table (not 0)."""
    from moa_chat.providers.loopback_server import Reply

    llm_server.script("quiet", Reply(text="The answer is 42.", usage_chunk=False))
    write_config(home, f"providers:\n  wire:\n    base_url: {llm_server.base_url}\n    max_retries: 0\n")
    done = moa(home, "eval", "arithmetic", "--preset", "demo", "--limit", "2", "--baseline", "wire:quiet")
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("wire:quiet"))
    assert row.split()[-2:] == ["n/a", "—"], row  # tokens/task, and no price for it either
    demo = next(line for line in done.stdout.splitlines() if line.startswith("demo "))
    assert demo.split()[-2] not in ("n/a", "0")
    listed = json.loads(moa(home, "eval", "arithmetic", "--preset", "demo", "--limit", "2", "--baseline",
                            "wire:quiet", "--json").stdout)  # fmt: skip
    quiet = next(s for s in listed["systems"] if s["name"] == "wire:quiet")
    assert quiet["tokens_per_task"] is None
    run = listed["run"]
    resumed = moa(home, "eval", "--resume", run)
    assert resumed.returncode == 0, resumed.stderr
    assert "moa-chat: resumed: 4 of 4 answers kept, 0 to run" in resumed.stderr
