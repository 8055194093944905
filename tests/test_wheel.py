"""The wheel users install: built with `pip wheel`, installed into a fresh venv with no editable install,
and run from there. Every subpackage, stylesheet and preset of the source tree must be inside."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns(".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache")


def expected_files() -> set[str]:
    """What the wheel must hold, read from the source tree (so a new folder is expected at once)."""
    files = {f"moa_chat/{p.relative_to(ROOT / 'app').as_posix()}" for p in (ROOT / "app").rglob("*.py")}
    files |= {f"moa_chat/styles/{p.name}" for p in (ROOT / "styles").iterdir() if p.suffix in (".tcss", ".py")}
    files |= {f"moa_chat/presets/{p.name}" for p in (ROOT / "presets").iterdir() if p.suffix in (".yaml", ".py")}
    return {f for f in files if "__pycache__" not in f}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Build from a copy: an in-tree build leaves build/ behind, and a stale build/ can smuggle old files in.
    source = tmp_path_factory.mktemp("source") / "moa-chat"
    shutil.copytree(ROOT, source, ignore=SKIP)
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--quiet", "-w", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    (found,) = out.glob("moa_chat-*.whl")
    return found


def test_the_wheel_holds_every_module_stylesheet_and_preset(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = expected_files() - names
    assert not missing, f"left out of the wheel: {sorted(missing)}"
    assert not [n for n in names if n.startswith(("app/", "styles/", "presets/", "tests/"))]


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only the wheel installed; its dependencies come from this interpreter's
    site-packages through a .pth line (no network, and no editable moa_chat: .pth files of an added
    path are not run, so this environment's editable finder stays out)."""
    env = tmp_path_factory.mktemp("venv") / "env"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert install.returncode == 0, install.stderr
    return env


def run_installed(env: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(env / "bin" / "moa-chat"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=home,  # not the repository: nothing of the source tree can be picked up
        env={**os.environ, "MOA_CHAT_HOME": str(home)},
    )


def test_the_installed_wheel_runs_from_its_own_venv(installed: Path, home: Path) -> None:
    where = subprocess.run(
        [str(installed / "bin" / "python"), "-c", "import moa_chat; print(moa_chat.__file__)"],
        capture_output=True,
        text=True,
        cwd=home,
        check=True,
    ).stdout
    assert str(installed) in where and str(ROOT) not in where  # the wheel's copy, not the source tree
    presets = run_installed(installed, home, "presets")
    assert presets.returncode == 0, presets.stderr
    assert "demo" in presets.stdout and "frontier" in presets.stdout
    answer = run_installed(installed, home, "ask", "--preset", "demo", "hi")
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.startswith("*Simulated reply")
