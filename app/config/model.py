"""The typed configuration: slots, presets, providers, MCP servers, and the errors that name file and line."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Literal, TypedDict, get_args

from .pricing import BUNDLED_PRICES, FREE, FREE_PROVIDERS, Price

DEFAULT_MAX_WORKERS = 8
DEFAULT_MAX_ITERATIONS = 10
FanoutMode = Literal["user_turn", "per_iteration"]
FANOUT_MODES: tuple[FanoutMode, ...] = get_args(FanoutMode)
PrivacyMode = Literal["off", "display", "full"]
ToolEnvPolicy = Literal["core", "all"]
TOOL_ENV_POLICIES: tuple[ToolEnvPolicy, ...] = get_args(ToolEnvPolicy)
PRIVACY_MODES: tuple[PrivacyMode, ...] = get_args(PrivacyMode)
BUNDLED_PREFIX = "presets/"
AUTO = "auto"  # `layers: auto`
DEFAULT_MAX_LAYERS = 3  # under `layers: auto`, when `max_layers:` is not set
# Compaction starts before a turn would fill more than this share of the smallest window among a preset's slots.
DEFAULT_COMPACT_AT = 0.8
# The tokens kept free in a window for a slot's answer when the slot sets no `max_tokens:` (a preset's
# `output_reserve:` changes it): room for a long answer without giving up most of an 8k window.
DEFAULT_OUTPUT_RESERVE = 2048


class ConfigError(Exception):
    """A configuration problem, phrased for the person who has to fix it."""

    def __init__(self, message: str, *, path: Path | str | None = None, line: int | None = None) -> None:
        self.message, self.path, self.line = message, str(path) if path else None, line
        self.errors: tuple[ConfigError, ...] = (self,)  # every problem found, when a load reports several
        super().__init__(f"{self.where}{message}")

    @property
    def where(self) -> str:
        """`file:line: ` (or `file: `), as the message begins."""
        return f"{self.path}:{self.line}: " if self.path and self.line else f"{self.path}: " if self.path else ""

    @classmethod
    def of_all(cls, errors: list[ConfigError]) -> ConfigError:
        """One error reporting every problem of a load, in file order: the first as usual on the first line,
        then each of the others on a line of its own with its file and line."""
        ordered = sorted(errors, key=lambda e: (e.path or "", e.line or 0))
        first = ordered[0]
        if len(ordered) == 1:
            return first
        others = "\n".join(f"  {error.where}{error.message}" for error in ordered[1:])
        more = len(ordered) - 1
        combined = cls(
            f"{first.message}\n{more} more problem{'s' if more > 1 else ''} in the configuration:\n{others}",
            path=first.path,
            line=first.line,
        )
        combined.errors = tuple(ordered)
        return combined


class UnknownPresetError(ConfigError):
    pass


@dataclass(frozen=True)
class Slot:
    """One model seat in a preset: a reference or the aggregator. Unset values are never sent."""

    provider: str
    model: str
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    timeout: float | None = None
    extra_body: dict[str, object] | None = None  # sent as written, beside the request's own fields
    enabled: bool = True
    samples: int = 1  # Self-MoA: ask this model this many times (references only)
    context_window: int | None = None  # tokens this model reads, as the config states it (None: not stated)
    # Whether the model reads images: False sends it a note in each image's place; None: it is sent them, and
    # a provider that refuses an image is remembered as one that cannot see (engine/vision.py).
    vision: bool | None = None

    @property
    def label(self) -> str:
        return f"{self.provider}:{self.model}"


@dataclass(frozen=True)
class Preset:
    name: str
    reference_models: tuple[Slot, ...]
    aggregator: Slot
    description: str = ""
    reference_temperature: float | None = None
    aggregator_temperature: float | None = None
    reference_timeout: float | None = None
    max_workers: int = DEFAULT_MAX_WORKERS
    tools: tuple[str, ...] | None = None  # None: the global `tools:` setting applies
    fanout: FanoutMode = "user_turn"
    max_iterations: int | None = None
    source: str = ""
    system_prompt: str | None = None  # None: the global `system_prompt:` applies
    layers: int = 1  # multi-layer MoA: each layer after the first also reads the previous layer's answers
    # `layers: auto`: `layers` is the most that may run (max_layers); after each layer a check of whether the
    # references agree decides between aggregating now and another layer.
    auto_layers: bool = False
    agreement: Slot | None = None  # who judges that agreement (None: the aggregator)
    quorum: int | None = None  # start the aggregator once this many references (of a layer) have answered
    deadline: float | None = None  # ... or once this many seconds have passed, if at least one has
    shuffle: bool = False  # show the answers to the aggregator in a new random order each turn
    anonymous: bool = False  # label them "Reference 1..n", without model names
    max_cost_per_turn: float | None = None  # dollars; a turn estimated above it is asked about (or refused)
    save_traces: bool | None = None  # None: the global `save_traces:` applies
    compact_model: Slot | None = None  # who summarises older exchanges (None: the aggregator)
    compact_at: float = DEFAULT_COMPACT_AT  # share of the tightest window a turn may fill before compaction
    output_reserve: int = DEFAULT_OUTPUT_RESERVE  # tokens kept for an answer when a slot sets no max_tokens

    @property
    def references(self) -> tuple[Slot, ...]:
        """The references that take part in a turn (enabled ones), in preset order."""
        return tuple(slot for slot in self.reference_models if slot.enabled)

    @property
    def agreement_judge(self) -> Slot:
        """The model asked whether the references agree, under `layers: auto`."""
        return self.agreement if self.agreement is not None else self.aggregator

    @property
    def compactor(self) -> Slot:
        """The model that summarises a conversation's older exchanges."""
        return self.compact_model if self.compact_model is not None else self.aggregator

    def reserve_for(self, slot: Slot) -> int:
        """Tokens a request to `slot` leaves free in its window for the answer: its max_tokens, else the
        preset's output_reserve."""
        return slot.max_tokens if slot.max_tokens is not None else self.output_reserve

    @property
    def providers(self) -> set[str]:
        judge = (self.agreement,) if self.auto_layers and self.agreement is not None else ()
        return {slot.provider for slot in (*self.references, self.aggregator, *judge)}

    @property
    def bundled(self) -> bool:
        return self.source.startswith(BUNDLED_PREFIX)


