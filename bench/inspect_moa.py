"""moa-chat's bundled task sets as inspect-ai tasks: a third-party harness scoring a panel through `moa-chat api`.

Two readings of each set:

- `*_as_eval`: the prompt exactly as `moa-chat eval` sends it (the options shuffled with the same seed, the same
  "end with `ANSWER: X`" line), read by inspect-ai's own `ANSWER:` scorers. Its score should agree with eval's
  within their intervals; where it does not, one of the two reads answers wrongly.
- `*_inspect`: inspect-ai's own way, as a user of it would write the task: its `multiple_choice()` template
  and `choice()` scorer; for numbers, the task's prompt and `match(numeric=True)` (the last number).

    moa-chat api --preset local --port 8081 &
    export MOA_BASE_URL=http://127.0.0.1:8081/v1 MOA_API_KEY=$MOA_CHAT_API_KEY
    inspect eval bench/inspect_moa.py@multiple_choice_as_eval --model openai-api/moa/local --max-connections 1

`-T limit=10` takes the first ten tasks, `-T seed=N` the seed `moa-chat eval --seed N` used.
"""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import GenerateConfig
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, answer, choice, match, scorer, stderr
from inspect_ai.solver import TaskState, generate, multiple_choice
from moa_chat.eval.tasks import load_tasks

try:  # the answer key as eval arranges it (an older moa-chat sends the options in the file's order)
    from moa_chat.eval.answer_key import DEFAULT_SEED, arranged
except ImportError:  # pragma: no cover - only for cross-checking an older moa-chat
    DEFAULT_SEED, arranged = None, None  # type: ignore[assignment]

ANSWER_NUMBER = r"(?i)ANSWER\s*:\s*([^\n]+)"


def _tasks(name: str, limit: int | None, seed: int | None) -> list:  # type: ignore[type-arg]
    tasks = load_tasks(name).tasks
    if arranged is not None:
        tasks = arranged(tasks, seed)
    return tasks[:limit] if limit else tasks


@task
def multiple_choice_as_eval(limit: int | None = None, seed: int | None = DEFAULT_SEED) -> Task:
    samples = [Sample(id=t.id, input=t.text(), target=t.check.answer) for t in _tasks("multiple_choice", limit, seed)]
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=answer("letter"))


@task
def multiple_choice_inspect(limit: int | None = None) -> Task:
    samples = [
        Sample(id=t.id, input=t.prompt, choices=list(t.check.choices), target=t.check.answer)
        for t in _tasks("multiple_choice", limit, None)
    ]
    return Task(dataset=MemoryDataset(samples), solver=multiple_choice(), scorer=choice())


@scorer(metrics=[accuracy(), stderr()])
def number_after_answer():  # type: ignore[no-untyped-def]
    """The last number on the reply's last `ANSWER:` line, compared as inspect's `match(numeric=True)` does."""
    import re

    from inspect_ai.scorer._common import match_str

    async def score(state: TaskState, target: Target) -> Score:
        found = re.findall(ANSWER_NUMBER, state.output.completion)
        if not found:
            return Score(value=INCORRECT, answer="", explanation=state.output.completion)
        read, right = match_str(found[-1], target.text, location="end", numeric=True)
        return Score(value=CORRECT if right else INCORRECT, answer=read, explanation=state.output.completion)

    return score


@task
def arithmetic_as_eval(limit: int | None = None) -> Task:
    samples = [Sample(id=t.id, input=t.text(), target=f"{t.check.value:g}") for t in _tasks("arithmetic", limit, None)]
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=number_after_answer())


@task
def arithmetic_inspect(limit: int | None = None) -> Task:
    samples = [Sample(id=t.id, input=t.prompt, target=f"{t.check.value:g}") for t in _tasks("arithmetic", limit, None)]
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=match(numeric=True), config=GenerateConfig())
