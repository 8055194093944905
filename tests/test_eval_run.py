"""`moa-chat eval` on the wire: the scripted loopback server answers right or wrong per model, and the
requests it counts say what was asked (no extra calls for members, nothing done twice after a resume)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import waiting
from conftest import WIRE_CONFIG, write_config
from moa_chat.cli import main
from moa_chat.config import load_config
from moa_chat.engine.cost import estimate_turn
from moa_chat.eval.judge import Judge
from moa_chat.eval.results import summarise
from moa_chat.eval.runner import EvalRunner, systems_for
from moa_chat.eval.tasks import load_tasks
from moa_chat.llm.messages import user
from moa_chat.providers.local import INSTALL_HINT, extra_installed
from moa_chat.providers.loopback_server import Reply
from moa_chat.store.eval_runs import EvalRunStore
from scripted_server import ScriptedServer

QUESTION = re.compile(r"What is (\d+) plus one\?")


def _asked(body: dict[str, Any]) -> int | None:
    """The number a request's task asks about (from any of its messages)."""
    for message in body.get("messages", []):
        found = QUESTION.search(str(message.get("content", "")))
        if found:
            return int(found.group(1))
    return None


def _arithmetic(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "tasks.jsonl"
    lines = [json.dumps({"id": f"t{n}", "prompt": f"What is {n} plus one?", "number": n + 1}) for n in range(count)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _answers(server: ScriptedServer, *, wrong: set[str]) -> None:
    """Every model answers each task; those in `wrong` one too many."""

    def answer(model: str):
        def reply(body: dict[str, Any]) -> Reply:
            n = _asked(body)
            value = (n or 0) + (2 if model in wrong else 1)
            return Reply(text=f"Working it out.\nAnswer: {value}")

        return reply

    for model in ("ref-a", "ref-b", "ref-c", "agg", "solo-model", "slow", "busy"):
        server.script(model, answer(model))


def _run(config: Any, tasks_path: Path, **options: Any) -> EvalRunner:
    solo = options.pop("solo", False)
    baselines = options.pop("baselines", [])
    presets = options.pop("presets", [config.preset("wire")])
    runner = EvalRunner(
        config,
        load_tasks(str(tasks_path)).tasks,
        systems_for(config, presets, solo=solo, baselines=baselines),
        **options,
    )
    runner.run()
    return runner


def test_members_are_scored_from_the_turn_itself_and_the_lift_is_computed(
    wire_config: Any, llm_server: ScriptedServer, tmp_path: Path
) -> None:
    config = wire_config()
    _answers(llm_server, wrong={"ref-b"})
    tasks = _arithmetic(tmp_path, 6)
    runner = _run(config, tasks, solo=True, baselines=["wire:solo-model"])
    # Per task: 3 references + the aggregator, the aggregator alone, the baseline: the members cost nothing more.
    assert len(llm_server.requests) == 6 * (4 + 1 + 1)
    summary = summarise(runner.tasks, runner.systems, runner.answers, runner.verdicts)
    quality = {r.name: r.quality for r in summary.results}
    assert quality == {
        "wire": 1.0,
        "wire/wire:ref-a (as a reference)": 1.0,
        "wire/wire:ref-b (as a reference)": 0.0,
        "wire/wire:ref-c (as a reference)": 1.0,
        "wire solo": 1.0,
        "wire:solo-model": 1.0,
    }
    lift = summary.lifts[0]
    preset, best, average = lift.preset, lift.best, lift.average
    assert preset == "wire" and best.second == "wire/wire:ref-a (as a reference)" and best.delta == 0.0
    assert average.delta == pytest.approx(1 / 3)
    record = runner.answers[("t0", "wire")]
    assert record["extracted"] == "1" and record["layers_run"] == 1
    assert runner.answers[("t0", "wire solo")]["layers_run"] is None
    assert [m["score"] for m in record["members"]] == [1.0, 0.0, 1.0]


def test_tools_are_off_unless_the_task_asks(wire_config: Any, llm_server: ScriptedServer, tmp_path: Path) -> None:
    config = wire_config()
    _answers(llm_server, wrong=set())
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"id": "plain", "prompt": "What is 1 plus one?", "number": 2}\n'
        '{"id": "tools", "prompt": "What is 2 plus one?", "number": 3, "tools": true}\n',
        encoding="utf-8",
    )
    _run(config, path, baselines=["wire:solo-model"], presets=[config.preset("wire")], concurrency=1)
    offered = {_asked(r.body): bool(r.body.get("tools")) for r in llm_server.requests_for("solo-model")}
    assert offered == {1: False, 2: True}


