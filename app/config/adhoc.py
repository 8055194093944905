"""Presets made on the spot: `--aggregator provider:model` and `--reference provider:model` on the command
line, or a model picked in the chat, without editing config.yaml.

An ad-hoc preset starts from the preset the session would use and replaces what was given: the aggregator,
the references, or both. It joins the configuration under its own name, so switching away and back works
like any preset; it is never written to a file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .model import Config, ConfigError, Preset, Slot, did_you_mean

ADHOC_PRESET = "custom"


def parse_model(spec: str, config: Config, what: str) -> Slot:
    """`provider:model` as a slot. The model may contain colons itself (Ollama's `llama3:8b`)."""
    provider, colon, model = spec.strip().partition(":")
    if not colon or not provider or not model:
        raise ConfigError(f"{what} {spec!r}: expected provider:model, e.g. openrouter:deepseek/deepseek-chat")
    if provider not in config.providers:
        raise ConfigError(
            f"{what} {spec!r}: unknown provider {provider!r}{did_you_mean(provider, config.providers)}; "
            f"known providers: {', '.join(sorted(config.providers))}"
        )
    return Slot(provider=provider, model=model)


def adhoc_preset(
    config: Config, base: Preset, *, aggregator: str | None = None, references: Sequence[str] = ()
) -> Preset:
    """`base` with the aggregator and/or the references given as `provider:model`."""
    slots = tuple(parse_model(spec, config, "--reference") for spec in references)
    acting = parse_model(aggregator, config, "--aggregator") if aggregator else base.aggregator
    panel = slots or base.reference_models
    changed = ", ".join(
        part
        for part in (
            f"aggregator {acting.label}" if aggregator else "",
            f"references {', '.join(s.label for s in slots)}" if slots else "",
        )
        if part
    )
    return dataclasses.replace(
        base,
        name=ADHOC_PRESET,
        reference_models=panel,
        aggregator=acting,
        description=f"{base.name} with {changed}" if changed else base.description,
        source="command line",
    )


def with_preset(config: Config, preset: Preset) -> Config:
    """A configuration that also knows `preset` (a copy: the loaded one is shared and cached)."""
    return dataclasses.replace(config, presets={**config.presets, preset.name: preset})


def add_reference(config: Config, base: Preset, spec: str) -> Preset:
    """`base` with one more reference (the others keep their settings)."""
    slot = parse_model(spec, config, "reference")
    return dataclasses.replace(
        base,
        name=ADHOC_PRESET,
        reference_models=(*base.reference_models, slot),
        description=f"{base.name} with reference {slot.label} added",
        source="chosen in the chat",
    )


def replace_aggregator(config: Config, base: Preset, spec: str) -> Preset:
    slot = parse_model(spec, config, "aggregator")
    return dataclasses.replace(
        base,
        name=ADHOC_PRESET,
        aggregator=slot,
        description=f"{base.name} with aggregator {slot.label}",
        source="chosen in the chat",
    )


SELF_MOA_SAMPLES = 3


def self_moa(config: Config, base: Preset, spec: str, *, samples: int = SELF_MOA_SAMPLES) -> Preset:
    """Every seat on one model (`provider:model`): it answers `samples` times at spread temperatures, then
    reads those answers and writes the reply (Self-MoA, as the bundled `local` preset does). `base` gives
    the rest: workers, timeouts, tools."""
    slot = parse_model(spec, config, "model")
    return dataclasses.replace(
        base,
        name=ADHOC_PRESET,
        reference_models=(dataclasses.replace(slot, samples=samples),),
        aggregator=slot,
        description=f"Self-MoA on {slot.label}: {samples} answers and a synthesis by the same model",
        source="chosen in the chat",
    )
