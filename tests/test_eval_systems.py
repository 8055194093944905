"""What `moa-chat eval` compares, on the wire: each model alone as `--solo` runs the aggregator (the same system
prompt, temperature and max_tokens), identical single models run once, `--repeat`, the options shuffled by a
recorded seed, the primary comparison named before the run, and the reports that say what a run is."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import write_config
from moa_chat.cli import main
from moa_chat.eval.progress import ProgressBar, plain_line
from moa_chat.eval.runner import Snapshot
from moa_chat.prompts import ADVISOR_PROMPT, reference_heading
from moa_chat.providers.loopback_server import Reply
from moa_chat.store.eval_runs import EvalRunStore
from scripted_server import ScriptedServer

CONFIG = """
providers:
  wire:
    base_url: {base_url}
    max_retries: 0
moa:
  default_preset: one
  presets:
    one:
      reference_models:
        - {{provider: wire, model: ref-a, max_tokens: 256, temperature: 0.9}}
        - {{provider: wire, model: ref-b, samples: 2}}
      aggregator: {{provider: wire, model: agg, max_tokens: 384, temperature: 0.2}}
    two:
      reference_models:
        - {{provider: wire, model: ref-a}}
      aggregator: {{provider: wire, model: agg, max_tokens: 384, temperature: 0.2}}