def test_the_judge_sees_each_pair_in_both_orders(wire_config: Any, llm_server: ScriptedServer, tmp_path: Path) -> None:
    config = wire_config()
    llm_server.script("agg", Reply(text="GOOD answer"))
    llm_server.script("solo-model", Reply(text="plain answer"))
    llm_server.script("judge", Reply(text="The first one.\n[[A]]"))  # a judge that always prefers what it reads first
    path = tmp_path / "open.yaml"
    path.write_text("- id: q1\n  prompt: Explain tides.\n- id: q2\n  prompt: Explain rain.\n", encoding="utf-8")
    judge = Judge(config, "wire:judge")
    runner = _run(config, path, baselines=["wire:solo-model"], judge=judge, against="wire:solo-model")
    asked = llm_server.requests_for("judge")
    # Each of wire and its three members against the baseline, twice per task.
    assert len(asked) == 2 * 2 * 4
    wire_pairs = [r for r in asked if "GOOD answer" in r.messages[0]["content"]]
    assert len(wire_pairs) == 4
    firsts = [
        r.messages[0]["content"].index("GOOD answer") < r.messages[0]["content"].index("plain answer")
        for r in wire_pairs
    ]
    assert sorted(firsts) == [False, False, True, True]  # once as A, once as B
    summary = summarise(runner.tasks, runner.systems, runner.answers, runner.verdicts, against="wire:solo-model")
    # Position bias cancels: A won each order, so every answer won once and lost once.
    assert {r.name: r.quality for r in summary.results}["wire"] == 0.5
    assert summary.by_name("wire").metric == "win rate"


def test_a_judge_that_prefers_one_answer_gives_it_every_win(
    wire_config: Any, llm_server: ScriptedServer, tmp_path: Path
) -> None:
    config = wire_config()
    llm_server.script("agg", Reply(text="GOOD answer"))
    llm_server.script("solo-model", Reply(text="plain answer"))

    def judge(body: dict[str, Any]) -> Reply:
        text = body["messages"][0]["content"]
        first = text.split("[Answer A]")[1].split("[Answer B]")[0]
        if "GOOD" in first:
            return Reply(text="[[A]]")
        if "GOOD" in text:
            return Reply(text="[[B]]")
        return Reply(text="[[C]]")

    llm_server.script("judge", judge)
    path = tmp_path / "open.yaml"
    path.write_text("- prompt: Explain tides.\n", encoding="utf-8")
    runner = _run(
        config, path, baselines=["wire:solo-model"], judge=Judge(config, "wire:judge"), against="wire:solo-model"
    )
    summary = summarise(runner.tasks, runner.systems, runner.answers, runner.verdicts, against="wire:solo-model")
    quality = {r.name: r.quality for r in summary.results}
    assert quality["wire"] == 1.0
    assert quality["wire/wire:ref-a (as a reference)"] == 0.5  # "ok from ref-a" against "plain answer": a tie both ways
    assert runner.verdicts[("1", "wire")]["orders"] == ["A", "B"]


def test_rubric_scores_each_answer(wire_config: Any, llm_server: ScriptedServer, tmp_path: Path) -> None:
    config = wire_config()
    llm_server.script(
        "judge", lambda body: Reply(text="[[8]]" if "be brief" in body["messages"][0]["content"] else "[[2]]")
    )
    path = tmp_path / "open.yaml"
    path.write_text("- prompt: Explain tides.\n  rubric: be brief\n", encoding="utf-8")
    runner = _run(config, path, judge=Judge(config, "wire:judge"), rubric=True)
    summary = summarise(runner.tasks, runner.systems, runner.answers, runner.verdicts, rubric=True)
    assert summary.by_name("wire").quality == 0.8
    assert len(llm_server.requests_for("judge")) == 4  # one per answer: wire and its three members


