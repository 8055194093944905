"""The system clipboard through its tools, with fake tools on PATH: which one is used, when, and what the
message says happened."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from moa_chat import clipboard
from moa_chat.clipboard import CopyOutcome, copy, tmux_set_clipboard, usable_tools


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    return folder


def tool(folder: Path, name: str, body: str) -> None:
    script = folder / name
    # Its own PATH for cat and echo: the one it is run with holds the fake tools alone.
    script.write_text(f"#!/bin/sh\nPATH=/usr/bin:/bin\n{body}\n")
    script.chmod(0o755)


def recorder(folder: Path, name: str, out: Path) -> None:
    """A fake clipboard tool that keeps what it was given, and the arguments it was called with."""
    tool(folder, name, f'echo "$@" > "{out}.args"\ncat > "{out}"')


def test_xclip_takes_the_text_on_stdin_when_x_is_there(bin_dir, tmp_path):
    recorder(bin_dir, "xclip", tmp_path / "got")
    text = "héllo\nwörld — ünïcode\n"
    outcome = copy(text, env={"PATH": str(bin_dir), "DISPLAY": ":0"})
    assert outcome == CopyOutcome(tool="xclip")
    assert (tmp_path / "got").read_text(encoding="utf-8") == text
    assert (tmp_path / "got.args").read_text().split() == ["-selection", "clipboard"]
    assert outcome.message("the last reply (20 characters)") == (
        "Copied the last reply (20 characters) with xclip.",
        "information",
    )


def test_no_display_no_x_tools(bin_dir, tmp_path):
    recorder(bin_dir, "xclip", tmp_path / "got")
    recorder(bin_dir, "xsel", tmp_path / "got")
    assert usable_tools({"PATH": str(bin_dir)}) == []
    outcome = copy("x", env={"PATH": str(bin_dir)})
    assert outcome.tool is None and not (tmp_path / "got").exists()


def test_wayland_comes_first_and_pbcopy_needs_no_display(bin_dir, tmp_path):
    for name in ("wl-copy", "xclip", "xsel", "pbcopy"):
        recorder(bin_dir, name, tmp_path / name)
    env = {"PATH": str(bin_dir), "DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}
    assert [t.name for t, _ in usable_tools(env)] == ["wl-copy", "xclip", "xsel", "pbcopy"]
    assert copy("w", env=env).tool == "wl-copy"
    assert [t.name for t, _ in usable_tools({"PATH": str(bin_dir)})] == ["pbcopy"]


def test_a_failing_tool_gives_way_to_the_next_and_is_named(bin_dir, tmp_path):
    tool(bin_dir, "xclip", "cat > /dev/null; echo 'Error: cannot open display' >&2; exit 1")
    recorder(bin_dir, "xsel", tmp_path / "got")
    outcome = copy("text", env={"PATH": str(bin_dir), "DISPLAY": ":9"})
    assert outcome.tool == "xsel" and outcome.failures == ("xclip: exit status 1",)
    assert (tmp_path / "got").read_text() == "text"
    assert (tmp_path / "got.args").read_text().split() == ["--clipboard", "--input"]


def test_a_tool_that_hangs_is_given_up_on(bin_dir):
    tool(bin_dir, "xclip", "sleep 30")
    started = time.monotonic()
    outcome = copy("text", env={"PATH": str(bin_dir), "DISPLAY": ":0"}, timeout=0.5)
    assert time.monotonic() - started < 5
    assert outcome.tool is None and outcome.failures == ("xclip: no answer in 0.5s",)
    message, severity = outcome.message("the text")
    assert "OSC 52" in message and "xclip: no answer in 0.5s" in message and severity == "information"


def test_a_tool_left_serving_the_clipboard_does_not_hold_the_copy_up(bin_dir, tmp_path):
    # xclip and wl-copy fork and stay to serve the selection: the copy must not wait on that child.
    tool(bin_dir, "xclip", f'cat > "{tmp_path}/got"; (sleep 10 &) ; exit 0')
    started = time.monotonic()
    assert copy("text", env={"PATH": str(bin_dir), "DISPLAY": ":0"}).tool == "xclip"
    assert time.monotonic() - started < 5


def test_outside_tmux_the_message_says_osc_52_and_not_copied(bin_dir):
    outcome = copy("text", env={"PATH": str(bin_dir)})
    assert outcome == CopyOutcome()
    message, severity = outcome.message("the last code block (3 lines)")
    assert message.startswith("Sent the last code block (3 lines) to the terminal's clipboard (OSC 52)")
    assert "copied if the terminal allows it" in message and "Ctrl+V" in message
    assert "Copied" not in message and severity == "information"


@pytest.mark.parametrize(
    ("setting", "needs_the_option"),
    [("external", True), ("off", True), ("on", False), ("", True)],
)
def test_inside_tmux_the_message_follows_set_clipboard(bin_dir, setting, needs_the_option):
    tool(bin_dir, "tmux", f'[ "$*" = "show-options -gv set-clipboard" ] && echo "{setting}"')
    env = {"PATH": str(bin_dir), "TMUX": "/tmp/tmux-1000/default,42,0"}
    assert tmux_set_clipboard(env) == setting
    outcome = copy("text", env=env)
    assert outcome.tool is None and outcome.tmux == setting
    message, severity = outcome.message("the last reply (4 characters)")
    assert "OSC 52" in message and "Copied" not in message
    if needs_the_option:
        assert "tmux passes it on only with `set -g set-clipboard on`" in message and severity == "warning"
        assert (f"it is {setting!r} here" in message) == bool(setting)
    else:
        assert "tmux passes it on (set-clipboard on)" in message and severity == "information"


def test_no_tmux_variable_no_tmux_question(bin_dir, tmp_path):
    tool(bin_dir, "tmux", f'touch "{tmp_path}/asked"; echo on')
    assert tmux_set_clipboard({"PATH": str(bin_dir)}) is None
    assert not (tmp_path / "asked").exists()
    assert tmux_set_clipboard({"PATH": str(tmp_path / "nowhere"), "TMUX": "x"}) == ""  # tmux itself not found


def test_the_module_stays_free_of_textual():
    assert "textual" not in clipboard.__dict__ and "import textual" not in Path(clipboard.__file__).read_text()
