"""`moa-chat presets`: every preset, its models, what it still needs, and the default."""

from __future__ import annotations

from typing import TextIO

from ..config import Config
from ..providers import choose_start, has_key
from .exit_codes import EXIT_OK


def list_presets(config: Config, out: TextIO) -> int:
    default = choose_start(config).preset.name
    width = max(len(name) for name in config.presets)
    for name in sorted(config.presets):
        preset = config.presets[name]
        mark = "*" if name == default else " "
        suffix = "  (default)" if name == default else ""
        out.write(f"{mark} {name:<{width}}  {preset.description}{suffix}\n")
        refs = ", ".join(slot.label for slot in preset.references)
        out.write(f"  {'':<{width}}  references: {refs}\n")
        out.write(f"  {'':<{width}}  aggregator: {preset.aggregator.label}\n")
        missing = sorted(
            config.providers[p].api_key_env or p
            for p in preset.providers
            if p in config.providers and not has_key(p, config)
        )
        if missing:
            out.write(f"  {'':<{width}}  needs: {', '.join(missing)} (not set)\n")
    return EXIT_OK
