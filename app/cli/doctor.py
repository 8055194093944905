"""`moa-chat doctor`: is everything in place? One line per check, ✓ or ✗, and for each ✗ the fix.

It checks what the presets you can use depend on: the config file, every preset, the keys and the
endpoints of the providers your own presets (and the one moa-chat would start on) use, the local model,
and the data folder. Bundled presets you never set up are listed, not failed. Keys are never printed.
Exit 0 when all is well, 1 otherwise.
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ..config import Config, ConfigError, data_home, default_config_path, load_config, load_config_text
from ..providers import choose_start, has_key, missing_keys
from ..providers.local import INSTALL_HINT, installed_model
from ..text.inert import inert
from ..text.wording import plural
from .exit_codes import EXIT_FAILED, EXIT_OK
from .windows_report import finder, slot_windows, window_lines

ENDPOINT_TIMEOUT = 4.0


@dataclass(frozen=True)
class Check:
    ok: bool | None  # None: for information, neither passed nor failed
    text: str
    fix: str = ""


def doctor(config_path: Path | None, out: TextIO) -> int:
    checks: list[Check] = []
    path = config_path or default_config_path()
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        # Every other check still runs: on the built-in presets, which apply once the file is fixed or moved.
        fix = "fix the file at the line named, then run moa-chat doctor again"
        checks.append(Check(False, f"config: {exc}", fix))
        checks.append(Check(None, "the checks below use the built-in presets, since the config did not load"))
        config = load_config_text("", "<built-in>")
    else:
        where = f"{path} loads" if path.exists() else f"no {path} yet: the built-in presets apply"
        checks.append(Check(True, f"config: {where}"))
    checks += _presets(config)
    checks += _keys_and_endpoints(config)
    checks += _windows(config)
    checks.append(_local())
    checks.append(_data_folder())
    checks.append(_session_database())
    _print(checks, out)
    return EXIT_OK if all(c.ok is not False for c in checks) else EXIT_FAILED


def _presets(config: Config) -> list[Check]:
    checks = []
    for name, preset in sorted(config.presets.items()):
        problem = config.problems.get(name)
        if problem is not None:
            checks.append(Check(False, f"preset {name}: {problem}", "define that provider under providers:"))
        elif not preset.bundled:
            refs = len(preset.references)
            checks.append(Check(True, f"preset {name}: {plural(refs, 'reference')} → {preset.aggregator.label}"))
    return checks


def _keys_and_endpoints(config: Config) -> list[Check]:
    start = choose_start(config).preset
    used = {p for preset in config.presets.values() if not preset.bundled for p in preset.providers}
    used |= start.providers
    checks = []
    reachable = []  # an endpoint with the key it needs: worth asking for its models
    for name in sorted(used):
        spec = config.providers.get(name)
        if spec is None or not spec.base_url:
            continue  # unknown (reported with its preset) or run by moa-chat itself (checked below)
        if not has_key(name, config):
            checks.append(
                Check(False, f"{name}: {spec.api_key_env} is not set", f"export {spec.api_key_env}=... (your key)")
            )
            continue
        if spec.api_key_env:
            checks.append(Check(True, f"{name}: {spec.api_key_env} is set"))
        reachable.append(name)
    with ThreadPoolExecutor(max_workers=max(1, len(reachable))) as pool:
        checks += list(pool.map(lambda n: _endpoint(config, n), reachable))
    unused = sorted(
        {
            env
            for preset in config.presets.values()
            if preset.bundled and preset.name != start.name
            for env in missing_keys(config, preset).values()
        }
    )
    if unused:
        checks.append(Check(None, f"bundled presets waiting for a key: {', '.join(unused)} (set one to use them)"))
    return checks


def _windows(config: Config) -> list[Check]:
    """The context window of each model of your presets and of the one moa-chat starts on, and where it came
    from; information, never a failure (an unknown window is learned from the first overflow)."""
    chosen = {p.name: p for p in config.presets.values() if not p.bundled and p.name not in config.problems}
    start = choose_start(config).preset
    chosen.setdefault(start.name, start)
    checks = []
    hint = "; context_window: in the config states one"
    for name, windows in slot_windows(config, chosen.values(), finder(config)).items():
        for line in window_lines(windows):
            checks.append(Check(None, f"windows of {name}: {line}{hint if 'unknown (' in line else ''}"))
    return checks


def _endpoint(config: Config, provider: str) -> Check:
    from ..llm import list_models

    try:
        models = list_models(provider, config, timeout=ENDPOINT_TIMEOUT)
    except Exception as exc:  # any failure is what this check reports
        reason = str(getattr(exc, "reason", exc))
        return Check(False, f"{provider}: {inert(reason)}", "check base_url, the network, and that the key is valid")
    return Check(True, f"{provider}: answers ({len(models)} models listed)")


def _local() -> Check:
    model = installed_model()
    if model is None:
        return Check(None, f"local model: not installed (optional: {INSTALL_HINT})")
    return Check(True, f"local model: llama.cpp and SmolLM2-135M are installed ({model.stat().st_size / 1e6:.0f} MB)")


def _data_folder() -> Check:
    folder = data_home()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check(
            False, f"data folder: {folder} is not writable ({exc.strerror})", "set MOA_CHAT_HOME to a folder you own"
        )
    mode = folder.stat().st_mode & 0o777
    private = "" if mode & 0o077 == 0 else f" (mode {mode:o}: others can read it; chmod 700 {folder})"
    return Check(True, f"data folder: {folder} is writable{private}")


def _session_database() -> Check:
    """Read-only: `PRAGMA quick_check` over the whole file, so a damaged page anywhere is found."""
    from ..store import default_path

    path = default_path()
    if not path.exists():
        return Check(None, "session database: none yet (it is made with the first stored turn)")
    try:
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as connection:
            found = [row[0] for row in connection.execute("PRAGMA quick_check")]
    except sqlite3.DatabaseError as exc:
        found = [str(exc)]
    if found == ["ok"]:
        return Check(True, f"session database: {path} is intact")
    problem = inert("; ".join(found[:2]) + (f" (and {len(found) - 2} more)" if len(found) > 2 else ""))
    return Check(False, f"session database: {path} is damaged: {problem}", recovery_hint(path))


def recovery_hint(path: Path) -> str:
    """How to save what a damaged database still holds, keeping the original as it is."""
    saved = path.with_name("sessions-recovered.db")
    return (
        f"sqlite3 {path} .recover | sqlite3 {saved}  (keeps the original); then move {path} aside "
        f"and {saved} to {path.name}"
    )


def _print(checks: list[Check], out: TextIO) -> None:
    for check in checks:
        glyph = "✓" if check.ok else "✗" if check.ok is False else "·"
        out.write(f"{glyph} {check.text}\n")
        if check.fix and check.ok is False:
            out.write(f"    fix: {check.fix}\n")
    failed = sum(c.ok is False for c in checks)
    out.write(f"\n{plural(failed, 'problem') if failed else 'all is well'}\n")
