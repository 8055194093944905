"""`moa-chat eval` within the limits a turn has: `max_retry_wait` and `max_retries` as `ask` honours them, failed
tasks named and an exit status that says so, a budget that stops a run near it, and signals that stop it at
once and leave it resumable. Real `moa-chat eval` processes against the scripted provider."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import WIRE_CONFIG, write_config
from moa_chat.config import load_config
from moa_chat.engine.cost import estimate_turn
from moa_chat.eval.tasks import load_tasks
from moa_chat.llm.messages import user
from moa_chat.providers.loopback_server import Reply
from moa_chat.store.eval_runs import EvalRunStore
from scripted_server import ScriptedServer

WAIT = 120.0  # bounds a run that should end; it measures nothing


def tasks_file(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "tasks.jsonl"
    lines = [json.dumps({"id": f"t{n}", "prompt": f"What is {n} plus one?", "number": n + 1}) for n in range(count)]
    path.write_text("\n".join(lines) + "\n")
    return path


def configure(home: Path, server: ScriptedServer, *, network: str = "", extra: str = "") -> None:
    text = WIRE_CONFIG.format(base_url=server.base_url, extra="").replace("    max_retries: 0\n", network) + extra
    write_config(home, text)


def answer_all(server: ScriptedServer, reply: Reply) -> None:
    for model in ("ref-a", "ref-b", "ref-c", "agg"):
        server.script(model, reply)


def eval_process(tasks: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "moa_chat", "eval", str(tasks), "--preset", "wire", "--json", "-q", *args],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str], timeout: float = WAIT) -> tuple[int, dict[str, Any], str]:
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, (json.loads(out) if out.strip() else {}), err


def test_a_retry_after_longer_than_max_retry_wait_fails_the_task_at_once_as_ask_does(home, llm_server, tmp_path):
    configure(home, llm_server, network="    max_retries: 2\n")
    answer_all(llm_server, Reply(text="Answer: 1"))
    llm_server.script("agg", Reply(status=429, error="quota", headers={"Retry-After": "86400"}))
    code, out, err = finish(eval_process(tasks_file(tmp_path, 2), "--concurrency", "1"))
    assert code == 1, err
    assert len(llm_server.requests_for("agg")) == 2  # one a task: a day is not waited for, nor asked again
    assert {f["task"] for f in out["failed"]} == {"t0", "t1"}
    assert all("longer than network: max_retry_wait" in f["error"] for f in out["failed"])
    assert "2 turns failed" in err


def test_a_429_storm_makes_no_more_requests_than_a_turn_and_failed_tasks_exit_1(home, llm_server, tmp_path):
    configure(home, llm_server, network="    max_retries: 2\n")
    answer_all(llm_server, Reply(text="Answer: 1"))
    llm_server.script("agg", Reply(status=429, error="slow down", headers={"Retry-After": "0"}))
    code, out, err = finish(eval_process(tasks_file(tmp_path, 3), "--concurrency", "1"))
    assert code == 1, err
    assert len(llm_server.requests_for("agg")) == 3 * 3  # max_retries + 1 a task, as in a turn
    assert [f["task"] for f in out["failed"]] == ["t0", "t1", "t2"]
    assert all("429" in f["error"] for f in out["failed"])
    systems = {s["name"]: s for s in out["systems"]}
    assert systems["wire"]["failed"] == 3


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_a_provider_is_paused_stops_eval_at_once_and_leaves_it_resumable(
    home, llm_server, tmp_path, number
):
    # The provider asks for an hour's pause, which this config allows: the first task fails on it (no retries
    # here), and the next waits for the provider. A signal ends that wait at once.
    configure(home, llm_server, network="    max_retries: 0\n    max_retry_wait: 7200\n")
    answer_all(llm_server, Reply(text="Answer: 1"))
    busy = Reply(status=429, error="slow down", headers={"Retry-After": "3600"})
    llm_server.script("agg", [busy, Reply(text="Answer: 1")])
    process = eval_process(tasks_file(tmp_path, 3), "--concurrency", "1")
    deadline = time.monotonic() + WAIT
    while not EvalRunStore().runs() or not EvalRunStore().results(EvalRunStore().run("last").id, "answer"):
        assert time.monotonic() < deadline and process.poll() is None, "the first task never ended"
        time.sleep(0.05)
    process.send_signal(number)
    code, _out, err = finish(process, timeout=20)  # it used to wait out 30 s, then exit 130 whatever the signal
    assert code == (130 if number == signal.SIGINT else 128 + number)
    run = EvalRunStore().run("last")
    assert run.status == "interrupted"
    assert f"moa-chat eval --resume {run.id}" in err
    assert len(llm_server.requests_for("agg")) == 1  # the second task never reached the paused provider


def test_sighup_stops_eval_like_sigterm_and_the_run_resumes(home, llm_server, tmp_path):
    configure(home, llm_server)
    stalled = threading.Event()

    def answer(body: dict[str, Any]) -> Reply:
        asked = "What is 1 plus one?" in json.dumps(body)
        if asked and not stalled.is_set():
            stalled.set()
            return Reply(text="never sent", delay=60)
        return Reply(text="Answer: 2" if asked else "Answer: 1")

    answer_all(llm_server, answer)
    tasks = tasks_file(tmp_path, 3)
    process = eval_process(tasks, "--concurrency", "1")
    assert stalled.wait(WAIT)
    process.send_signal(signal.SIGHUP)
    code, _out, err = finish(process, timeout=30)
    assert code == 129, err
    assert "stopped by SIGHUP" in err
    run = EvalRunStore().run("last")
    assert run.status == "interrupted"
    code, out, err = finish(
        subprocess.Popen(
            [sys.executable, "-m", "moa_chat", "eval", "--resume", run.id, "--json", "-q"],
            env=dict(os.environ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    )
    assert code == 0, err
    assert EvalRunStore().run(run.id).status == "done"
    assert {s["name"]: s["answered"] for s in out["systems"]}["wire"] == 3


def test_max_cost_stops_a_run_near_the_budget_not_at_its_first_turn(home, llm_server, tmp_path):
    """Each turn reserves the most a turn has cost, its first the worst case (every reply as long as max_tokens):
    here 25 times what a turn costs. The budget holds 12 such worst cases: the run used to stop after one turn,
    since with four at once the second worst case would not fit."""
    configure(
        home,
        llm_server,
        extra="pricing:\n  wire:agg: {input: 1000, output: 1000}\n  wire:ref-a: {input: 1000, output: 1000}\n"
        "  wire:ref-b: {input: 1000, output: 1000}\n  wire:ref-c: {input: 1000, output: 1000}\n",
    )
    config = load_config()
    tasks = tasks_file(tmp_path, 40)
    worst = estimate_turn(config, config.preset("wire"), [user(load_tasks(str(tasks)).tasks[0].text())]).dollars
    # What four calls cost, their usage as the provider reports it: a 25th of the worst case.
    call_tokens = round(worst / 25 / 4 / (1000 / 1_000_000))
    usage = {"prompt_tokens": 0, "completion_tokens": call_tokens, "total_tokens": call_tokens}
    answer_all(llm_server, Reply(text="Answer: 1", usage=usage))
    budget = worst * 1.2
    code, out, err = finish(eval_process(tasks, "--concurrency", "4", "--max-cost", f"{budget:.6f}"))
    assert code == 1, err
    assert out["status"] == "budget" and "stopped before exceeding --max-cost" in err
    wire = {s["name"]: s for s in out["systems"]}["wire"]
    turn = wire["cost_per_task"]
    spent = turn * wire["answered"]
    assert spent <= budget
    assert spent > budget - 2 * turn  # near the budget: 29 or 30 of 40 turns, where it used to stop at 1
    assert len(llm_server.requests_for("agg")) == wire["answered"]  # no turn started past the budget
