"""Each slot's context window and where it came from, as `moa-chat presets` and `moa-chat doctor` show them.

Providers are asked in parallel, each at most once (llm.windows); a provider without its key, or one that
does not answer within a few seconds, leaves its windows unknown, and the report says why. Windows learned
from overflow errors are read from the session database without writing to it.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..config import Config, Preset, Slot
from ..llm.windows import Window, WindowFinder
from ..store import default_path
from ..store.model_facts import ModelFacts


@dataclass(frozen=True)
class SlotWindow:
    role: str  # "reference 1", "aggregator", "agreement", "compaction"
    slot: Slot
    window: Window

    def as_json(self) -> dict[str, object]:
        return {
            "slot": self.role,
            "model": self.slot.label,
            "context_window": self.window.tokens,
            "origin": self.window.origin,
            "source": self.window.source,
        }


def finder(config: Config) -> WindowFinder:
    """A WindowFinder reading learned windows from the session database (if there is one)."""
    return WindowFinder(config, ModelFacts.reader(default_path()))


def seats(preset: Preset) -> list[tuple[str, Slot]]:
    """The preset's slots that read a conversation: enabled references, the aggregator, and the agreement
    judge and compaction model where they are other models."""
    found = [(f"reference {n}", slot) for n, slot in enumerate(preset.references, 1)]
    found.append(("aggregator", preset.aggregator))
    if preset.auto_layers and preset.agreement is not None:
        found.append(("agreement", preset.agreement))
    if preset.compact_model is not None:
        found.append(("compaction", preset.compact_model))
    return found


def slot_windows(config: Config, presets: Iterable[Preset], windows: WindowFinder) -> dict[str, list[SlotWindow]]:
    """Each preset's seats with their windows, by preset name; every provider asked at once, in parallel."""
    chosen = list(presets)
    wanted = {_key(slot): slot for preset in chosen for _, slot in seats(preset)}
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(wanted)))) as pool:
        found = dict(zip(wanted, pool.map(windows.window, wanted.values()), strict=True))
    return {
        preset.name: [SlotWindow(role, slot, found[_key(slot)]) for role, slot in seats(preset)] for preset in chosen
    }


def _key(slot: Slot) -> tuple[str, str, int | None]:
    """What a slot's window depends on (a Slot itself may hold a mapping, which cannot be a key)."""
    return slot.provider, slot.model, slot.context_window


def window_lines(windows: list[SlotWindow]) -> list[str]:
    """One line per model of a preset (a model in several seats once): "local:smollm2 8,192 tokens (...)"; one
    line for them all when every model's window is the same ("unknown (not asked: GROQ_API_KEY is not set)")."""
    if len({seat.window for seat in windows}) == 1:
        return [str(windows[0].window)]
    lines: dict[str, str] = {}
    for seat in windows:
        lines.setdefault(seat.slot.label, f"{seat.slot.label} {seat.window}")
    return list(lines.values())
