"""Presets from YAML: their slots, the bundled preset files, and the checks that need every preset and
provider at once (a slot naming an unknown provider, a preset used as a provider)."""

from __future__ import annotations

import functools
from importlib.resources import files

from .checks import (
    DOLLARS_AT_MOST,
    ITERATIONS_AT_MOST,
    LAYERS_AT_MOST,
    MAX_TOKENS_AT_MOST,
    QUORUM_AT_MOST,
    SAMPLES_AT_MOST,
    SECONDS_AT_MOST,
    WINDOW_AT_MOST,
    WORKERS_AT_MOST,
    Checker,
    YamlMapping,
    choice,
    kind,
    parse_yaml,
    plain,
)
from .model import (
    AUTO,
    BUNDLED_PREFIX,
    DEFAULT_COMPACT_AT,
    DEFAULT_MAX_LAYERS,
    DEFAULT_MAX_WORKERS,
    DEFAULT_OUTPUT_RESERVE,
    FANOUT_MODES,
    ConfigError,
    Preset,
    ProviderConfig,
    Slot,
    did_you_mean,
)
from .sections import parse_system_prompt, parse_tools

SLOT_KEYS = (
    "provider",
    "model",
    "temperature",
    "max_tokens",
    "reasoning_effort",
    "timeout",
    "extra_body",
    "enabled",
    "samples",
    "context_window",
    "vision",
)
PRESET_KEYS = (
    "description",
    "reference_models",
    "aggregator",
    "reference_temperature",
    "aggregator_temperature",
    "reference_timeout",
    "max_workers",
    "tools",
    "fanout",
    "max_iterations",
    "system_prompt",
    "layers",
    "max_layers",
    "agreement",
    "quorum",
    "deadline",
    "shuffle",
    "anonymous",
    "max_cost_per_turn",
    "save_traces",
    "compact_model",
    "compact_at",
    "output_reserve",
)


def parse_slot(body: object, check: Checker, what: str, parent: object, key: object) -> Slot:
    if not isinstance(body, dict):
        raise check.error(parent, f"{what} must be a mapping with provider: and model:, not {kind(body)}", key)
    check.check_keys(body, SLOT_KEYS, what)
    names: list[str] = []
    for required in ("provider", "model"):
        value = body.get(required)
        if not isinstance(value, str) or not value.strip():
            raise check.error(
                body,
                f"{what} is incomplete: it needs {required}: (a non-empty string)",
                required if required in body else None,
            )
        names.append(value.strip())
    temperature = check.number(body.get("temperature"), body, "temperature", what, maximum=2.0)
    max_tokens = check.whole_number(body.get("max_tokens"), body, "max_tokens", what, at_most=MAX_TOKENS_AT_MOST)
    timeout = check.number(
        body.get("timeout"), body, "timeout", what, minimum=0.001, at_most=SECONDS_AT_MOST, unit=" seconds"
    )
    extra_body = body.get("extra_body")
    if extra_body is not None and not isinstance(extra_body, dict):
        raise check.error(body, f"{what}: extra_body must be a mapping", "extra_body")
    effort = body.get("reasoning_effort")
    if effort is not None and not isinstance(effort, str):
        raise check.error(
            body, f"{what}: reasoning_effort must be a string such as low, medium or high", "reasoning_effort"
        )
    enabled = check.flag(body.get("enabled", True), body, "enabled", what)
    samples = check.whole_number_or(1, body.get("samples"), body, "samples", what, at_most=SAMPLES_AT_MOST)
    context_window = check.whole_number(
        body.get("context_window"), body, "context_window", what, at_most=WINDOW_AT_MOST
    )
    vision = body.get("vision")
    if vision is not None:
        vision = check.flag(vision, body, "vision", what)
    return Slot(
        provider=names[0],
        model=names[1],
        temperature=temperature,
        max_tokens=max_tokens,
        reasoning_effort=effort,
        timeout=timeout,
        extra_body={str(k): plain(v) for k, v in extra_body.items()} if extra_body is not None else None,
        enabled=enabled,
        samples=samples,
        context_window=context_window,
        vision=vision,
    )


