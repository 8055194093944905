"""The file tools under a symlink race: another process keeps swapping a path between a file inside the
workspace and a symlink to a secret outside it (and a folder between real and a link outside), while the
model's calls read and write through it. Nothing outside may ever be read or written, nor created: not
an empty file, not a folder, when a parent folder is swapped between the check and the open."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest
from moa_chat.engine.cancel import CancelToken
from moa_chat.tools import ToolError, Workspace
from moa_chat.tools.builtin import builtin_tools
from waiting import DEADLINE

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
        [sys.executable, "-c", RACER, str(root), str(outside), str(DEADLINE)], stdout=subprocess.PIPE, text=True
    )
    tools = {tool.name: tool for tool in builtin_tools(Workspace(root))}
    yield tools, outside, racer
    racer.kill()
    racer.wait()


def test_read_file_never_reads_outside_while_the_path_is_swapped(race):
    tools, _outside, racer = race
    reads = refused = 0
    deadline = time.monotonic() + DEADLINE
    while (reads <= 100 or refused <= 100) and time.monotonic() < deadline:  # until both sides of the race are hit
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
    writes = refused = 0
    deadline = time.monotonic() + DEADLINE
    while (writes <= 50 or refused <= 50) and time.monotonic() < deadline:  # until both sides of the race are hit
        for path in ("target.txt", "sub/secret.txt"):
            try:
                tools["write_file"].run({"path": path, "content": "WRITTEN BY THE MODEL"}, CancelToken())
                writes += 1
            except ToolError:
                refused += 1
    assert writes > 50 and refused > 50
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


FOLDER_RACER = textwrap.dedent(
    """
    import os, sys, time
    root, outside, rounds, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    folder, aside = os.path.join(root, "sub"), os.path.join(root, "sub.real")

    def restore(n):
        # write_file made a new sub/ in a gap (inside, so allowed): move it out of the way, put ours back.
        try:
            if os.path.islink(folder):
                os.unlink(folder)
            if os.path.isdir(aside):
                if os.path.lexists(folder):
                    os.rename(folder, f"{folder}.made-{n}")
                os.rename(aside, folder)
        except OSError:
            pass  # raced again: the next round tries again

    deadline = time.monotonic() + seconds
    for n in range(rounds):
        if n % 100 == 0 and time.monotonic() > deadline:
            break
        try:
            # sub/: a real folder inside, then a symlink to the outside folder, then back.
            os.rename(folder, aside)
            os.symlink(outside, folder)
            os.unlink(folder)
            os.rename(aside, folder)
        except OSError:
            restore(n)
    """
)


@pytest.fixture
def folder_race(tmp_path):
    """sub/ swapped, over and over, between a real folder inside the workspace and a link to `outside`
    (which has a deeper/ folder, so that sub/deeper/... resolves out there too)."""
    root, outside = tmp_path / "workspace", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    (outside / "deeper").mkdir(parents=True)
    racer = subprocess.Popen([sys.executable, "-c", FOLDER_RACER, str(root), str(outside), "1000000", "3"])
    yield Workspace(root), outside, racer
    racer.kill()
    racer.wait()


def made_outside(outside):
    return sorted(str(p.relative_to(outside)) for p in outside.rglob("*") if p.name != "deeper")


def test_opening_to_create_never_creates_a_file_outside_while_a_parent_folder_is_swapped(folder_race):
    ws, outside, racer = folder_race
    created = refused = 0
    for n in range(200_000):  # bounded, and over when the racer is
        if racer.poll() is not None:
            break
        try:
            fd, _path = ws.open(f"sub/new-{n}.txt", os.O_WRONLY | os.O_CREAT)
            os.close(fd)
            created += 1
        except ToolError:
            refused += 1
    assert made_outside(outside) == []  # not even an empty file
    assert created > 10 and refused > 10  # both sides of the race were hit


def test_write_file_never_creates_files_or_folders_outside_while_a_parent_folder_is_swapped(folder_race):
    ws, outside, racer = folder_race
    write_file = next(tool for tool in builtin_tools(ws) if tool.name == "write_file")
    created = refused = 0
    for n in range(100_000):
        if racer.poll() is not None:
            break
        for path in (f"sub/new-{n}.txt", f"sub/deeper/new-{n}.txt", f"sub/made-{n}/new.txt"):
            try:
                write_file.run({"path": path, "content": "WRITTEN BY THE MODEL"}, CancelToken())
                created += 1
            except ToolError:
                refused += 1
    assert made_outside(outside) == []
    assert created > 10 and refused > 10


@pytest.mark.parametrize("path", ["sub/new.txt", "sub/deeper/new.txt", "sub/made/new.txt"])
def test_a_parent_folder_swapped_right_after_the_check_is_refused_and_nothing_is_made_outside(
    tmp_path, monkeypatch, path
):
    """The race's worst moment, every time: the check passes on the real folder, then sub/ becomes a link."""
    root, outside = tmp_path / "workspace", tmp_path / "outside"
    (root / "sub" / "deeper").mkdir(parents=True)
    (outside / "deeper").mkdir(parents=True)
    ws = Workspace(root)
    checked = Workspace.resolve

    def check_then_swap(self, raw):
        resolved = checked(self, raw)
        if (root / "sub").is_dir() and not (root / "sub").is_symlink():
            (root / "sub").rename(root / "sub.real")
            (root / "sub").symlink_to(outside)
        return resolved

    monkeypatch.setattr(Workspace, "resolve", check_then_swap)
    with pytest.raises(ToolError, match="changed to a link while opening"):
        ws.open(path, os.O_WRONLY | os.O_CREAT, make_folders=True)
    assert made_outside(outside) == []
