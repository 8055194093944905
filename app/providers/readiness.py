"""Which presets can run with the keys in the environment, and which one a session starts on."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..config import DEMO_PROVIDER, Config, Preset
from . import lifecycle, ollama
from .endpoints import has_key, is_remote_keyed
from .local import extra_installed

# Bundled presets worth starting on, best first, when their keys are set.
PREFERENCE = ("frontier", "openai", "groq-fast", "together")
DEMO_PRESET = "demo"
LOCAL_PRESET = "local"
# Which offline preset a keyless start picks when the local model is installed: local (default) or demo.
OFFLINE_ENV = "MOA_CHAT_OFFLINE_PRESET"


@dataclass(frozen=True)
class StartChoice:
    preset: Preset
    notice: str | None = None


def choose_start(config: Config, requested: str | None = None) -> StartChoice:
    """--preset, else moa.default_preset, else a preset whose keys are set, else the offline demo."""
    if requested:
        return StartChoice(config.preset(requested))
    if config.default_preset:
        return StartChoice(config.preset(config.default_preset))
    user_presets = [p for p in config.presets.values() if not p.bundled]
    if user_presets:
        return StartChoice(user_presets[0])
    for name in PREFERENCE:
        preset = config.presets.get(name)
        if (
            preset
            and all(has_key(p, config) for p in preset.providers)
            and any(is_remote_keyed(p, config) for p in preset.providers)
        ):
            return StartChoice(preset)
    hint = _key_hint(config)
    local = config.presets.get(LOCAL_PRESET)
    if local is not None and os.environ.get(OFFLINE_ENV, LOCAL_PRESET) != DEMO_PRESET and extra_installed():
        return StartChoice(
            local,
            "No API key found, so moa-chat starts on the local preset: SmolLM2-135M on this machine's CPU "
            f"(tiny: expect weak answers; --preset demo for the simulated one). To use real models: {hint}",
        )
    demo = config.preset(DEMO_PRESET)
    return StartChoice(
        demo,
        "No API key found, so moa-chat starts on the offline demo preset (simulated models). "
        f"To use real models: {hint}",
    )


def _key_hint(config: Config) -> str:
    frontier = config.presets.get("frontier")
    provider = next(iter(sorted(frontier.providers)), None) if frontier else None
    spec = config.providers.get(provider or "")
    if frontier and spec and spec.api_key_env and provider != DEMO_PROVIDER:
        return f"export {spec.api_key_env}=... and run `moa-chat --preset frontier`."
    return "set a provider's API key (e.g. OPENAI_API_KEY) and pick a preset with --preset."


def missing_keys(config: Config, preset: Preset) -> dict[str, str]:
    """Providers of the preset whose key variable is unset: {provider: ENV_VAR}."""
    missing = {}
    for name in sorted(preset.providers):
        spec = config.providers.get(name)
        if spec and spec.api_key_env and not has_key(name, config):
            missing[name] = spec.api_key_env
    return missing


def preflight(config: Config, preset: Preset) -> tuple[str | None, str | None]:
    """(error, warning) before a turn: a preset naming an unknown provider or a keyless aggregator is an
    error, keyless references a warning."""
    if preset.name in config.problems and config.presets.get(preset.name) is preset:
        return str(config.problems[preset.name]), None
    for name in _managed(config, preset):
        if (why := lifecycle.unavailable(name)) is not None:
            return f"preset {preset.name!r}: the {name} provider {why}", None
    missing = missing_keys(config, preset)
    aggregator = preset.aggregator
    if aggregator.provider in missing:
        env = missing[aggregator.provider]
        return (
            f"preset {preset.name!r}: the aggregator {aggregator.label} needs an API key — set {env} "
            f"(e.g. `export {env}=...`), or pick another preset (try `--preset demo`)",
            None,
        )
    refs = [slot.label for slot in preset.references if slot.provider in missing]
    if refs:
        envs = ", ".join(sorted({missing[s.provider] for s in preset.references if s.provider in missing}))
        return None, f"{', '.join(refs)} will be skipped: set {envs} to include them"
    return None, None


def _managed(config: Config, preset: Preset) -> list[str]:
    """The preset's providers that moa-chat serves itself (a provider given a base_url is someone else's)."""
    return sorted(
        name for name in preset.providers if (spec := config.providers.get(name)) is not None and not spec.base_url
    )


@dataclass(frozen=True)
class Readiness:
    """Whether a preset can run here (the keys in the environment, what this machine has, whether the Ollama
    it uses answered when last asked), and what it lacks."""

    preset: Preset
    missing: dict[str, str]  # provider: the unset variable holding its key (references' too)
    problem: str | None  # why it cannot run at all, as a sentence with what to do; None when it can run
    lacking: str = ""  # what this machine lacks for it: "the local extra …: pip …", "Ollama running at …"

    @property
    def runnable(self) -> bool:
        return self.problem is None

    @property
    def needs(self) -> str:
        """What to set, install or start, as a user would type it: "OPENROUTER_API_KEY", "GROQ_API_KEY,
        OPENAI_API_KEY", "the local extra (llama-cpp-python): pip install 'moa-chat[local]'" or "Ollama running
        at http://localhost:11434 (start it with `ollama serve`)"."""
        return ", ".join(sorted(set(self.missing.values()))) or self.lacking

    @property
    def reason(self) -> str | None:
        """Why it cannot run, in the words every list of presets uses ("needs OPENROUTER_API_KEY"); None when
        it can run. `presets`, F2, F3, the palette, the header and `api` all say this."""
        if self.runnable:
            return None
        if self.needs:
            return f"needs {self.needs}"
        return (self.problem or "it cannot run here").split(": ", 1)[-1]


def readiness(config: Config, preset: Preset) -> Readiness:
    """`preset`'s readiness from what is known now: the Ollama it uses as it answered when last asked (never
    asked here: a front end asks, off its UI's thread, with `ollama.installed_models`)."""
    error, _warning = preflight(config, preset)
    lacking = _lacking(config, preset)
    if error is None and (stopped := ollama.not_running(config, preset)) is not None:
        lacking = stopped
        error = f"preset {preset.name!r}: its aggregator {preset.aggregator.label} needs {stopped}"
    return Readiness(preset, missing_keys(config, preset), error, lacking)


def _lacking(config: Config, preset: Preset) -> str:
    """What the first of the preset's own providers that cannot start here needs (its reason, which says
    "needs …"), or ""."""
    for name in _managed(config, preset):
        if (why := lifecycle.unavailable(name)) is not None:
            return why.removeprefix("needs ")
    return ""


def cycle_order(config: Config) -> list[Preset]:
    """The order presets are listed and cycled in: the user's, as their file has them, then the bundled."""
    presets = list(config.presets.values())
    return [p for p in presets if not p.bundled] + sorted((p for p in presets if p.bundled), key=lambda p: p.name)


def next_runnable(config: Config, current: str, step: int) -> Preset | None:
    """The next (step=+1) or previous (-1) preset after `current` that can run, or None when none other can."""
    order = cycle_order(config)
    names = [p.name for p in order]
    start = names.index(current) if current in names else -1 if step > 0 else 0
    for offset in range(1, len(order) + 1):
        candidate = order[(start + step * offset) % len(order)]
        if candidate.name != current and readiness(config, candidate).runnable:
            return candidate
    return None
