"""The panel a preset puts together: every reference call of a turn, layer by layer, sample by sample.

A slot with `samples: k` sits k times (Self-MoA: one model asked several times; Li et al. 2025), each with
its own temperature unless one is set; a preset with `layers: n` repeats the panel n times (Wang et al.
2024). Every seat has one index across the whole turn, which the events, the sidebar and the store use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..config import Preset, Slot

# Samples of one model spread over these temperatures (when none is set): enough apart that the answers
# differ, none so hot that they ramble.
SAMPLE_TEMPERATURES = (0.4, 1.0)


@dataclass(frozen=True)
class Seat:
    index: int  # across all layers of the turn
    layer: int  # 1..n
    slot: Slot  # the sample's own temperature set, if the spread applies
    label: str  # provider:model, or provider:model #2 for a sample


def layer_panel(preset: Preset, layer: int, first_index: int = 0) -> list[Seat]:
    seats: list[Seat] = []
    for slot in preset.references:
        temperatures = _spread(slot, preset)
        for sample in range(slot.samples):
            seated = slot if temperatures is None else dataclasses.replace(slot, temperature=temperatures[sample])
            label = slot.label if slot.samples == 1 else f"{slot.label} #{sample + 1}"
            seats.append(Seat(first_index + len(seats), layer, seated, label))
    return seats


def panel(preset: Preset) -> list[Seat]:
    """Every seat of a turn, layer after layer."""
    seats: list[Seat] = []
    for layer in range(1, preset.layers + 1):
        seats += layer_panel(preset, layer, len(seats))
    return seats


def _spread(slot: Slot, preset: Preset) -> tuple[float, ...] | None:
    if slot.samples == 1 or slot.temperature is not None or preset.reference_temperature is not None:
        return None
    low, high = SAMPLE_TEMPERATURES
    step = (high - low) / (slot.samples - 1)
    return tuple(round(low + step * n, 2) for n in range(slot.samples))