def parse_preset(name: str, body: object, check: Checker, parent: object = None) -> Preset:
    what = f"preset {name!r}"
    if not isinstance(body, dict):
        raise check.error(parent, f"{what} must be a mapping with reference_models: and aggregator:", name)
    check.check_keys(body, PRESET_KEYS, what)
    refs = body.get("reference_models")
    if not isinstance(refs, list) or not refs:
        raise check.error(
            body,
            f"{what} needs reference_models: a list of at least one {{provider, model}} entry",
            "reference_models" if "reference_models" in body else None,
        )
    slots = tuple(parse_slot(item, check, f"{what} reference {i + 1}", refs, i) for i, item in enumerate(refs))
    if "aggregator" not in body:
        raise check.error(body, f"{what} needs an aggregator: with provider: and model:")
    aggregator = parse_slot(body["aggregator"], check, f"{what} aggregator", body, "aggregator")
    reference_temperature = check.number(
        body.get("reference_temperature"), body, "reference_temperature", what, maximum=2.0
    )
    aggregator_temperature = check.number(
        body.get("aggregator_temperature"), body, "aggregator_temperature", what, maximum=2.0
    )
    reference_timeout = check.number(
        body.get("reference_timeout"),
        body,
        "reference_timeout",
        what,
        minimum=0.001,
        at_most=SECONDS_AT_MOST,
        unit=" seconds",
    )
    max_workers = check.whole_number_or(
        DEFAULT_MAX_WORKERS, body.get("max_workers"), body, "max_workers", what, at_most=WORKERS_AT_MOST
    )
    max_iterations = check.whole_number(
        body.get("max_iterations"), body, "max_iterations", what, at_most=ITERATIONS_AT_MOST
    )
    raw_fanout = body.get("fanout", "user_turn")
    fanout = choice(raw_fanout, FANOUT_MODES)
    if fanout is None:
        raise check.error(
            body, f"{what}: fanout must be one of {', '.join(FANOUT_MODES)}, not {raw_fanout!r}", "fanout"
        )
    description = body.get("description", "")
    if not isinstance(description, str):
        raise check.error(body, f"{what}: description must be text", "description")
    layers, auto_layers, agreement = parse_layers(body, check, what, slots)
    quorum = check.whole_number(body.get("quorum"), body, "quorum", what, at_most=QUORUM_AT_MOST)
    deadline = check.number(
        body.get("deadline"), body, "deadline", what, minimum=0.001, at_most=SECONDS_AT_MOST, unit=" seconds"
    )
    max_cost = check.number(
        body.get("max_cost_per_turn"),
        body,
        "max_cost_per_turn",
        what,
        minimum=0,
        at_most=DOLLARS_AT_MOST,
        unit=" dollars",
    )
    shuffle = check.flag(body.get("shuffle", False), body, "shuffle", what)
    anonymous = check.flag(body.get("anonymous", False), body, "anonymous", what)
    save_traces = check.flag(body.get("save_traces", False), body, "save_traces", what)
    compact_model = parse_model_choice(body, "compact_model", check, what, "the model that summarises older exchanges")
    compact_at = check.number(body.get("compact_at"), body, "compact_at", what, minimum=0.1, maximum=1.0)
    output_reserve = check.whole_number_or(
        DEFAULT_OUTPUT_RESERVE, body.get("output_reserve"), body, "output_reserve", what, at_most=MAX_TOKENS_AT_MOST
    )
    return Preset(
        name=name,
        reference_models=slots,
        aggregator=aggregator,
        description=description.strip(),
        reference_temperature=reference_temperature,
        aggregator_temperature=aggregator_temperature,
        reference_timeout=reference_timeout,
        max_workers=max_workers,
        tools=parse_tools(body.get("tools"), check, body, "tools") if "tools" in body else None,
        fanout=fanout,
        max_iterations=max_iterations,
        source=str(check.path),
        system_prompt=parse_system_prompt(body, check, what),
        layers=layers,
        auto_layers=auto_layers,
        agreement=agreement,
        quorum=quorum,
        deadline=deadline,
        shuffle=shuffle,
        anonymous=anonymous,
        max_cost_per_turn=max_cost,
        save_traces=save_traces if "save_traces" in body else None,
        compact_model=compact_model,
        compact_at=float(compact_at) if compact_at is not None else DEFAULT_COMPACT_AT,
        output_reserve=output_reserve,
    )


def parse_layers(
    body: YamlMapping, check: Checker, what: str, slots: tuple[Slot, ...]
) -> tuple[int, bool, Slot | None]:
    """`layers:` as (the most layers a turn runs, whether `auto` decides after each, the agreement judge).

    `layers: auto` runs up to `max_layers` (default DEFAULT_MAX_LAYERS); `agreement:` names the model that
    judges whether the references agree (`provider:model`, or a slot mapping), else the aggregator does."""
    raw = body.get("layers")
    if raw != AUTO:
        for key in ("max_layers", "agreement"):
            if key in body:
                raise check.error(body, f"{what}: {key} applies only with layers: auto", key)
        if isinstance(raw, str):
            raise check.error(
                body,
                f"{what}: layers must be a whole number >= 1 (at most {LAYERS_AT_MOST}) or auto, not {raw!r}",
                "layers",
            )
        return check.whole_number_or(1, raw, body, "layers", what, at_most=LAYERS_AT_MOST), False, None
    seats = sum(slot.samples for slot in slots if slot.enabled)
    if seats < 2:
        raise check.error(
            body, f"{what}: layers: auto needs at least two references (or samples) to compare, not {seats}", "layers"
        )
    most = check.whole_number_or(
        DEFAULT_MAX_LAYERS, body.get("max_layers"), body, "max_layers", what, minimum=2, at_most=LAYERS_AT_MOST
    )
    return most, True, parse_model_choice(body, "agreement", check, what, "the model that judges agreement")


