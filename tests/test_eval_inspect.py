"""`moa-chat eval` cross-checked against a third-party harness: inspect-ai runs the bundled sets (bench/inspect_moa.py)
against `moa-chat api`, and `moa-chat eval` runs the same tasks on the same preset. With the same prompt and the
same `ANSWER:` reading, the two scores agree within their intervals; inspect-ai's own multiple-choice template
scores the same panel too."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_helpers import ApiProcess, configure, start_api
from moa_chat.cli import main
from moa_chat.eval.answer_key import DEFAULT_SEED, arranged
from moa_chat.eval.checks import Choice, Number
from moa_chat.eval.stats import wilson
from moa_chat.eval.tasks import load_tasks
from moa_chat.providers.loopback_server import Reply
from scripted_server import ScriptedServer

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("inspect_ai") is None,
    reason="inspect-ai is not installed (pip install inspect-ai, or the test extra)",
)
ROOT = Path(__file__).parent.parent
LIMIT = 8


def _key() -> dict[str, tuple[str, int]]:
    """Each task's prompt as eval and inspect_moa.py send it → (its right answer, its place in the set)."""
    key = {}
    for name in ("multiple_choice", "arithmetic"):
        for place, task in enumerate(arranged(load_tasks(name).tasks[:LIMIT], DEFAULT_SEED)):
            right = task.check.answer if isinstance(task.check, Choice) else f"{task.check.value:g}"  # type: ignore[union-attr]
            assert isinstance(task.check, Choice | Number)
            key[task.text()] = (right, place)
    return key


def _panel(key: dict[str, tuple[str, int]]) -> Any:
    """A scripted model that answers right on most tasks, each place with its own way of writing an answer:
    the `ANSWER:` line (which both harnesses read), a phrase only eval's fallback reads, and a list nobody can."""

    def reply(body: dict[str, Any]) -> Reply:
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if prompt not in key:
            return Reply(text="Not sure.")  # a prompt written some other way (inspect-ai's own template)
        right, place = key[prompt]
        wrong = "D" if right != "D" else "A"
        if right[0].isdigit() or right[0] == "-":
            wrong = str(int(float(right)) + 1)
        if place == 5:
            return Reply(text=f"Thinking it through, the answer is {right}.")  # eval reads it; inspect does not
        if place == 6:
            return Reply(text="A) one\nB) two")  # no one can read this
        return Reply(text=f"Working.\nANSWER: {wrong if place == 3 else right}")

    return reply


@pytest.fixture
def api(home: Path, llm_server: ScriptedServer) -> Iterator[ApiProcess]:
    configure(home, llm_server)
    panel = _panel(_key())
    for model in ("ref-a", "ref-b", "ref-c", "agg"):
        llm_server.script(model, panel)
    server = start_api(home)
    yield server
    server.stop()


def _inspect(api: ApiProcess, task: str, logs: Path) -> float:
    inspect = Path(sys.executable).with_name("inspect")
    env = dict(os.environ, MOA_BASE_URL=api.base_url, MOA_API_KEY=api.token, INSPECT_LOG_DIR=str(logs))
    command = [str(inspect), "eval", f"{ROOT / 'bench' / 'inspect_moa.py'}@{task}", "-T", f"limit={LIMIT}"]
    options = ["--model", "openai-api/moa/wire", "--log-format", "json", "--display", "none", "--max-connections", "2"]
    done = subprocess.run(
        [*command, *options],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=logs.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [log] = [p for p in logs.glob("*.json") if task.replace("_", "-") in p.name]
    results = json.loads(log.read_text(encoding="utf-8"))["results"]
    return float(results["scores"][0]["metrics"]["accuracy"]["value"])


def _eval(name: str, capsys: pytest.CaptureFixture[str]) -> float:
    assert main(["eval", name, "--preset", "wire", "--limit", str(LIMIT), "--json", "-q"]) == 0
    out = json.loads(capsys.readouterr().out)
    return float(next(s["quality"] for s in out["systems"] if s["name"] == "wire"))


@pytest.mark.parametrize(
    ("bundled", "task"), [("multiple_choice", "multiple_choice_as_eval"), ("arithmetic", "arithmetic_as_eval")]
)
def test_eval_and_inspect_ai_agree_on_the_same_prompt_and_reading(
    api: ApiProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str], bundled: str, task: str
) -> None:
    theirs = _inspect(api, task, tmp_path / "logs")
    ours = _eval(bundled, capsys)
    # Six of eight stated on the ANSWER: line (five right), one only in a phrase, one a list of options.
    assert theirs == pytest.approx(5 / 8) and ours == pytest.approx(6 / 8)
    mine, other = wilson(ours * LIMIT, LIMIT), wilson(theirs * LIMIT, LIMIT)
    assert mine.contains(theirs) and other.contains(ours)


def test_inspect_ais_own_multiple_choice_template_runs_against_the_panel(api: ApiProcess, tmp_path: Path) -> None:
    # inspect-ai's template is not eval's prompt: the scripted panel does not know it and answers nothing it reads.
    assert _inspect(api, "multiple_choice_inspect", tmp_path / "logs") == 0.0
    for _ in range(LIMIT):
        assert " wire 200 " in api.log_line("POST /v1/chat/completions")