"""
QUESTION = re.compile(r"What is (\d+) plus one\?")


def _tasks(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "tasks.jsonl"
    lines = [json.dumps({"id": f"t{n}", "prompt": f"What is {n} plus one?", "number": n + 1}) for n in range(count)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _asked(body: dict[str, Any]) -> int:
    found = QUESTION.search(json.dumps(body["messages"]))
    assert found is not None
    return int(found.group(1))


@pytest.fixture
def wired(home: Path, llm_server: ScriptedServer) -> ScriptedServer:
    write_config(home, CONFIG.format(base_url=llm_server.base_url))
    for model in ("ref-a", "ref-b", "agg"):
        llm_server.script(model, lambda body: Reply(text=f"Working.\nANSWER: {_asked(body) + 1}"))
    return llm_server


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["eval", *argv, "--json", "-q"]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_each_model_alone_gets_what_solo_gets_and_identical_ones_run_once(
    wired: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _json(capsys, str(_tasks(tmp_path, 3)), "--preset", "one", "--preset", "two", "--solo", "--members")
    tops = [s["name"] for s in out["systems"] if s["kind"] != "member"]
    # Two presets on one aggregator share one solo; ref-a, in both presets, runs alone once.
    assert tops == ["one", "two", "one solo", "wire:ref-a alone", "wire:ref-b alone"]
    # A task: one's 3 references and aggregator, two's reference and aggregator, then three single calls.
    assert len(wired.requests) == 3 * (4 + 2 + 3)
    alone = [r.body for r in wired.requests if r.body["messages"][0]["role"] != "system" and r.body["model"] != "agg"]
    assert len(alone) == 3 * 2 and {b["model"] for b in alone} == {"ref-a", "ref-b"}
    # The model alone is asked as the aggregator is asked alone: no advisor prompt, its temperature, its max_tokens.
    solo = next(r.body for r in wired.requests if r.body["model"] == "agg" and len(r.body["messages"]) == 1)
    for body in alone:
        assert (body["temperature"], body["max_tokens"]) == (solo["temperature"], solo["max_tokens"]) == (0.2, 384)
    as_reference = [r.body for r in wired.requests if r.body["messages"][0].get("content") == ADVISOR_PROMPT]
    assert {(b["model"], b.get("max_tokens")) for b in as_reference} >= {("ref-a", 256)}
    names = {s["name"] for s in out["systems"]}
    assert "one/wire:ref-a (as a reference)" in names and "one/wire:ref-b#2 (as a reference)" in names


def test_the_primary_comparison_is_named_before_the_run_and_kept(
    wired: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = str(_tasks(tmp_path, 4))
    assert main(["eval", tasks, "--preset", "two", "--solo"]) == 0
    err = capsys.readouterr().err
    assert "moa-chat: primary comparison: two vs two solo" in err.splitlines()[1]  # before any answer
    spec = EvalRunStore().run("last").spec
    assert spec["primary"] == {"two": ["two solo"]} and spec["seed"] == 1 and spec["repeats"] == 1
    out = _json(capsys, tasks, "--preset", "two", "--solo", "--primary", "two/wire:ref-a (as a reference)")
    assert [(c["first"], c["second"], c["family"]) for c in out["primary"]] == [
        ("two", "two/wire:ref-a (as a reference)", "primary")
    ]
    assert all(c["family"] == "secondary" and c["p_adjusted"] is not None for c in out["differences"][1:])
    assert main(["eval", tasks, "--preset", "two", "--primary", "nobody"]) == 2
    assert "--primary 'nobody': not a system of this run" in capsys.readouterr().err


def test_repeat_runs_every_system_again_and_reports_the_spread(
    wired: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wired.script("agg", lambda body: Reply(text="ANSWER: 0" if _asked(body) == 0 else f"ANSWER: {_asked(body) + 1}"))
    out = _json(capsys, str(_tasks(tmp_path, 4)), "--preset", "two", "--solo", "--repeat", "3")
    assert len(wired.requests) == 3 * 4 * (2 + 1)
    two = next(s for s in out["systems"] if s["name"] == "two")
    assert two["n"] == 4 and two["answers"] == two["of"] == 12 and two["repeats"] == [0.75, 0.75, 0.75]
    assert out["repeats"] == 3 and out["status"] == "done" and out["answers"] == {"kept": 24, "of": 24}
    assert out["primary"][0]["repeats_holding"] == [0, 3]
    assert isinstance(out["seconds"], float) and out["seconds"] > 0
    run = EvalRunStore().run("last")
    jobs = {job for _, job in EvalRunStore().results(run.id, "answer")}
    assert jobs == {"two", "two solo", "two [repeat 2]", "two solo [repeat 2]", "two [repeat 3]", "two solo [repeat 3]"}
    asked = len(wired.requests)
    assert main(["eval", "--resume", "last"]) == 0  # a whole run: nothing to do again, the report written again
    assert "moa-chat: resumed: 24 of 24 answers kept, 0 to run" in capsys.readouterr().err
    assert len(wired.requests) == asked


def test_multiple_choice_options_are_shuffled_by_the_recorded_seed(
    wired: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mc.yaml"
    options = ["alpha", "beta", "gamma", "delta"]
    path.write_text(
        "".join(f"- id: q{n}\n  prompt: Pick beta ({n}).\n  choices: {options}\n  answer: B\n" for n in range(8)),
        encoding="utf-8",
    )

    def prompt(messages: list[dict[str, Any]]) -> str:
        return str(next(m for m in messages if m["role"] == "user")["content"])

    def right(body: dict[str, Any]) -> Reply:
        letter = re.search(r"^([A-D])\) beta$", prompt(body["messages"]), re.M)
        assert letter is not None
        return Reply(text=f"ANSWER: {letter.group(1)}")

    for model in ("ref-a", "agg"):
        wired.script(model, right)

    def letters_shown() -> dict[str, str]:
        """The right letter of each task in the last run (its 8 aggregator requests)."""
        shown = {}
        for request in wired.requests_for("agg")[-8:]:
            text = prompt(request.messages)
            order = re.findall(r"^[A-D]\) (\w+)$", text, re.M)
            shown[re.findall(r"Pick beta \((\d)\)", text)[0]] = "ABCD"[order.index("beta")]
        return shown

    out = _json(capsys, str(path), "--preset", "two", "--limit", "8")
    assert next(s for s in out["systems"] if s["name"] == "two")["quality"] == 1.0
    shuffled = letters_shown()
    assert len(shuffled) == 8 and len(set(shuffled.values())) > 1  # the right letter moves from task to task
    _json(capsys, str(path), "--preset", "two", "--limit", "8")
    assert letters_shown() == shuffled  # the same seed, the same order
    in_order = _json(capsys, str(path), "--preset", "two", "--seed", "none")
    assert set(letters_shown().values()) == {"B"}  # the file's order
    # What always answering one letter would score: the floor a system has to clear.
    assert in_order["constant_baselines"] == [{"kind": "choice", "answer": "B", "right": 8, "n": 8, "accuracy": 1.0}]
    assert out["constant_baselines"][0]["right"] < 8


def test_reports_say_what_was_read_and_eval_show_lays_it_out(
    wired: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def agg(body: dict[str, Any]) -> Reply:
        n = _asked(body)
        if n == 1:
            return Reply(text="Between 1 and 3 <b>")
        return Reply(text=f"{reference_heading(1, 'wire:ref-a')}\nANSWER: {n + 1}" if n == 2 else f"ANSWER: {n + 1}")

    wired.script("agg", agg)
    folder = tmp_path / "report"
    out = _json(capsys, str(_tasks(tmp_path, 3)), "--preset", "two", "--report", str(folder))
    two = next(s for s in out["systems"] if s["name"] == "two")
    assert two["unreadable"] == 1 and two["quality"] == pytest.approx(2 / 3)
    assert two["tokens_complete"] is True and two["layers_run"] == 1.0
    assert two["echoed_markers"] == 1  # task 2's copied heading, taken out before its answer was read (right)
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert 'id="t1"' in page and "the last line with a number holds 2 and no answer" in page
    assert "Between 1 and 3 &lt;b&gt;" in page and "3 <b>" not in page  # a reply is text, never markup
    report = (folder / "report.md").read_text(encoding="utf-8")
    assert "Status: **done** · 3 of 3 answers · wall time" in report and "| unreadable |" in report
    assert main(["eval", "show", "last"]) == 0
    grid = capsys.readouterr().out
    assert re.search(r"^t1\s+\?", grid, re.M) and re.search(r"^t0\s+✓", grid, re.M)
    assert main(["eval", "show", "last", "t1"]) == 0
    shown = capsys.readouterr().out
    assert "── ? two: unreadable, read nothing (the last line with a number holds 2" in shown
    assert "What is 1 plus one?" in shown and "Between 1 and 3 <b>" in shown
    assert main(["eval", "show", "last", "t9"]) == 2
    assert "has no task 't9'" in capsys.readouterr().err


def test_off_a_terminal_progress_is_a_line_now_and_then() -> None:
    err = io.StringIO()
    now = [100.0]
    bar = ProgressBar(err, enabled=True, terminal=False, now=lambda: now[0])
    bar.line()
    assert err.getvalue() == ""  # nothing to say before the run's first report
    bar(Snapshot(total=40, done=0, started=100.0))
    assert err.getvalue() == ""  # a report is kept for the next line, not drawn
    now[0] = 190.0
    bar(Snapshot(total=40, done=3, failed=1, started=100.0))
    bar.line()
    assert err.getvalue() == "moa-chat: answers 3/40 · 1 failed · 2.0/min · ETA 1110s · $0 · 1m30s\n"
    assert plain_line(Snapshot(total=4, done=4, started=0.0), 12.0).startswith("moa-chat: answers 4/4 · 0.3/s")
    bar.start()
    bar.end()  # the ticker stops at once: no line owed, none written
    assert err.getvalue().count("\n") == 1
    quiet = io.StringIO()
    silent = ProgressBar(quiet, enabled=False, terminal=False)
    silent.start()
    silent(Snapshot(total=1))
    silent.line()
    silent.end()
    assert quiet.getvalue() == ""
