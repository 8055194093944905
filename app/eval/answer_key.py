"""A fair answer key: multiple-choice options shuffled per task with a recorded seed, and the score of always
giving the same answer, which a system has to beat before its score means anything.

A key whose right letters lean one way rewards a model that favours that letter: shuffling each task's
options with a seed (the run's, kept in its spec) spreads them, the same way on every run and resume with that
seed. The constant baselines say what no reading at all would score: the best single letter on the
multiple-choice tasks, the most common number or text on the others.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .checks import Choice, Expected, Number, normalise
from .tasks import Task

DEFAULT_SEED = 1


def arranged(tasks: Sequence[Task], seed: int | None) -> list[Task]:
    """The tasks with each multiple-choice task's options shuffled by `seed` (None: as the file has them). The
    order depends on the seed and the task's id alone, so a task reads the same in every run with that seed."""
    if seed is None:
        return list(tasks)
    return [_shuffled(task, seed) if isinstance(task.check, Choice) else task for task in tasks]


def _shuffled(task: Task, seed: int) -> Task:
    check = task.check
    assert isinstance(check, Choice)
    order = list(range(len(check.choices)))
    random.Random(f"{seed}/{task.id}").shuffle(order)
    choices = tuple(check.choices[i] for i in order)
    right = order.index(check.letters.index(check.answer))
    return dataclasses.replace(task, check=Choice(choices, check.letters[right]))


@dataclass(frozen=True)
class ConstantBaseline:
    """What always giving `answer` scores on the `n` tasks of one kind of check."""

    kind: str  # "choice", "number", "expected"
    answer: str
    right: int
    n: int

    @property
    def accuracy(self) -> float:
        return self.right / self.n if self.n else 0.0

    def describe(self) -> str:
        return f"always answering {self.answer} scores {self.right} of {self.n} ({100 * self.accuracy:.0f}%)"

    def as_json(self) -> dict[str, object]:
        return {"kind": self.kind, "answer": self.answer, "right": self.right, "n": self.n, "accuracy": self.accuracy}


def constant_baselines(tasks: Sequence[Task]) -> list[ConstantBaseline]:
    """The best constant answer for each kind of check the tasks use (regex and contains have none)."""
    found: list[ConstantBaseline] = []
    letters = Counter(t.check.answer for t in tasks if isinstance(t.check, Choice))
    choices = sum(letters.values())
    if choices:
        letter, right = sorted(letters.items(), key=lambda item: (-item[1], item[0]))[0]
        found.append(ConstantBaseline("choice", letter, right, choices))
    numbers = Counter(t.check.value for t in tasks if isinstance(t.check, Number))
    if numbers:
        value, right = sorted(numbers.items(), key=lambda item: (-item[1], item[0]))[0]
        shown = str(int(value)) if value.is_integer() else f"{value:g}"
        found.append(ConstantBaseline("number", shown, right, sum(numbers.values())))
    texts = Counter(normalise(t.check.value) for t in tasks if isinstance(t.check, Expected))
    if texts:
        text, right = sorted(texts.items(), key=lambda item: (-item[1], item[0]))[0]
        found.append(ConstantBaseline("expected", repr(text), right, sum(texts.values())))
    return found
