"""The README's and the docs' recipes, read from the pages themselves: every `moa-chat` command they show parses
with moa-chat's own parser, every option of every command is in some page, and the recipes a new user runs
first run as written, in a shell, against a stand-in for each provider on 127.0.0.1. A page that drifts from
the code fails here, not in a user's terminal."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from api_helpers import start_api
from conftest import write_config
from moa_chat.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent  # this venv's `moa-chat`, `llm`
WAIT = 180


def blocks(page: Path, language: str) -> list[str]:
    """The page's fenced blocks in `language`."""
    text = page.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


def commands(block: str) -> list[str]:
    """A shell block's commands: a trailing backslash joins lines, and a `# comment` is cut."""
    joined = block.replace("\\\n", " ")
    found = []
    for line in joined.splitlines():
        line = line.split("  #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if line:
            found.append(line)
    return found


def shell_commands(page: Path) -> list[str]:
    """Every command the page gives to type: its ```sh blocks, and the `$ ` lines of its ```text blocks."""
    found = [command for block in blocks(page, "sh") for command in commands(block)]
    for block in blocks(page, "text"):
        found += [line[2:].split("  #", 1)[0].strip() for line in block.splitlines() if line.startswith("$ ")]
    return found


def moa_chat_argvs(command: str) -> list[list[str]]:
    """The `moa-chat …` invocations in a shell command (after a pipe, `&&`, or variable assignments)."""
    argvs = []
    for part in re.split(r"\s*(?:\|\||&&|\||;)\s*", command):
        words = shlex.split(part)
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            words = words[1:]
        if words and Path(words[0]).name == "moa-chat":
            argvs.append(words[1:])
    return argvs


DOCUMENTED = [(page, argv) for page in PAGES for command in shell_commands(page) for argv in moa_chat_argvs(command)]


def test_the_pages_show_moa_chat_commands():
    assert len(DOCUMENTED) > 40, "the recipes were not found: did the pages' code blocks change shape?"


def test_the_readme_stays_a_front_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 200, f"README.md has {len(lines)} lines: the detail belongs in docs/"


@pytest.mark.parametrize(("page", "argv"), DOCUMENTED, ids=lambda v: v.name if isinstance(v, Path) else " ".join(v))
def test_every_documented_command_parses(page, argv):
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.suppress(SystemExit):
        build_parser().parse_args(argv)
        return
    pytest.fail(f"{page.name}: moa-chat {' '.join(argv)}: {errors.getvalue().strip()}")


def _options(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, str]]:
    found = []
    for action in parser._actions:  # argparse has no public list of a parser's options
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _options(sub, f"{path} {name}")
        elif action.option_strings and action.help != argparse.SUPPRESS:
            long = [o for o in action.option_strings if o.startswith("--")]
            if long and long[0] != "--help":
                found.append((path, long[0]))
    return found


@pytest.mark.parametrize(("command", "option"), sorted(set(_options(build_parser(), "moa-chat"))))
def test_every_option_is_in_a_page(command, option):
    """In a page of docs/, the reference: an option the README's examples use needs saying what it does too."""
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES if page.parent.name == "docs")
    assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text), f"{command} {option} is in no page"


# --------------------------------------------------------------------------------------------- run as written


@pytest.fixture
def sandbox(home, llm_server, tmp_path):
    """A project folder with a git diff, a stand-in for every provider the recipes name (their keys set), and a
    shell whose `moa-chat` is this checkout's."""
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "cache.py").write_text("def cache(items):\n    return items\n")
    (project / "docs").mkdir()
    (project / "docs" / "cache.md").write_text("# The cache\n")
    (project / "CHANGELOG.md").write_text("# Changelog\n")
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=project, check=True)
    subprocess.run([*git, "add", "."], cwd=project, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=project, check=True)
    (project / "src" / "cache.py").write_text("def cache(items):\n    return list(items)\n")
    stand_ins = "".join(
        f"  {name}:\n    base_url: {llm_server.base_url}\n    max_retries: 0\n"
        for name in ("openrouter", "openai", "groq", "anthropic", "gemini")
    )
    write_config(home, "providers:\n" + stand_ins)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        MOA_CHAT_HOME=str(home),
        MOA_CHAT_DEMO_PACE="0",
        MOA_CHAT_OFFLINE_PRESET="demo",
        **{f"{name}_API_KEY": "sk-test-not-a-real-key" for name in ("OPENROUTER", "OPENAI", "GROQ", "ANTHROPIC")},
        GEMINI_API_KEY="sk-test-not-a-real-key",
    )

    def run(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", f"set -o pipefail\n{command}"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=WAIT,
            stdin=subprocess.DEVNULL,
        )

    return run


