"""The built-in tools, run for real in a temporary working directory."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest
from moa_chat.config import load_config, load_config_text
from moa_chat.engine.cancel import Cancelled, CancelToken
from moa_chat.tools import ToolError, Workspace, select_tools, tools_for
from moa_chat.tools.builtin import BUILTIN_NAMES, MAX_READ_LINES, builtin_tools


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text("# Demo project\n\nIt does things.\n")
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text("def main():\n    print('hello')\n\nmain()\n")
    (tmp_path / "secret.txt").write_text("top secret")
    return Workspace(root)


@pytest.fixture
def tools(ws):
    registry = {tool.name: tool for tool in builtin_tools(ws)}
    return registry


def run(tools, name, **arguments):
    return tools[name].run(arguments, CancelToken())


def test_every_builtin_has_a_schema_and_a_safety_flag(tools):
    assert tuple(tools) == BUILTIN_NAMES
    for tool in tools.values():
        schema = tool.schema()
        assert schema["type"] == "function" and schema["function"]["parameters"]["type"] == "object"
    assert {n for n, t in tools.items() if not t.read_only} == {"write_file", "run_command"}


def test_read_file_whole_and_by_range(tools):
    assert run(tools, "read_file", path="README.md").splitlines() == [
        "README.md (lines 1–3 of 3)",
        "# Demo project",
        "",
        "It does things.",
    ]
    ranged = run(tools, "read_file", path="src/main.py", start_line=2, end_line=2)
    assert ranged.splitlines() == ["src/main.py (lines 2–2 of 4)", "    print('hello')"]


def test_read_file_cuts_large_files_with_a_note(tools, ws):
    (ws.root / "big.txt").write_text("\n".join(f"line {i}" for i in range(1, 5001)))
    text = run(tools, "read_file", path="big.txt")
    assert f"line {MAX_READ_LINES}" in text and f"line {MAX_READ_LINES + 1}\n" not in text
    assert f"Ask for start_line={MAX_READ_LINES + 1} to read on" in text


def test_read_file_refuses_binary(tools, ws):
    (ws.root / "blob.bin").write_bytes(b"\x00\x01\x02" * 10)
    with pytest.raises(ToolError, match="binary"):
        run(tools, "read_file", path="blob.bin")


@pytest.mark.parametrize("path", ["../secret.txt", "/etc/passwd", "src/../../secret.txt"])
def test_paths_outside_the_working_directory_are_refused(tools, path):
    with pytest.raises(ToolError, match="outside the working directory"):
        run(tools, "read_file", path=path)


def test_symlinks_that_point_outside_are_refused(tools, ws):
    os.symlink(ws.root.parent / "secret.txt", ws.root / "innocent.txt")
    with pytest.raises(ToolError, match="outside the working directory"):
        run(tools, "read_file", path="innocent.txt")
    with pytest.raises(ToolError, match="outside the working directory"):
        run(tools, "write_file", path="innocent.txt", content="overwrite")
    assert (ws.root.parent / "secret.txt").read_text() == "top secret"


def test_list_directory(tools):
    listing = run(tools, "list_directory").splitlines()
    assert listing[0] == "./ (2 entries)"
    assert listing[1:] == ["src/", "README.md  (32 bytes)"]


def test_search_files_finds_lines_and_caps_results(tools, ws):
    assert run(tools, "search_files", query="PRINT") == "src/main.py:2: print('hello')\n[1 matches in 2 files searched]"
    (ws.root / "many.txt").write_text("needle\n" * 30)
    capped = run(tools, "search_files", query="needle", max_results=5)
    assert capped.count("many.txt:") == 5 and "stopped at 5 matches" in capped
    assert "no matches" in run(tools, "search_files", query="absent")
    assert run(tools, "search_files", query=r"def \w+", regex=True, glob="*.py").startswith("src/main.py:1:")


def test_write_file_previews_a_diff_then_writes(tools, ws):
    preview = tools["write_file"].preview({"path": "README.md", "content": "# Demo project\n\nIt does more.\n"})
    assert "-It does things." in preview and "+It does more." in preview and "--- a/README.md" in preview
    assert run(tools, "write_file", path="notes/new.md", content="hi\n") == "created notes/new.md (3 bytes)"
    assert (ws.root / "notes" / "new.md").read_text() == "hi\n"
    assert tools["write_file"].preview({"path": "x.md", "content": "a\nb"}).startswith("new file x.md")


def test_run_command_without_a_shell_by_default(tools):
    out = run(tools, "run_command", command=[sys.executable, "-c", "print('hi'); import sys; sys.exit(3)"])
    assert out.startswith("exit status 3") and "hi" in out
    literal = run(tools, "run_command", command="echo $HOME | cat")
    assert "$HOME | cat" in literal  # no shell: the pipe is just an argument
    shelled = run(tools, "run_command", command="echo piped | tr a-z A-Z", shell=True)
    assert "PIPED" in shelled
    with pytest.raises(ToolError, match="command not found"):
        run(tools, "run_command", command="definitely-not-a-command-xyz")


def test_run_command_timeout_and_output_cap(tools):
    started = time.monotonic()
    out = run(tools, "run_command", command=[sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert time.monotonic() - started < 5 and "timed out after 0.5s" in out
    big = run(tools, "run_command", command=[sys.executable, "-c", "print('x' * 100000)"])
    assert "bytes cut; 100,001 in all" in big and len(big) < 30_000
    huge = run(tools, "run_command", command=[sys.executable, "-c", "import sys; sys.stdout.write('y\\n' * 5_000_000)"])
    assert "10,000,000 in all" in huge and huge.rstrip().endswith("y") and len(huge) < 30_000


def test_run_command_stops_when_the_turn_is_cancelled(tools):
    cancel = CancelToken()
    import threading

    threading.Timer(0.3, cancel.cancel).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        tools["run_command"].run({"command": [sys.executable, "-c", "import time; time.sleep(30)"]}, cancel)
    assert time.monotonic() - started < 3


def test_fetch_url_reads_text_and_refuses_other_schemes(tools, llm_server):
    # The test server is local: as in a turn, the approval check comes first (and the user said yes).
    fetch = tools["fetch_url"]
    for path in ("/models", "/nothing-here"):
        assert fetch.approval_reason({"url": llm_server.base_url + path})
    text = run(tools, "fetch_url", url=llm_server.base_url + "/models")
    assert text.startswith("HTTP 200 application/json") and '"object": "list"' in text
    with pytest.raises(ToolError, match="only http"):
        run(tools, "fetch_url", url="file:///etc/passwd")
    with pytest.raises(ToolError, match="HTTP 404"):
        run(tools, "fetch_url", url=llm_server.base_url + "/nothing-here")


def test_missing_and_mistyped_arguments_are_tool_errors(tools):
    with pytest.raises(ToolError, match="missing required argument 'path'"):
        run(tools, "read_file")
    with pytest.raises(ToolError, match="argument 'start_line' must be int"):
        run(tools, "read_file", path="README.md", start_line="two")


def test_tool_selection_by_preset_and_global_setting(home, ws):
    from conftest import write_config

    config = load_config(
        write_config(
            home,
            """
        tools: [read_file, list_directory]
        moa:
          presets:
            plain:
              tools: none
              reference_models: [{provider: demo, model: simulated-analyst}]
              aggregator: {provider: demo, model: simulated-synthesizer}
            odd:
              tools: [read_file, no_such_tool]
              reference_models: [{provider: demo, model: simulated-analyst}]
              aggregator: {provider: demo, model: simulated-synthesizer}
    """,
        )
    )
    registry, warnings = tools_for(config, config.preset("demo"), ws)
    assert registry.names() == ["read_file", "list_directory"] and not warnings
    assert len(tools_for(config, config.preset("plain"), ws)[0]) == 0
    registry, warnings = tools_for(config, config.preset("odd"), ws)
    assert registry.names() == ["read_file"]
    assert warnings and "no_such_tool" in warnings[0] and "read_file" in warnings[0]
    defaults = load_config_text("")
    everything, _ = select_tools(builtin_tools(ws), defaults, defaults.preset("demo"))
    assert everything.names() == list(BUILTIN_NAMES)
    assert json.dumps(everything.schemas())  # serialisable for the wire


def test_reading_past_the_end_is_not_called_a_cut(tools):
    text = run(tools, "read_file", path="README.md", end_line=40)
    assert "cut" not in text and text.startswith("README.md (lines 1–3 of 3)")


def test_read_file_reads_on_past_the_first_bytes_of_a_large_file(tools, ws):
    (ws.root / "large.txt").write_text("".join(f"line {i} " + "x" * 100 + "\n" for i in range(1, 5001)))
    first = run(tools, "read_file", path="large.txt")
    assert "Ask for start_line=" in first and "of 5,000)" in first.splitlines()[0]
    later = run(tools, "read_file", path="large.txt", start_line=4000, end_line=4001)
    assert later.splitlines()[1].startswith("line 4000 ") and later.splitlines()[2].startswith("line 4001 ")
    with pytest.raises(ToolError, match="past the end"):
        run(tools, "read_file", path="large.txt", start_line=6000)


def test_search_skips_what_is_not_a_regular_file(tools, ws):
    os.mkfifo(ws.root / "pipe.txt")  # reading it would block forever
    started = time.monotonic()
    assert "README.md:1:" in run(tools, "search_files", query="Demo")
    assert time.monotonic() - started < 5


def test_run_command_refuses_a_timeout_that_is_not_finite(tools):
    with pytest.raises(ToolError, match="timeout"):
        run(tools, "run_command", command=[sys.executable, "-c", "pass"], timeout=float("nan"))


def test_write_file_with_text_that_cannot_be_encoded_leaves_the_file_alone(tools, ws):
    target = ws.root / "keep.txt"
    target.write_text("important data\n")
    with pytest.raises(ToolError, match="not valid text"):
        tools["write_file"].run({"path": "keep.txt", "content": "bad \ud800 text"}, CancelToken())
    assert target.read_text() == "important data\n"


def test_write_file_refuses_a_fifo_instead_of_hanging(tools, ws):
    os.mkfifo(ws.root / "pipe")
    started = time.monotonic()
    assert "not a regular file" in tools["write_file"].preview({"path": "pipe", "content": "x"})
    with pytest.raises(ToolError, match="not a regular file"):
        tools["write_file"].run({"path": "pipe", "content": "x"}, CancelToken())
    assert time.monotonic() - started < 5


def test_read_file_of_an_empty_file_says_so(tools, ws):
    (ws.root / "empty.txt").write_text("")
    assert run(tools, "read_file", path="empty.txt") == "empty.txt is empty (0 bytes)"