def parse_model_choice(body: YamlMapping, key: str, check: Checker, what: str, role: str) -> Slot | None:
    """A preset's choice of one model under `key`: `provider:model`, or a slot mapping; None when left out."""
    spec = body.get(key)
    if isinstance(spec, dict):
        return parse_slot(spec, check, f"{what} {key}", body, key)
    if isinstance(spec, str):
        provider, colon, model = spec.strip().partition(":")
        if not colon or not provider.strip() or not model.strip():
            raise check.error(body, f"{what}: {key} must be provider:model ({role}), not {spec!r}", key)
        return Slot(provider=provider.strip(), model=model.strip())
    if spec is not None:
        raise check.error(
            body, f"{what}: {key} must be provider:model or a mapping with provider: and model:, not {kind(spec)}", key
        )
    return None


def bundled_presets() -> dict[str, Preset]:
    """The presets shipped in presets/*.yaml, one per file, named after the file."""
    return dict(_read_bundled_presets())


@functools.cache
def _read_bundled_presets() -> dict[str, Preset]:
    # Packaged files do not change while we run: read and validate them once, not per config load.
    presets: dict[str, Preset] = {}
    folder = files("moa_chat.presets")
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".yaml"):
            continue
        name = entry.name.removesuffix(".yaml")
        source = f"{BUNDLED_PREFIX}{entry.name}"
        raw = parse_yaml(entry.read_text(encoding="utf-8"), source)
        presets[name] = parse_preset(name, raw, Checker(source))
    return presets


def unknown_providers(
    presets: dict[str, Preset], providers: dict[str, ProviderConfig], check: Checker, moa: YamlMapping | None
) -> dict[str, ConfigError]:
    """Presets whose slots name a provider nobody defined, with where. Not fatal at load (a config shared
    with another tool may name its providers; the seed's does), but a front end refuses to run such a
    preset and says where the name is."""
    found: dict[str, ConfigError] = {}
    user_presets = moa.get("presets") if moa is not None else None
    for name, preset in presets.items():
        body = user_presets.get(name) if isinstance(user_presets, dict) else None
        # The YAML bodies beside the parsed slots, for the line of each (bundled presets have none).
        bodies: list[object] = [None] * (len(preset.reference_models) + 1)
        if isinstance(body, dict):
            references = body.get("reference_models", [])
            bodies = [body.get("aggregator"), *(references if isinstance(references, list) else [])]
        slots = [("aggregator", preset.aggregator)]
        slots += [(f"reference {i + 1}", s) for i, s in enumerate(preset.reference_models)]
        chosen = [("agreement", preset.agreement if preset.auto_layers else None)]
        chosen.append(("compact_model", preset.compact_model))
        for key, choice_slot in chosen:
            if choice_slot is not None:
                slots.append((key, choice_slot))
                spec = body.get(key) if isinstance(body, dict) else None
                bodies.append(spec if isinstance(spec, dict) else body)
        for (where, slot), slot_body in zip(slots, bodies, strict=True):
            if slot.provider in providers or not slot.enabled:
                continue
            in_slot = isinstance(slot_body, dict) and slot_body is not body  # else a string `agreement:`
            error = check.error(
                slot_body if isinstance(slot_body, dict) else body,
                f"preset {name!r} {where}: unknown provider {slot.provider!r}"
                f"{did_you_mean(slot.provider, providers)}; define it under providers: (base_url:, api_key_env:) "
                f"or use one of: {', '.join(sorted(providers))}",
                "provider" if in_slot else where if where in ("agreement", "compact_model") else None,
            )
            found.setdefault(name, error)
    return found


def check_no_recursion(presets: dict[str, Preset], providers: dict[str, ProviderConfig], check: Checker) -> None:
    for preset in presets.values():
        judge = (("agreement", preset.agreement),) if preset.auto_layers and preset.agreement is not None else ()
        compactor = (("compact_model", preset.compact_model),) if preset.compact_model is not None else ()
        for slot_name, slot in (
            ("aggregator", preset.aggregator),
            *((f"reference {i + 1}", s) for i, s in enumerate(preset.reference_models)),
            *judge,
            *compactor,
        ):
            if slot.provider == "moa" or (slot.provider in presets and slot.provider not in providers):
                raise ConfigError(
                    f"preset {preset.name!r} {slot_name}: provider {slot.provider!r} is a MoA preset, not an "
                    "endpoint; presets cannot nest — name an OpenAI-compatible provider instead",
                    path=preset.source or check.path,
                )