def _overlap(requests: list[Any]) -> int:
    events = sorted([(r.received_at, 1) for r in requests] + [(r.finished_at, -1) for r in requests])
    most = running = 0
    for _when, step in events:
        running += step
        most = max(most, running)
    return most


def test_a_provider_cap_holds_however_many_workers(
    wire_config: Any, llm_server: ScriptedServer, tmp_path: Path
) -> None:
    config = wire_config()
    pair = threading.Barrier(2, timeout=10)  # two requests at once, or the test fails: the cap is reached

    def slow(body: dict[str, Any]) -> Reply:
        pair.wait()
        return Reply(text=f"Answer: {(_asked(body) or 0) + 1}")

    llm_server.script("slow", slow)
    runner = _run(
        config,
        _arithmetic(tmp_path, 8),
        presets=[config.preset("wire")],
        baselines=["wire:slow"],
        concurrency=8,
        provider_cap=2,
    )
    slow_requests = llm_server.requests_for("slow")
    assert len(slow_requests) == 8
    assert all(r["status"] == "ok" for r in runner.answers.values())
    assert runner.limiter.peak["wire"] == 2
    turns = [r for r in llm_server.requests if r.model in ("agg", "slow")]  # one per turn
    # The server stamps a request's end after its last byte, which the client may have read first.
    waiting.wait_until(lambda: all(r.finished_at is not None for r in turns), "every request's end stamped")
    assert _overlap(turns) <= 2


def test_a_429_slows_the_provider_and_the_turn_asks_again_as_any_turn_does(
    home: Path, llm_server: ScriptedServer, tmp_path: Path
) -> None:
    write_config(
        home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra="").replace("max_retries: 0", "max_retries: 3")
    )
    config = load_config()
    _answers(llm_server, wrong=set())
    busy = Reply(status=429, error="slow down", headers={"Retry-After": "0"})
    llm_server.script("busy", [busy, busy, busy, Reply(text="Answer: 1")])
    tasks = _arithmetic(tmp_path, 6)
    runner = EvalRunner(
        config,
        load_tasks(str(tasks)).tasks,
        systems_for(config, [config.preset("wire")], solo=False, baselines=["wire:busy"])[1:],
        concurrency=1,
        provider_cap=4,
    )
    runner.run()
    assert len(runner.answers) == 6
    assert all(r["status"] == "ok" for r in runner.answers.values())  # the first turn's fourth request answered
    assert runner.limiter.rate_limits == {"wire": 3}
    assert runner.limiter.cap("wire") == 1  # 4 → 2 → 1 → 1; five calm turns are not yet enough to grow
    assert len(llm_server.requests_for("busy")) == 6 + 3


def test_the_budget_stops_the_run_before_it_is_exceeded(home: Path, llm_server: ScriptedServer, tmp_path: Path) -> None:
    write_config(
        home,
        WIRE_CONFIG.format(base_url=llm_server.base_url, extra="")
        + "pricing:\n  wire:agg: {input: 100, output: 100}\n  wire:ref-a: {input: 100, output: 100}\n",
    )
    config = load_config()
    # Each call reports a reply as long as the estimate assumes (1,000 tokens), so turns cost about what is estimated.
    usage = {"prompt_tokens": 50, "completion_tokens": 1000, "total_tokens": 1050}
    for model in ("ref-a", "ref-b", "ref-c", "agg"):
        llm_server.script(model, Reply(text="Answer: 1", usage=usage))
    tasks = load_tasks(str(_arithmetic(tmp_path, 10))).tasks
    estimate = estimate_turn(config, config.preset("wire"), [user(tasks[0].text())]).dollars
    assert estimate > 0
    runner = EvalRunner(
        config,
        tasks,
        systems_for(config, [config.preset("wire")], solo=False, baselines=[]),
        concurrency=1,
        max_cost=estimate * 3.5,
    )
    runner.run()
    assert runner.budget_stopped
    spent = runner.snapshot.cost
    assert spent <= estimate * 3.5
    kept = len(runner.answers)
    assert 3 <= kept < 10
    assert len(llm_server.requests_for("agg")) == kept  # no turn was started past the budget
    assert spent + estimate > estimate * 3.5  # and the next one might have crossed it


