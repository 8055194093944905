"""Input built to exhaust a parser: YAML alias bombs, nesting thousands deep, numbers JSON cannot hold. Each
reaches the real process (`moa-chat ask` and `moa-chat eval` with such files, `moa-chat api` over HTTP) and
gets its ordinary error: exit 2 with file:line and the limit, or a 400 naming the field. Never a
traceback, a hang or unbounded memory (the processes here run under a 1 GB address-space limit)."""

from __future__ import annotations

import json
import resource
import subprocess
import urllib.error
import urllib.request

import pytest
from api_helpers import ApiProcess
from conftest import WIRE_CONFIG, run_moa, write_config

ONE_GB = 1 << 30


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ONE_GB, ONE_GB))


def moa(*args: str) -> subprocess.CompletedProcess[str]:
    """moa-chat with at most 1 GB of memory: a parser that expands without bound dies, it never swaps."""
    return run_moa(*args, before=_capped)


def alias_bomb() -> str:
    """Nine anchors, each a list of nine aliases to the one before, and *i: 9^9 (387 million) values."""
    lines = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    return "{" + ", ".join(lines) + "}"


def test_a_yaml_alias_bomb_in_a_config_value_is_refused_at_once_with_its_line(home, llm_server):
    config = write_config(
        home,
        WIRE_CONFIG.format(base_url=llm_server.base_url, extra="").replace(
            "        model: agg\n", f"        model: agg\n        extra_body: {{anchors: {alias_bomb()}, x: *i}}\n"
        ),
    )
    assert "*i}" in config.read_text()
    result = moa("ask", "-q", "hi")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr
    line = next(n for n, text in enumerate(config.read_text().splitlines(), 1) if "extra_body" in text)
    assert f"{config}:{line}: more than 100,000 values once each alias (*name) is written out" in result.stderr
    assert "moa-chat reads at most 100,000 values" in result.stderr
    assert llm_server.requests == []


@pytest.mark.parametrize("levels", [2_000, 100_000])
def test_a_config_nested_thousands_deep_is_refused_with_its_line_not_a_recursion_error(home, levels):
    (home / "config.yaml").write_text("moa:\n  presets:\n    deep: " + "[" * levels + "]" * levels + "\n")
    result = moa("ask", "-q", "hi")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr
    assert f"{home / 'config.yaml'}:3: nested more than 64 levels deep" in result.stderr
    assert "moa-chat reads at most 64 levels" in result.stderr


def test_a_config_nested_deep_in_block_style_is_refused_too(home):
    body = "".join("  " * depth + f"k{depth}:\n" for depth in range(1, 200))
    (home / "config.yaml").write_text("moa:\n" + body)
    result = moa("presets")
    assert result.returncode == 2, result.stderr
    assert "nested more than 64 levels deep" in result.stderr and "Traceback" not in result.stderr


def test_an_eval_task_nested_100k_deep_is_refused_with_its_line_and_field(home, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    tasks.write_text(f'{{"prompt": "fine", "expected": "4"}}\n{{"prompt": "deep", "expected": {deep}}}\n')
    result = moa("eval", str(tasks), "--preset", "demo", "-q")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr
    assert f"{tasks}:2: expected[0][0]" in result.stderr and "nested more than 64 levels deep" in result.stderr


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('{"prompt": "p", "number": NaN}', "number: NaN is not a number JSON allows"),
        ('{"prompt": "p", "number": 1e999}', "number: 1e999 is not a number JSON allows"),
        ('{"prompt": "p", "number": "nan"}', "number: expected a finite number, got 'nan'"),
        ('{"prompt": "p", "number": 4, "tolerance": Infinity}', "tolerance: Infinity is not a number JSON allows"),
    ],
)
def test_an_eval_task_with_a_non_finite_number_is_refused(home, tmp_path, line, said):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(line + "\n")
    result = moa("eval", str(tasks), "--preset", "demo", "-q")
    assert result.returncode == 2, result.stderr
    assert f"{tasks}:1: {said}" in result.stderr


def test_a_yaml_eval_task_with_nan_is_refused(home, tmp_path):
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("- prompt: p\n  number: .nan\n")
    result = moa("eval", str(tasks), "--preset", "demo", "-q")
    assert result.returncode == 2, result.stderr
    assert f"{tasks}:2: number: expected a finite number, got nan" in result.stderr


# --------------------------------------------------------------------------- the API's bodies


def post(api: ApiProcess, body: bytes) -> tuple[int, dict[str, object]]:
    headers = {"Authorization": f"Bearer {api.token}", "Content-Type": "application/json"}
    request = urllib.request.Request(f"{api.base_url}/chat/completions", data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_an_api_body_nested_50k_deep_is_a_400_naming_the_field(api, llm_server):
    deep = "[" * 50_000 + "]" * 50_000
    body = f'{{"model": "wire", "messages": [{{"role": "user", "content": {deep}}}]}}'.encode()
    status, answer = post(api, body)
    assert status == 400, answer
    error = answer["error"]
    assert isinstance(error, dict)
    assert error["param"].startswith("messages[0].content[0][0]")
    assert "nested more than 64 levels deep" in error["message"]
    line = api.log_line("POST /v1/chat/completions")
    assert " 400 " in line and "(invalid_value)" in line
    api.stop()
    rest = []
    while (line := api.lines.get(timeout=30)) != "<eof>":
        rest.append(line)
    assert not any("Traceback" in line for line in rest), rest
    assert llm_server.requests == []


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ('{"model": "wire", "temperature": NaN, "messages": [{"role": "user", "content": "hi"}]}', "temperature"),
        ('{"model": "wire", "top_p": Infinity, "messages": [{"role": "user", "content": "hi"}]}', "top_p"),
        ('{"model": "wire", "seed": 1, "logit_bias": {"50256": -1e999}, "messages": []}', "logit_bias.50256"),
    ],
)
def test_nan_and_infinity_in_an_api_body_are_a_400_naming_the_field(api, llm_server, body, param):
    status, answer = post(api, body.encode())
    assert status == 400, answer
    error = answer["error"]
    assert isinstance(error, dict)
    assert error["param"] == param and "is not a number JSON allows" in error["message"]
    assert "provider" not in error["message"]
    assert llm_server.requests == []