class NetworkOverrides(TypedDict, total=False):
    """Some of NetworkLimits' fields, as a provider or `network:` sets them (None: that time limit is off)."""

    connect_timeout: float | None
    first_token_timeout: float | None
    stall_timeout: float | None
    max_retries: int
    max_retry_wait: float


@dataclass(frozen=True)
class NetworkLimits:
    """How long to wait and how often to try again; `network:` in config.yaml, a provider may override.

    None switches a time limit off. The defaults keep a turn from hanging on a provider that never answers
    (the SDK alone would wait 600 s) while leaving room for a slow model's first token.
    """

    connect_timeout: float | None = 10.0
    first_token_timeout: float | None = 90.0  # request sent → the answer's first text, reasoning or tool call
    stall_timeout: float | None = 30.0  # no byte at all for this long, once the answer has begun
    max_retries: int = 2  # transient failures before any answer text; never after it
    max_retry_wait: float = 30.0  # a Retry-After longer than this fails at once, saying how long

    def merged(self, overrides: NetworkOverrides) -> NetworkLimits:
        return replace(self, **overrides) if overrides else self


NETWORK_KEYS = tuple(f.name for f in fields(NetworkLimits))


@dataclass(frozen=True)
class ProviderModel:
    """What the config states about one of a provider's models (`providers: NAME: models: MODEL:`)."""

    context_window: int | None = None  # tokens the model reads


@dataclass(frozen=True)
class ProviderConfig:
    """An OpenAI-compatible endpoint. Keys never live here, only the name of the variable holding one."""

    name: str
    base_url: str | None
    api_key_env: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    max_retries: int | None = None
    # This provider's own `network:` settings (a local server may need longer for its first byte).
    network: NetworkOverrides = field(default_factory=lambda: NetworkOverrides())
    models: dict[str, ProviderModel] = field(default_factory=dict)  # by the model's id, as requests name it


@dataclass(frozen=True)
class McpServerConfig:
    name: str
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None


@dataclass
class Config:
    path: Path | None
    presets: dict[str, Preset]
    providers: dict[str, ProviderConfig]
    default_preset: str | None = None
    keymap: dict[str, str] = field(default_factory=dict)
    tools: tuple[str, ...] | None = None  # None: the built-in default set
    mcp_servers: dict[str, McpServerConfig] = field(default_factory=dict)
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    # What commands run by tools and MCP servers inherit: `core` (a fixed set plus tool_env_allow) or `all`
    # (everything but the providers' keys); tools/environment.py.
    tool_env: ToolEnvPolicy = "core"
    tool_env_allow: tuple[str, ...] = ()
    # Presets that cannot run as written (an unknown provider), with the error that says where.
    problems: dict[str, ConfigError] = field(default_factory=dict)
    network: NetworkLimits = field(default_factory=NetworkLimits)
    system_prompt: str | None = None
    pricing: dict[str, Price] = field(default_factory=dict)  # provider:model → price (over the bundled)
    save_traces: bool = False
    privacy_filter: PrivacyMode = "off"

    def traces_for(self, preset: Preset) -> bool:
        return preset.save_traces if preset.save_traces is not None else self.save_traces

    def price(self, label: str) -> Price | None:
        """What `provider:model` costs: the config's price, the bundled one, free if served locally, or None."""
        if label in self.pricing:
            return self.pricing[label]
        if label in BUNDLED_PRICES:
            return BUNDLED_PRICES[label]
        return FREE if label.partition(":")[0] in FREE_PROVIDERS else None

    def system_prompt_for(self, preset: Preset) -> str | None:
        """The system prompt a turn on `preset` starts with: the preset's own, else the global one."""
        return preset.system_prompt if preset.system_prompt is not None else self.system_prompt

    def stated_window(self, slot: Slot) -> tuple[int, str] | None:
        """The context window the config states for `slot`, with where: its own `context_window:`, else its
        provider's `models:` entry; None when the config says nothing."""
        if slot.context_window is not None:
            return slot.context_window, f"context_window on the slot {slot.label}"
        spec = self.providers.get(slot.provider)
        entry = spec.models.get(slot.model) if spec is not None else None
        if entry is not None and entry.context_window is not None:
            return entry.context_window, f"providers: {slot.provider}: models: {slot.model}: context_window"
        return None

    def limits(self, provider: str) -> NetworkLimits:
        """The time limits and retries for calls to `provider`: its own settings over the global ones."""
        spec = self.providers.get(provider)
        if spec is None:
            return self.network
        limits = self.network.merged(spec.network)
        return replace(limits, max_retries=spec.max_retries) if spec.max_retries is not None else limits

    def preset(self, name: str) -> Preset:
        try:
            return self.presets[name]
        except KeyError:
            raise UnknownPresetError(
                f"unknown preset {name!r}{did_you_mean(name, self.presets)}; "
                f"available presets: {', '.join(sorted(self.presets))}"
            ) from None


def did_you_mean(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