def test_the_command_writes_the_report_folder(
    wire_config: Any, llm_server: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wire_config()
    _answers(llm_server, wrong={"ref-b", "agg"})
    tasks = _arithmetic(tmp_path, 6)  # the fewest that let a paired test call a 6-0 split
    folder = tmp_path / "report"
    assert (
        main(
            ["eval", str(tasks), "--preset", "wire", "--baseline", "wire:solo-model", "--report", str(folder), "--json"]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert {s["name"]: s["quality"] for s in out["systems"]}["wire"] == 0.0
    assert out["report"] == str(folder) and out["status"] == "done"
    verdicts = {d["verdict"] for d in out["differences"]}
    assert "wire:solo-model beats wire" in verdicts
    assert sorted(p.name for p in folder.iterdir()) == [
        "quality_vs_cost.txt",
        "report.html",
        "report.md",
        "results.jsonl",
        "summary.json",
    ]
    lines = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == ["t0", "t1", "t2", "t3", "t4", "t5"]
    first = lines[0]
    assert first["prompt"] == "What is 0 plus one?"
    assert set(first["answers"]) == {"wire", "wire:solo-model"}
    assert [m["score"] for m in first["answers"]["wire"]["members"]] == [1.0, 0.0, 1.0]
    report = (folder / "report.md").read_text()
    assert "| wire | 0% |" in report and "## Quality against cost" in report and "wire:solo-model beats wire" in report
    assert "cost per task" in (folder / "quality_vs_cost.txt").read_text()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["run"] == out["run"] and summary["spec"]["presets"] == ["wire"]


def test_a_tiny_eval_on_the_demo_preset(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "arithmetic", "--preset", "demo", "--limit", "3", "--solo"]) == 0
    out = capsys.readouterr().out
    rows = [line.split()[0] for line in out.splitlines()[2:7]]
    assert rows == [
        "demo",
        "demo/demo:simulated-analyst",
        "demo/demo:simulated-skeptic",
        "demo/demo:simulated-pragmatist",
        "demo",
    ]
    assert "accuracy against cost per task" in out
    runs = EvalRunStore().runs()
    assert len(runs) == 1 and runs[0].status == "done"
    assert main(["eval", "--runs"]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith(runs[0].id) and "done" in listed and "6 results" in listed  # 3 tasks × (demo, demo solo)


def test_resume_after_kill_9_does_nothing_twice(home: Path, llm_server: ScriptedServer, tmp_path: Path) -> None:
    write_config(home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra=""))
    tasks = _arithmetic(tmp_path, 6)
    stalled = threading.Event()
    killed = threading.Event()

    def answer(body: dict[str, Any]) -> Reply:
        n = _asked(body)
        if n == 3 and not killed.is_set():
            stalled.set()
            return Reply(text="never sent", delay=60)  # the process is killed while it waits
        return Reply(text=f"Answer: {(n or 0) + 1}")

    for model in ("ref-a", "ref-b", "ref-c", "agg"):
        llm_server.script(model, answer)
    process = subprocess.Popen(
        [sys.executable, "-m", "moa_chat", "eval", str(tasks), "--preset", "wire", "--concurrency", "1", "-q"],
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert stalled.wait(60), process.stderr.read().decode() if process.poll() is not None else "no request"
    finally:
        killed.set()
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    done = EvalRunStore().results(EvalRunStore().run("last").id, "answer")
    assert sorted(key[0] for key in done) == ["t0", "t1", "t2"]  # task 3 was in flight
    assert main(["eval", "--resume", "last", "-q"]) == 0
    per_task: dict[int | None, int] = {}
    for request in llm_server.requests:
        per_task[_asked(request.body)] = per_task.get(_asked(request.body), 0) + 1
    # Every task once (three references and the aggregator); task 3 again: the references it had sent (one to
    # three, as the kill found them) were in flight, and are all that was lost.
    # A request the kill cut before its body was whole reaches the server with none: one of those in flight.
    in_flight = per_task.pop(3) - 4 + per_task.pop(None, 0)
    assert per_task == {0: 4, 1: 4, 2: 4, 4: 4, 5: 4}
    assert 1 <= in_flight <= 3
    store = EvalRunStore()
    run = store.run("last")
    assert run.status == "done" and len(store.results(run.id, "answer")) == 6


def test_ctrl_c_cancels_the_turns_in_flight_and_says_how_to_resume(
    home: Path, llm_server: ScriptedServer, tmp_path: Path
) -> None:
    write_config(home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra=""))
    tasks = _arithmetic(tmp_path, 4)
    stalled = threading.Event()

    def answer(body: dict[str, Any]) -> Reply:
        if _asked(body) == 1:
            stalled.set()
            return Reply(text="never sent", delay=60)
        return Reply(text=f"Answer: {(_asked(body) or 0) + 1}")

    for model in ("ref-a", "ref-b", "ref-c", "agg"):
        llm_server.script(model, answer)
    process = subprocess.Popen(
        [sys.executable, "-m", "moa_chat", "eval", str(tasks), "--preset", "wire", "--concurrency", "1", "-q"],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert stalled.wait(60)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    run = EvalRunStore().run("last")
    assert run.status == "interrupted"
    assert f"moa-chat eval --resume {run.id}" in err
    assert sorted(key[0] for key in EvalRunStore().results(run.id, "answer")) == ["t0"]  # the cancelled one is not kept
    assert "wire" in out  # the table of what finished


@pytest.mark.skipif(not extra_installed(), reason=f"the local extra is not installed: {INSTALL_HINT}")
def test_a_tiny_eval_on_the_local_model(home: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "moa_chat", "eval", "arithmetic", "--preset", "local", "--limit", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stderr
    systems = {s["name"]: s for s in json.loads(result.stdout)["systems"]}
    # SmolLM2-135M rarely gets a sum right: what is checked is that every seat answered and was scored.
    assert set(systems) == {"local", *(f"local/local:smollm2#{n} (as a reference)" for n in (1, 2, 3))}
    assert all(s["n"] == 1 and s["failed"] == 0 for s in systems.values()), systems
    assert (Path(json.loads(result.stdout)["report"]) / "report.md").exists()


def test_usage_errors_say_what_is_missing(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "arithmetic", "--preset", "demo", "--rubric"]) == 2
    assert "--rubric is for the judge: give --judge PROVIDER:MODEL" in capsys.readouterr().err
    assert main(["eval"]) == 2
    assert "name a task file or a bundled set" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x", "nubmer": 1}\n', encoding="utf-8")
    assert main(["eval", str(bad), "--preset", "demo"]) == 2
    assert f"{bad}:1: nubmer: unknown key (did you mean 'number'?)" in capsys.readouterr().err
    assert main(["eval", "--resume", "nope"]) == 2
    assert "no eval run 'nope'" in capsys.readouterr().err


def test_layers_auto_compares_the_references_answers_as_the_check_reads_them(
    wire_config: Any, llm_server: ScriptedServer, tmp_path: Path
) -> None:
    config = wire_config("layers: auto\nmax_layers: 2")

    def reference(model: str):
        def reply(body: dict[str, Any]) -> Reply:
            n = _asked(body) or 0
            # On task 0 every reference writes the answer its own way (they agree once extracted); on task 1
            # ref-c differs, so a second layer runs.
            value = n + 1 if n == 0 or model != "ref-c" else n + 5
            words = {"ref-a": f"Answer: {value}", "ref-b": f"The answer is {value}.", "ref-c": f"{value}"}
            return Reply(text=words[model])

        return reply

    for model in ("ref-a", "ref-b", "ref-c"):
        llm_server.script(model, reference(model))
    llm_server.script("agg", lambda body: Reply(text=f"Answer: {(_asked(body) or 0) + 1}"))
    runner = _run(config, _arithmetic(tmp_path, 2))
    assert runner.answers[("t0", "wire")]["layers_run"] == 1
    assert runner.answers[("t1", "wire")]["layers_run"] == 2
    summary = summarise(runner.tasks, runner.systems, runner.answers, runner.verdicts)
    assert summary.by_name("wire").as_json()["layers_run"] == 1.5
