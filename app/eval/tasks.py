"""Eval tasks: read from a JSONL or YAML file (or a bundled set by name), each checked as it is read.

A task is a prompt, optional attachments (paths relative to the task file, and inside its folder unless
`--allow-path` names them), optional `tools: true`, and at
most one check: `expected`, `regex`, `contains`, `choices` with `answer`, or `number` with `tolerance`.
A task with no check is judged (`rubric:` gives what the judge scores it against). Every mistake is
reported as the config's are: file, line and key.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..config.checks import parse_yaml
from ..config.model import ConfigError, did_you_mean
from ..config.yaml_positions import PositionedDict, PositionedList
from ..text.bounded_json import JsonLimitError, loads
from .checks import LETTERS, Check, Choice, Contains, Expected, Number, Regex

TASK_KEYS = (
    "id",
    "prompt",
    "attachments",
    "tools",
    "expected",
    "regex",
    "contains",
    "choices",
    "answer",
    "number",
    "tolerance",
    "rubric",
)
CHECK_KEYS = ("expected", "regex", "contains", "choices", "number")
BUNDLED_SUFFIXES = (".jsonl", ".yaml")


class TaskFileError(ConfigError):
    """A task file that cannot be used: says file, line and key, as the config's errors do."""


@dataclass(frozen=True)
class Task:
    id: str
    prompt: str
    check: Check | None = None  # None: judged
    attachments: tuple[str, ...] = ()  # absolute paths
    folder: str = ""  # the task file's folder: attachments come from there
    tools: bool = False
    rubric: str | None = None
    line: int = 0  # where it is written, for messages

    @property
    def judged(self) -> bool:
        return self.check is None

    @property
    def extractor(self) -> Callable[[str], str | None] | None:
        """What pulls this task's answer out of a reply: an adaptive panel (`layers: auto`) compares the
        references' extracted answers to see whether they already agree. None for a judged task."""
        return self.check.extract if self.check is not None else None

    def text(self) -> str:
        """The prompt as sent: a multiple-choice task's options lettered after it."""
        return self.check.render(self.prompt) if isinstance(self.check, Choice) else self.prompt

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "prompt": self.prompt,
            "check": self.check.describe() if self.check else None,
            "attachments": list(self.attachments),
            "tools": self.tools,
            "rubric": self.rubric,
        }


@dataclass
class TaskSet:
    name: str
    source: str  # the file it was read from
    tasks: list[Task] = field(default_factory=list)


def bundled_sets() -> dict[str, str]:
    """The task sets that ship with moa-chat: name → file name."""
    folder = resources.files("moa_chat.eval.sets")
    found: dict[str, str] = {}
    for entry in folder.iterdir():
        for suffix in BUNDLED_SUFFIXES:
            if entry.name.endswith(suffix):
                found[entry.name[: -len(suffix)]] = entry.name
    return found


def load_tasks(where: str) -> TaskSet:
    """Tasks from a path, or from the bundled set of that name (`arithmetic`, `multiple_choice`, `open_ended`)."""
    path = Path(where).expanduser()
    if not path.exists():
        sets = bundled_sets()
        if where not in sets:
            raise TaskFileError(
                f"no task file {where!r} and no bundled task set of that name{did_you_mean(where, sets)}; "
                f"bundled sets: {', '.join(sorted(sets))}"
            )
        entry = resources.files("moa_chat.eval.sets").joinpath(sets[where])
        with resources.as_file(entry) as bundled:
            return _read(Path(bundled), name=where)
    return _read(path, name=path.stem)


def _read(path: Path, *, name: str) -> TaskSet:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError(f"cannot read the task file: {exc}", path=path) from exc
    items = _jsonl(text, path) if path.suffix == ".jsonl" else _yaml(text, path)
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for number, (raw, line) in enumerate(items, 1):
        task = parse_task(raw, path=path, line=line, number=number)
        if task.id in seen:
            raise TaskFileError(f"id: {task.id!r} is used twice (also on line {seen[task.id]})", path=path, line=line)
        seen[task.id] = line
        tasks.append(task)
    if not tasks:
        raise TaskFileError("the file holds no tasks", path=path)
    return TaskSet(name=name, source=str(path), tasks=tasks)


