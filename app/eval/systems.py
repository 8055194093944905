"""What an eval run compares: presets, each preset's models alone, any single model, and each preset's members as
its references answered.

A single model is run the way `--solo` runs a preset's aggregator: the same system prompt, temperature and
`max_tokens` (the aggregator's), one call a task, its answer read by the same check. `--members` runs each of a
preset's reference models that way too, and `--baseline` its model with the first preset's settings, so "the
model alone" means the same thing for every model. Two
single models that would send identical requests (two presets on one aggregator, a member that is the
aggregator's model) run once, under the first name, standing for every preset that has it.

A preset's members are also scored as they answered inside its turns, at no extra call: under the advisor
prompt, at their slot's temperature and `max_tokens`. That is not the model alone, and their names say so
(`preset/provider:model (as a reference)`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Literal

from ..config import Config, Preset, Slot
from ..config.adhoc import parse_model

SystemKind = Literal["preset", "solo", "alone", "baseline", "member"]
AS_REFERENCE = "(as a reference)"


@dataclass(frozen=True)
class System:
    """Something that answers a task with one turn."""

    name: str
    kind: SystemKind
    preset: Preset
    # the presets this single model stands alone for (a solo, or a member alone): where its primary
    # comparison looks for "the preset's best single model"
    serves: tuple[str, ...] = ()

    @property
    def solo(self) -> bool:
        return self.kind != "preset"


def job_name(name: str, repeat: int) -> str:
    """The key a result is stored under: the system's name, with its repeat after the first."""
    return name if repeat <= 1 else f"{name} [repeat {repeat}]"


def alone(preset: Preset, slot: Slot) -> Preset:
    """`preset` with `slot`'s model as its aggregator, set as `--solo` sets the aggregator: its temperature and
    `max_tokens`; the model's own provider settings (reasoning effort, extra body, timeout) stay."""
    seat = dataclasses.replace(
        slot, samples=1, temperature=preset.aggregator.temperature, max_tokens=preset.aggregator.max_tokens
    )
    return dataclasses.replace(preset, aggregator=seat)


def _identity(config: Config, preset: Preset) -> str:
    """What a single model's request depends on: two systems with the same identity send the same requests."""
    seat = preset.aggregator
    temperature = seat.temperature if seat.temperature is not None else preset.aggregator_temperature
    return json.dumps(
        [
            seat.provider,
            seat.model,
            temperature,
            seat.max_tokens,
            seat.reasoning_effort,
            seat.extra_body,
            config.system_prompt_for(preset),
            preset.tools,
        ],
        sort_keys=True,
        default=str,
    )


def systems_for(
    config: Config, presets: list[Preset], *, solo: bool, baselines: list[str], members: bool = False
) -> list[System]:
    """The systems a run compares, in the order the table shows them: presets, solos, members alone, baselines."""
    found = [System(p.name, "preset", p) for p in presets]
    singles: dict[str, System] = {}

    def add(name: str, kind: SystemKind, preset: Preset, serves: tuple[str, ...]) -> None:
        key = _identity(config, preset)
        if key in singles:
            kept = singles[key]
            more = tuple(s for s in serves if s not in kept.serves)
            singles[key] = dataclasses.replace(kept, serves=kept.serves + more)
        else:
            singles[key] = System(name, kind, preset, serves)

    if solo:
        for preset in presets:
            add(f"{preset.name} solo", "solo", preset, (preset.name,))
    if members:
        for preset in presets:
            for slot in preset.references:
                add(f"{slot.label} alone", "alone", alone(preset, slot), (preset.name,))
    for spec in baselines:
        slot = parse_model(spec, config, "baseline")
        add(spec.strip(), "baseline", dataclasses.replace(alone(presets[0], slot), name=spec.strip()), ())
    return found + list(singles.values())


def member_names(preset: Preset) -> list[str]:
    """The names a preset's first-layer references are scored under: `preset/provider:model (as a reference)`
    (#n for a model seated more than once)."""
    labels = [slot.label for slot in preset.references for _ in range(max(1, slot.samples))]
    names = []
    for n, label in enumerate(labels):
        repeated = labels.count(label) > 1
        number = f"#{labels[: n + 1].count(label)}" if repeated else ""
        names.append(f"{preset.name}/{label}{number} {AS_REFERENCE}")
    return names


def one_at_a_time(systems: list[System]) -> dict[str, int]:
    """Providers that serve one request at a time, as a preset says with `max_workers: 1` (the local model's
    llama.cpp server): eval runs one turn at a time on them, whatever --concurrency allows elsewhere."""
    return {
        slot.provider: 1
        for system in systems
        if system.preset.max_workers == 1
        for slot in (*system.preset.references, system.preset.aggregator)
    }
