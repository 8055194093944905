"""`moa-chat presets`: every preset, its models, what it still needs, and the default.

Listed in the order F3 cycles them: the user's presets as their file has them, then the bundled ones.
A preset that cannot run says which variable to set; with --json, scripts get the same facts.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from ..config import Config, Preset
from ..providers import Readiness, choose_start, cycle_order, readiness
from ..providers.ollama import installed_models, not_pulled
from .exit_codes import EXIT_OK
from .windows_report import SlotWindow, finder, slot_windows, window_lines


def list_presets(config: Config, out: TextIO, *, as_json: bool = False) -> int:
    default = choose_start(config).preset.name
    states = [readiness(config, preset) for preset in cycle_order(config)]
    windows = slot_windows(config, (state.preset for state in states), finder(config))
    if as_json:
        listed = [_as_dict(state, default, windows[state.preset.name]) for state in states]
        out.write(json.dumps(listed, indent=2) + "\n")
        return EXIT_OK
    width = max(len(state.preset.name) for state in states)
    group = None
    for state in states:
        preset = state.preset
        heading = "Bundled presets" if preset.bundled else f"Your presets ({config.path})"
        if heading != group:
            out.write(("\n" if group else "") + heading + "\n")
            group = heading
        name = preset.name
        mark = "*" if name == default else " "
        suffix = "  (default)" if name == default else ""
        out.write(f"{mark} {name:<{width}}  {preset.description}{suffix}\n")
        out.write(f"  {'':<{width}}  references: {', '.join(slot.label for slot in preset.references)}\n")
        out.write(f"  {'':<{width}}  aggregator: {preset.aggregator.label}\n")
        for number, line in enumerate(window_lines(windows[name])):
            out.write(f"  {'':<{width}}  {'windows:' if number == 0 else '':<8} {line}\n")
        if state.missing:
            verdict = "cannot run" if not state.runnable else "those references are skipped"
            out.write(f"  {'':<{width}}  needs: {state.needs} (not set): {verdict}\n")
        elif state.problem:
            out.write(f"  {'':<{width}}  cannot run: {state.problem.split(': ', 1)[-1]}\n")
        if preset.name == "ollama":
            out.write(f"  {'':<{width}}  {_ollama_line(config, preset)}\n")
    return EXIT_OK


def _ollama_line(config: Config, preset: Preset) -> str:
    models = installed_models(config)
    if models is None:
        return "Ollama is not running here (start it with `ollama serve`)"
    if not models:
        return "Ollama runs here but has no models yet (`ollama pull llama3.2`)"
    missing = not_pulled(preset, models)  # as the F2 picker says it
    note = f"; not pulled: {', '.join(missing)}" if missing else ""
    return f"Ollama has: {', '.join(models)}{note} (use any: --reference ollama:NAME)"


def _as_dict(state: Readiness, default: str, windows: list[SlotWindow]) -> dict[str, Any]:
    preset: Preset = state.preset
    return {
        "name": preset.name,
        "description": preset.description,
        "bundled": preset.bundled,
        "default": preset.name == default,
        "references": [slot.label for slot in preset.references],
        "aggregator": preset.aggregator.label,
        "runnable": state.runnable,
        "missing_keys": sorted(set(state.missing.values())),
        "problem": state.problem,
        "windows": [seat.as_json() for seat in windows],
    }