def _jsonl(text: str, path: Path) -> list[tuple[object, int]]:
    items: list[tuple[object, int]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            items.append((loads(line), number))
        except json.JSONDecodeError as exc:
            raise TaskFileError(f"invalid JSON at column {exc.colno}: {exc.msg}", path=path, line=number) from exc
        except JsonLimitError as exc:
            field = exc.shorten(exc.field) or "the task"
            raise TaskFileError(f"{field}: {exc.problem}", path=path, line=number) from exc
        except ValueError as exc:  # an integer too long to read
            raise TaskFileError(f"invalid JSON: {exc}", path=path, line=number) from exc
    return items


def _yaml(text: str, path: Path) -> list[tuple[object, int]]:
    try:
        data = parse_yaml(text, path)
    except ConfigError as exc:
        raise TaskFileError(exc.message, path=path, line=exc.line) from exc
    if isinstance(data, dict) and "tasks" in data:
        data = data["tasks"]
    if not isinstance(data, list):
        raise TaskFileError("expected a list of tasks (or a mapping with `tasks:`)", path=path, line=1)
    lines = data.item_lines if isinstance(data, PositionedList) else [0] * len(data)
    return list(zip(data, lines, strict=True))


def parse_task(raw: object, *, path: Path | str, line: int, number: int) -> Task:
    """One task, checked; `number` is its place in the file (its id when it names none)."""
    if not isinstance(raw, dict):
        raise TaskFileError(
            f"task {number}: expected a mapping with a `prompt`, got {type(raw).__name__}", path=path, line=line
        )

    def where(key: str) -> int:
        return raw.line_of(key) if isinstance(raw, PositionedDict) else line

    def fail(key: str, message: str) -> TaskFileError:
        return TaskFileError(f"{key}: {message}", path=path, line=where(key))

    for key in raw:
        if key not in TASK_KEYS:
            raise fail(str(key), f"unknown key{did_you_mean(str(key), TASK_KEYS)}; a task takes {', '.join(TASK_KEYS)}")
    prompt = raw.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise TaskFileError("prompt: every task needs a prompt (text)", path=path, line=where("prompt"))
    task_id = str(raw.get("id", number))
    checks = [key for key in raw if key in CHECK_KEYS]  # in file order: the second is the one to blame
    if len(checks) > 1:
        raise fail(checks[1], f"a task takes one check; this one has {' and '.join(checks)}")
    check = _check(raw, checks[0] if checks else None, fail)
    if "answer" in raw and not isinstance(check, Choice):
        raise fail("answer", "`answer` goes with `choices` (the letter of the right option)")
    if "tolerance" in raw and not isinstance(check, Number):
        raise fail("tolerance", "`tolerance` goes with `number`")
    base = Path(path).parent
    attachments = raw.get("attachments", [])
    if isinstance(attachments, str):
        attachments = [attachments]
    if not isinstance(attachments, list) or not all(isinstance(a, str) for a in attachments):
        raise fail("attachments", "expected a list of file paths")
    tools = raw.get("tools", False)
    if not isinstance(tools, bool):
        raise fail("tools", "expected true or false")
    rubric = raw.get("rubric")
    if rubric is not None and not isinstance(rubric, str):
        raise fail("rubric", "expected text")
    return Task(
        id=task_id,
        prompt=prompt,
        check=check,
        attachments=tuple(str((base / a).expanduser()) for a in attachments),
        folder=str(base),
        tools=tools,
        rubric=rubric,
        line=line,
    )


def _check(raw: dict[Any, Any], key: str | None, fail: Any) -> Check | None:
    if key is None:
        return None
    value = raw[key]
    if key == "expected":
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise fail(key, "expected text")
        return Expected(str(value))
    if key == "regex":
        if not isinstance(value, str):
            raise fail(key, "expected a regular expression (text)")
        try:
            re.compile(value)
        except re.error as exc:
            raise fail(key, f"invalid regular expression: {exc}") from exc
        return Regex(value)
    if key == "contains":
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
            raise fail(key, "expected text or a list of texts")
        return Contains(tuple(values))
    if key == "choices":
        if (
            not isinstance(value, list)
            or not 2 <= len(value) <= len(LETTERS)
            or not all(isinstance(v, str | int | float) for v in value)
        ):
            raise fail(key, "expected a list of 2 to 26 options")
        answer = raw.get("answer")
        letters = LETTERS[: len(value)]
        if isinstance(answer, str) and answer.strip().upper() in letters and len(answer.strip()) == 1:
            letter = answer.strip().upper()
        elif answer is not None and str(answer) in [str(v) for v in value]:
            letter = letters[[str(v) for v in value].index(str(answer))]
        else:
            raise fail(
                "answer" if "answer" in raw else key,
                f"`choices` needs an `answer`: one of {', '.join(letters)} (or an option's text)",
            )
        return Choice(tuple(str(v) for v in value), letter)
    # number
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise fail(key, "expected a number")
    try:
        number = float(str(value).replace(",", ""))
    except (ValueError, OverflowError):
        raise fail(key, f"expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise fail(key, f"expected a finite number, got {value!r}: no answer can be within a tolerance of it")
    tolerance = raw.get("tolerance", 1e-6)
    if (
        isinstance(tolerance, bool)
        or not isinstance(tolerance, int | float)
        or not math.isfinite(tolerance)
        or tolerance < 0
    ):
        raise fail("tolerance", f"expected a number ≥ 0, not {tolerance!r}")
    return Number(number, float(tolerance))