def section(page: Path, heading: str, language: str = "sh") -> str:
    """The first ```language block under `heading` on the page."""
    text = page.read_text(encoding="utf-8")
    start = text.index(heading)
    found = re.search(rf"^```{language}\n(.*?)^```$", text[start:], re.MULTILINE | re.DOTALL)
    assert found is not None, f"{page.name}: no ```{language} block under {heading!r}"
    return found.group(1)


def test_the_readmes_ask_recipes_run_as_written(sandbox):
    recipes = commands(section(ROOT / "README.md", "## `ask`"))
    assert len(recipes) >= 5
    for recipe in recipes:
        done = sandbox(recipe)
        assert done.returncode == 0, f"{recipe}\n{done.stderr}"
        assert done.stdout.strip(), recipe


def test_the_readmes_eval_example_runs_as_written(sandbox):
    block = section(ROOT / "README.md", "## `eval`", "text").splitlines()
    [command] = [line[2:].split("  #", 1)[0] for line in block if line.startswith("$ ")]
    done = sandbox(command)
    assert done.returncode == 0, done.stderr
    printed = [line.split() for line in done.stdout.splitlines() if line.strip()]
    assert printed[0] == block[1].split()  # the header, as the README shows it
    rows: dict[str, list[str]] = {}
    for row in printed:
        rows.setdefault(row[0], row)  # the table's row, not a verdict under it that starts with the same name
    for line in block[2:]:
        shown = line.split()
        assert shown[0] in rows, f"the README shows a row for {shown[0]}; the run printed none"
        assert rows[shown[0]][1:4] == shown[1:4]  # accuracy, interval and n: the demo's are deterministic


def test_the_readme_tells_when_ask_exits_141(sandbox):
    """`| head -1` takes a whole reply at once (exit 0); with --stream, the reader leaving is exit 141."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "141 when its reader left mid-reply (`--stream | head -1`;" in " ".join(text.split())
    whole = sandbox('moa-chat ask "How do I reverse a list?" --preset demo | head -1')
    assert whole.returncode == 0, whole.stderr
    streamed = sandbox(
        'MOA_CHAT_DEMO_PACE=1 moa-chat ask "How do I reverse a list?" --preset demo --stream | head -1; '
        'exit "${PIPESTATUS[0]}"'
    )
    assert streamed.returncode == 141, streamed.stderr


def test_the_llm_recipe_runs_as_written(sandbox, home, tmp_path):
    """docs/api.md's `llm` recipe, its shell block run as it stands, against `moa-chat api` on 127.0.0.1."""
    if not (BIN / "llm").exists():
        pytest.skip("the llm CLI is not installed (pip install -e '.[test]')")
    api = start_api(home)
    try:
        port = api.base_url.removeprefix("http://127.0.0.1:").removesuffix("/v1")
        recipe = section(ROOT / "docs" / "api.md", "`llm` ([llm.datasette.io]").replace(":8080/", f":{port}/")
        user = tmp_path / "llm-user"  # before its first use: the folder does not exist yet
        done = sandbox(f"export LLM_USER_PATH={shlex.quote(str(user))} TOKEN={shlex.quote(api.token)}\n{recipe}")
        assert done.returncode == 0, done.stderr
        assert "Simulated reply" in done.stdout
        assert (user / "extra-openai-models.yaml").is_file()
    finally:
        api.stop()
