"""The file tools under a symlink race: another process keeps swapping a path between a file inside the
workspace and a symlink to a secret outside it (and a folder between real and a link outside), while the
model's calls read and write through it. Nothing outside may ever be read or written."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
from moa_chat.engine.cancel import CancelToken
from moa_chat.tools import ToolError, Workspace
from moa_chat.tools.builtin import builtin_tools

RACER = textwrap.dedent(
    """
    import os, sys, time
    root, outside, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    file, folder = os.path.join(root, "target.txt"), os.path.join(root, "sub")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "secret.txt"), "w") as handle:
        handle.write("inside text")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        # target.txt: a file inside, then (atomically) a symlink to the secret outside.
        with open(file + ".new", "w") as handle:
            handle.write("inside text")
        os.replace(file + ".new", file)
        os.symlink(os.path.join(outside, "secret.txt"), file + ".link")
        os.replace(file + ".link", file)
        # sub/: a real folder inside, then a symlink to the outside folder, then back.
        os.rename(folder, folder + ".real")
        os.symlink(outside, folder)
        os.unlink(folder)
        os.rename(folder + ".real", folder)
    """
)


@pytest.fixture
def race(tmp_path):
    root, outside = tmp_path / "workspace", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE SECRET")
    (root / "target.txt").write_text("inside text")
    racer = subprocess.Popen(
        [sys.executable, "-c", RACER, str(root), str(outside), "4"], stdout=subprocess.PIPE, text=True
    )
    tools = {tool.name: tool for tool in builtin_tools(Workspace(root))}
    yield tools, outside, racer
    racer.kill()
    racer.wait()


def test_read_file_never_reads_outside_while_the_path_is_swapped(race):
    tools, _outside, racer = race
    reads = refused = 0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        for path in ("target.txt", "sub/secret.txt"):
            try:
                text = tools["read_file"].run({"path": path}, CancelToken())
            except ToolError:
                refused += 1
                continue
            reads += 1
            assert "OUTSIDE SECRET" not in text
    assert racer.poll() is None or racer.returncode == 0
    assert reads > 100 and refused > 100  # both sides of the race were hit


def test_write_file_never_writes_outside_while_the_path_is_swapped(race):
    tools, outside, _racer = race
    writes = 0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        for path in ("target.txt", "sub/secret.txt"):
            try:
                tools["write_file"].run({"path": path, "content": "WRITTEN BY THE MODEL"}, CancelToken())
                writes += 1
            except ToolError:
                pass
    assert writes > 50
    assert (outside / "secret.txt").read_text() == "OUTSIDE SECRET"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_list_directory_does_not_show_where_an_outside_link_points(tmp_path):
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "inner.txt").write_text("x")
    (root / "to-inner").symlink_to(root / "inner.txt")
    (root / "to-etc").symlink_to("/etc/hostname")
    tools = {tool.name: tool for tool in builtin_tools(Workspace(root))}
    listing = tools["list_directory"].run({"path": "."}, CancelToken())
    assert "to-inner -> inner.txt" in listing
    assert "to-etc -> (outside the working directory)" in listing and "/etc" not in listing
