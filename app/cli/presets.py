"""`moa-chat presets`: every preset, its models, what it still needs, and the default.

Listed in the order F3 cycles them: the user's presets as their file has them, then the bundled ones.
A preset that cannot run says why in the words the chat and `moa-chat api` use ("needs OPENROUTER_API_KEY");
with --json, scripts get the same facts. Ollama is asked first, so a preset on an Ollama that is not running
says so.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from ..config import Config, Preset, Slot
from ..providers import Readiness, choose_start, cycle_order, readiness
from ..providers.ollama import installed_models, not_pulled
from .exit_codes import EXIT_OK
from .windows_report import SlotWindow, finder, slot_windows, window_lines


def list_presets(config: Config, out: TextIO, *, as_json: bool = False) -> int:
    models = installed_models(config)  # before readiness: a preset on an Ollama that did not answer cannot run
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
        out.write(f"  {'':<{width}}  references: {', '.join(map(_seats, preset.references))}\n")
        out.write(f"  {'':<{width}}  aggregator: {preset.aggregator.label}\n")
        for number, window in enumerate(window_lines(windows[name])):
            out.write(f"  {'':<{width}}  {'windows:' if number == 0 else '':<8} {window}\n")
        if not state.runnable:
            out.write(f"  {'':<{width}}  cannot run: {state.reason}\n")
        elif state.missing:
            out.write(f"  {'':<{width}}  references skipped: needs {state.needs}\n")
        if preset.name == "ollama" and (line := _ollama_line(preset, models)):
            out.write(f"  {'':<{width}}  {line}\n")
    return EXIT_OK


def _seats(slot: Slot) -> str:
    """A reference as the panel seats it: a model asked `samples:` times shows how many ("local:smollm2 ×3")."""
    return f"{slot.label} ×{slot.samples}" if slot.samples > 1 else slot.label


def _ollama_line(preset: Preset, models: tuple[str, ...] | None) -> str | None:
    """What Ollama has for the ollama preset; nothing when it is not running (the preset's reason says so)."""
    if models is None:
        return None
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
        "reason": state.reason,
        "problem": state.problem,
        "windows": [seat.as_json() for seat in windows],
    }
