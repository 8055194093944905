"""config.yaml and the bundled presets: where they live, how they merge, and what makes them wrong.

Loading is tolerant where a config written for another tool would be (unknown top-level sections,
provider names nobody defined yet: those only fail when a call is made) and strict where a user
would want to know at once (bad YAML, incomplete presets, misspelt keys), always naming the file,
the line and the key.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Iterable
from importlib.resources import files
from pathlib import Path
from typing import Any

from .builtin_providers import BUILTIN_PROVIDERS
from .model import (
    BUNDLED_PREFIX,
    DEFAULT_MAX_ITERATIONS,
    DEFAULT_MAX_WORKERS,
    FANOUT_MODES,
    NETWORK_KEYS,
    Config,
    ConfigError,
    McpServerConfig,
    NetworkLimits,
    Preset,
    Price,
    ProviderConfig,
    Slot,
    did_you_mean,
)
from .paths import default_config_path
from .yaml_positions import PositionedDict, PositionedList, YamlSyntaxError, load_yaml

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
    "quorum",
    "deadline",
    "shuffle",
    "anonymous",
    "max_cost_per_turn",
    "save_traces",
)
TOP_LEVEL_KEYS = (
    "moa",
    "providers",
    "keymap",
    "tools",
    "max_iterations",
    "mcp_servers",
    "tool_env_allow",
    "network",
    "system_prompt",
    "pricing",
    "save_traces",
    "privacy_filter",
)
PRIVACY_MODES = ("off", "display", "full")
MOA_KEYS = ("default_preset", "presets")
PROVIDER_TIME_LIMITS = ("connect_timeout", "first_token_timeout", "stall_timeout", "max_retry_wait")
PROVIDER_KEYS = ("base_url", "api_key_env", "headers", "max_retries", *PROVIDER_TIME_LIMITS)
MCP_SERVER_KEYS = ("command", "args", "env", "cwd")


# --------------------------------------------------------------------------- loading

_cache_lock = threading.Lock()
_cache: dict[Path | None, tuple[tuple[float, ...], Config]] = {}


def load_config(path: Path | str | None = None) -> Config:
    """Load config.yaml (default: in $MOA_CHAT_HOME) merged over the bundled presets.

    A missing default file is fine (the bundled presets and providers apply); a missing file the
    user named explicitly is an error. Results are cached until a file changes.
    """
    explicit = path is not None
    config_path = Path(path).expanduser() if path is not None else default_config_path()
    stamp = _stamp(config_path)
    with _cache_lock:
        cached = _cache.get(config_path)
        if cached and cached[0] == stamp:
            return cached[1]
    if not config_path.exists():
        if explicit:
            raise ConfigError(f"config file not found: {config_path}")
        raw: Any = PositionedDict()
    else:
        try:
            text = config_path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file: {exc.strerror}", path=config_path) from exc
        except UnicodeDecodeError as exc:
            line = text_line_of(config_path, exc.start)
            raise ConfigError(
                f"the file is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); save it "
                "as UTF-8",
                path=config_path,
                line=line,
            ) from exc
        raw = _parse(text, config_path)
    config = _build_config(raw if raw is not None else PositionedDict(), config_path)
    with _cache_lock:
        _cache[config_path] = (stamp, config)
    return config


def text_line_of(path: Path, offset: int) -> int:
    """The 1-based line of a byte offset in a file (for errors about undecodable bytes)."""
    with path.open("rb") as handle:
        return handle.read(offset).count(b"\n") + 1


def load_config_text(text: str, path: str = "<config>") -> Config:
    """Build a Config from YAML text (used by tests and `--config -`-style callers)."""
    raw = _parse(text, path)
    return _build_config(raw if raw is not None else PositionedDict(), Path(path))


def _stamp(path: Path) -> tuple[float, ...]:
    try:
        st = path.stat()
        return (st.st_mtime_ns, st.st_size)
    except OSError:
        return (-1,)


def _parse(text: str, path: Path | str) -> Any:
    try:
        return load_yaml(text, path)
    except YamlSyntaxError as exc:
        raise ConfigError(
            f"invalid YAML at line {exc.line}, column {exc.column}: {exc.problem}"
            if exc.line
            else f"invalid YAML: {exc.problem}",
            path=path,
            line=exc.line,
        ) from exc


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
        raw = _parse(entry.read_text(encoding="utf-8"), source)
        ctx = _Context(source)
        presets[name] = _parse_preset(name, raw, ctx)
    return presets


def _build_config(raw: Any, path: Path) -> Config:
    ctx = _Context(path)
    if not isinstance(raw, dict):
        raise ctx.error(None, "the file must hold a mapping of sections (moa:, providers:, ...)", raw)
    ctx.check_keys(raw, TOP_LEVEL_KEYS, "config.yaml")

    providers = dict(BUILTIN_PROVIDERS)
    raw_providers = raw.get("providers")
    if raw_providers is not None:
        ctx.expect_mapping(raw_providers, "providers", raw, "providers")
        for name, body in raw_providers.items():
            providers[name] = _parse_provider(str(name), body, providers.get(name), ctx, raw_providers)

    presets = bundled_presets()
    default_preset = None
    moa = raw.get("moa")
    if moa is not None:
        ctx.expect_mapping(moa, "moa", raw, "moa")
        ctx.check_keys(moa, MOA_KEYS, "moa")
        user_presets = moa.get("presets")
        if user_presets is not None:
            ctx.expect_mapping(user_presets, "moa.presets", moa, "presets")
            for name, body in user_presets.items():
                presets[str(name)] = _parse_preset(str(name), body, ctx, parent=user_presets)
        default_preset = moa.get("default_preset")
        if default_preset is not None and not isinstance(default_preset, str):
            raise ctx.error(moa, "moa.default_preset must be a preset name", "default_preset")
        if default_preset is not None and default_preset not in presets:
            raise ctx.error(
                moa,
                f"moa.default_preset: unknown preset {default_preset!r}{did_you_mean(default_preset, presets)}; "
                f"available presets: {', '.join(sorted(presets))}",
                "default_preset",
            )

    _check_no_recursion(presets, providers, ctx)
    problems = _unknown_providers(presets, providers, ctx, moa)

    keymap = raw.get("keymap") or {}
    if not isinstance(keymap, dict) or not all(isinstance(v, str) for v in keymap.values()):
        raise ctx.error(raw, "keymap must map binding ids to keys, e.g. `switch_preset: f5`", "keymap")

    tools = _parse_tools(raw.get("tools"), ctx, raw, "tools")
    max_iterations = raw.get("max_iterations", DEFAULT_MAX_ITERATIONS)
    tool_env_allow = raw.get("tool_env_allow", [])
    if not isinstance(tool_env_allow, list) or not all(isinstance(v, str) for v in tool_env_allow):
        raise ctx.error(raw, "tool_env_allow must be a list of environment variable names", "tool_env_allow")
    ctx.expect_int(max_iterations, raw, "max_iterations", minimum=1)

    system_prompt = _parse_system_prompt(raw, ctx, "config.yaml")
    pricing = _parse_pricing(raw.get("pricing"), ctx, raw)
    save_traces = raw.get("save_traces", False)
    if not isinstance(save_traces, bool):
        raise ctx.error(raw, "save_traces must be true or false", "save_traces")
    privacy_filter = raw.get("privacy_filter", "off")
    if privacy_filter is False:  # YAML reads a bare `off` as false
        privacy_filter = "off"
    if privacy_filter not in PRIVACY_MODES:
        raise ctx.error(
            raw, f"privacy_filter must be one of {', '.join(PRIVACY_MODES)}, not {privacy_filter!r}", "privacy_filter"
        )
    network = NetworkLimits()
    raw_network = raw.get("network")
    if raw_network is not None:
        ctx.expect_mapping(raw_network, "network", raw, "network")
        ctx.check_keys(raw_network, NETWORK_KEYS, "network")
        network = network.merged(_parse_limits(raw_network, ctx, "network"))

    mcp_servers: dict[str, McpServerConfig] = {}
    raw_mcp = raw.get("mcp_servers")
    if raw_mcp is not None:
        ctx.expect_mapping(raw_mcp, "mcp_servers", raw, "mcp_servers")
        for name, body in raw_mcp.items():
            mcp_servers[str(name)] = _parse_mcp_server(str(name), body, ctx, raw_mcp)

    return Config(
        path=path,
        presets=presets,
        providers=providers,
        default_preset=default_preset,
        keymap={str(k): str(v) for k, v in keymap.items()},
        tools=tools,
        mcp_servers=mcp_servers,
        max_iterations=max_iterations,
        tool_env_allow=tuple(tool_env_allow),
        problems=problems,
        network=network,
        system_prompt=system_prompt,
        pricing=pricing,
        save_traces=save_traces,
        privacy_filter=privacy_filter,
    )


class _Context:
    """Where we are in which file, so every error can say file, line and key."""

    def __init__(self, path: Path | str) -> None:
        self.path = path

    def error(self, parent: Any, message: str, key: Any = None) -> ConfigError:
        line = None
        if isinstance(parent, PositionedDict):
            line = parent.line_of(key) if key is not None else parent.line
        elif isinstance(parent, PositionedList):
            line = parent.line_of(key) if isinstance(key, int) else parent.line
        return ConfigError(message, path=self.path, line=line)

    def expect_mapping(self, value: Any, what: str, parent: Any, key: Any) -> None:
        if not isinstance(value, dict):
            raise self.error(parent, f"{what} must be a mapping (key: value lines), not {_kind(value)}", key)

    def check_keys(self, body: dict, allowed: Iterable[str], what: str) -> None:
        allowed = tuple(allowed)
        for key in body:
            if key not in allowed:
                raise self.error(
                    body,
                    f"{what}: unknown key {key!r}{did_you_mean(str(key), allowed)}; known keys: {', '.join(allowed)}",
                    key,
                )

    def expect_number(
        self, value: Any, parent: Any, key: str, what: str, *, minimum: float = 0.0, maximum: float | None = None
    ) -> None:
        if value is None:
            return
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < minimum
            or (maximum is not None and value > maximum)
        ):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f"a number >= {minimum}"
            raise self.error(parent, f"{what}: {key} must be {bound}, not {value!r}", key)

    def expect_int(self, value: Any, parent: Any, key: str, what: str = "", *, minimum: int = 1) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            prefix = f"{what}: " if what else ""
            raise self.error(parent, f"{prefix}{key} must be a whole number >= {minimum}, not {value!r}", key)


def _parse_slot(body: Any, ctx: _Context, what: str, parent: Any, key: Any) -> Slot:
    if not isinstance(body, dict):
        raise ctx.error(parent, f"{what} must be a mapping with provider: and model:, not {_kind(body)}", key)
    ctx.check_keys(body, SLOT_KEYS, what)
    for required in ("provider", "model"):
        value = body.get(required)
        if not isinstance(value, str) or not value.strip():
            raise ctx.error(
                body,
                f"{what} is incomplete: it needs {required}: (a non-empty string)",
                required if required in body else None,
            )
    ctx.expect_number(body.get("temperature"), body, "temperature", what, maximum=2.0)
    ctx.expect_int(body.get("max_tokens"), body, "max_tokens", what)
    ctx.expect_number(body.get("timeout"), body, "timeout", what, minimum=0.001)
    extra_body = body.get("extra_body")
    if extra_body is not None and not isinstance(extra_body, dict):
        raise ctx.error(body, f"{what}: extra_body must be a mapping", "extra_body")
    effort = body.get("reasoning_effort")
    if effort is not None and not isinstance(effort, str):
        raise ctx.error(
            body, f"{what}: reasoning_effort must be a string such as low, medium or high", "reasoning_effort"
        )
    enabled = body.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ctx.error(body, f"{what}: enabled must be true or false", "enabled")
    samples = body.get("samples", 1)
    ctx.expect_int(samples, body, "samples", what)
    return Slot(
        provider=body["provider"].strip(),
        model=body["model"].strip(),
        temperature=body.get("temperature"),
        max_tokens=body.get("max_tokens"),
        reasoning_effort=effort,
        timeout=body.get("timeout"),
        extra_body=_plain(extra_body) if extra_body is not None else None,
        enabled=enabled,
        samples=samples,
    )


def _parse_preset(name: str, body: Any, ctx: _Context, parent: Any = None) -> Preset:
    what = f"preset {name!r}"
    if not isinstance(body, dict):
        raise ctx.error(parent, f"{what} must be a mapping with reference_models: and aggregator:", name)
    ctx.check_keys(body, PRESET_KEYS, what)
    refs = body.get("reference_models")
    if not isinstance(refs, list) or not refs:
        raise ctx.error(
            body,
            f"{what} needs reference_models: a list of at least one {{provider, model}} entry",
            "reference_models" if "reference_models" in body else None,
        )
    slots = tuple(_parse_slot(item, ctx, f"{what} reference {i + 1}", refs, i) for i, item in enumerate(refs))
    if "aggregator" not in body:
        raise ctx.error(body, f"{what} needs an aggregator: with provider: and model:")
    aggregator = _parse_slot(body["aggregator"], ctx, f"{what} aggregator", body, "aggregator")
    ctx.expect_number(body.get("reference_temperature"), body, "reference_temperature", what, maximum=2.0)
    ctx.expect_number(body.get("aggregator_temperature"), body, "aggregator_temperature", what, maximum=2.0)
    ctx.expect_number(body.get("reference_timeout"), body, "reference_timeout", what, minimum=0.001)
    max_workers = body.get("max_workers", DEFAULT_MAX_WORKERS)
    ctx.expect_int(max_workers, body, "max_workers", what)
    ctx.expect_int(body.get("max_iterations"), body, "max_iterations", what)
    fanout = body.get("fanout", "user_turn")
    if fanout not in FANOUT_MODES:
        raise ctx.error(body, f"{what}: fanout must be one of {', '.join(FANOUT_MODES)}, not {fanout!r}", "fanout")
    description = body.get("description", "")
    if not isinstance(description, str):
        raise ctx.error(body, f"{what}: description must be text", "description")
    layers = body.get("layers", 1)
    ctx.expect_int(layers, body, "layers", what)
    ctx.expect_int(body.get("quorum"), body, "quorum", what)
    ctx.expect_number(body.get("deadline"), body, "deadline", what, minimum=0.001)
    ctx.expect_number(body.get("max_cost_per_turn"), body, "max_cost_per_turn", what, minimum=0)
    for flag in ("shuffle", "anonymous", "save_traces"):
        if not isinstance(body.get(flag, False), bool):
            raise ctx.error(body, f"{what}: {flag} must be true or false", flag)
    return Preset(
        name=name,
        reference_models=slots,
        aggregator=aggregator,
        description=description.strip(),
        reference_temperature=body.get("reference_temperature"),
        aggregator_temperature=body.get("aggregator_temperature"),
        reference_timeout=body.get("reference_timeout"),
        max_workers=max_workers,
        tools=_parse_tools(body.get("tools"), ctx, body, "tools") if "tools" in body else None,
        fanout=fanout,
        max_iterations=body.get("max_iterations"),
        source=str(ctx.path),
        system_prompt=_parse_system_prompt(body, ctx, what),
        layers=layers,
        quorum=body.get("quorum"),
        deadline=body.get("deadline"),
        shuffle=body.get("shuffle", False),
        anonymous=body.get("anonymous", False),
        max_cost_per_turn=body.get("max_cost_per_turn"),
        save_traces=body.get("save_traces"),
    )


def _parse_tools(value: Any, ctx: _Context, parent: Any, key: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if value in ("none", False) or value == []:
        return ()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ctx.error(parent, "tools must be a list of tool names (e.g. [read_file, list_directory]) or `none`", key)


def _parse_provider(name: str, body: Any, builtin: ProviderConfig | None, ctx: _Context, parent: Any) -> ProviderConfig:
    what = f"provider {name!r}"
    if not isinstance(body, dict):
        raise ctx.error(parent, f"{what} must be a mapping with base_url: (and api_key_env: if it needs a key)", name)
    if "api_key" in body:
        raise ctx.error(
            body,
            f"{what}: keys never go in the config file; put the key in an environment "
            "variable and name that variable in api_key_env:",
            "api_key",
        )
    ctx.check_keys(body, PROVIDER_KEYS, what)
    base_url = body.get("base_url", builtin.base_url if builtin else None)
    bad_url = not isinstance(base_url, str) or not base_url.startswith(("http://", "https://"))
    if bad_url and (builtin is None or "base_url" in body):
        raise ctx.error(
            body,
            f"{what} needs base_url: an http(s) URL such as http://localhost:8000/v1",
            "base_url" if "base_url" in body else None,
        )
    headers = body.get("headers", builtin.headers if builtin else {})
    if not isinstance(headers, dict):
        raise ctx.error(body, f"{what}: headers must be a mapping", "headers")
    api_key_env = body.get("api_key_env", builtin.api_key_env if builtin else None)
    if api_key_env is not None and not isinstance(api_key_env, str):
        raise ctx.error(body, f"{what}: api_key_env must be the name of an environment variable", "api_key_env")
    max_retries = body.get("max_retries", builtin.max_retries if builtin else None)
    ctx.expect_int(max_retries, body, "max_retries", what, minimum=0)
    network = dict(builtin.network) if builtin else {}
    network.update(_parse_limits({k: v for k, v in body.items() if k in PROVIDER_TIME_LIMITS}, ctx, what, body))
    return ProviderConfig(
        name=name,
        base_url=base_url,
        api_key_env=api_key_env,
        headers={str(k): str(v) for k, v in headers.items()},
        max_retries=max_retries,
        network=network,
    )


def _parse_pricing(value: Any, ctx: _Context, parent: Any) -> dict[str, Price]:
    """`pricing: {provider:model: {input: 0.4, output: 1.6}}`, dollars per million tokens."""
    if value is None:
        return {}
    ctx.expect_mapping(value, "pricing", parent, "pricing")
    prices = {}
    for label, body in value.items():
        what = f"pricing {label!r}"
        if ":" not in str(label):
            raise ctx.error(value, f"{what}: name the model as provider:model", label)
        if not isinstance(body, dict):
            raise ctx.error(
                value, f"{what} must be a mapping with input: and output: (dollars per million tokens)", label
            )
        ctx.check_keys(body, ("input", "output"), what)
        for key in ("input", "output"):
            if key not in body:
                raise ctx.error(body, f"{what} needs {key}: (dollars per million tokens)")
            ctx.expect_number(body[key], body, key, what, minimum=0)
        prices[str(label)] = Price(float(body["input"]), float(body["output"]))
    return prices


def _parse_system_prompt(body: dict, ctx: _Context, what: str) -> str | None:
    value = body.get("system_prompt")
    if value is None:
        return None
    if not isinstance(value, str):
        raise ctx.error(
            body, f"{what}: system_prompt must be text (use `|` for several lines), not {_kind(value)}", "system_prompt"
        )
    return value.strip() or None


def _parse_limits(body: dict, ctx: _Context, what: str, parent: Any = None) -> dict[str, Any]:
    """Checked time limits and retries; a time limit of `null`, `0` or `off` switches it off."""
    parent = body if parent is None else parent
    limits: dict[str, Any] = {}
    for key, value in body.items():
        if key == "max_retries":
            ctx.expect_int(value, parent, key, what, minimum=0)
            if value is not None:
                limits[key] = value
        elif key == "max_retry_wait":
            ctx.expect_number(value, parent, key, what, minimum=0)
            if value is not None:
                limits[key] = float(value)
        elif value is None or value == 0 or value == "off":
            limits[key] = None
        else:
            ctx.expect_number(value, parent, key, what, minimum=0.001)
            limits[key] = float(value)
    return limits


def _parse_mcp_server(name: str, body: Any, ctx: _Context, parent: Any) -> McpServerConfig:
    what = f"MCP server {name!r}"
    if not isinstance(body, dict):
        raise ctx.error(parent, f"{what} must be a mapping with command: (and optional args:, env:)", name)
    ctx.check_keys(body, MCP_SERVER_KEYS, what)
    command = body.get("command")
    if not isinstance(command, str) or not command:
        raise ctx.error(body, f"{what} needs command: the program to start", "command" if "command" in body else None)
    args = body.get("args", [])
    if not isinstance(args, list):
        raise ctx.error(body, f"{what}: args must be a list", "args")
    env = body.get("env", {})
    if not isinstance(env, dict):
        raise ctx.error(body, f"{what}: env must be a mapping", "env")
    return McpServerConfig(
        name=name,
        command=command,
        args=tuple(str(a) for a in args),
        env={str(k): str(v) for k, v in env.items()},
        cwd=body.get("cwd"),
    )


def _unknown_providers(
    presets: dict[str, Preset], providers: dict[str, ProviderConfig], ctx: _Context, moa: Any
) -> dict[str, ConfigError]:
    """Presets whose slots name a provider nobody defined, with where. Not fatal at load (a config shared
    with another tool may name its providers; the seed's does), but a front end refuses to run such a
    preset and says where the name is."""
    found: dict[str, ConfigError] = {}
    user_presets = moa.get("presets") if isinstance(moa, dict) else None
    for name, preset in presets.items():
        body = user_presets.get(name) if isinstance(user_presets, dict) else None
        # The YAML bodies beside the parsed slots, for the line of each (bundled presets have none).
        bodies: list[Any] = [None] * (len(preset.reference_models) + 1)
        if isinstance(body, dict):
            bodies = [body.get("aggregator"), *body.get("reference_models", [])]
        slots = [("aggregator", preset.aggregator)]
        slots += [(f"reference {i + 1}", s) for i, s in enumerate(preset.reference_models)]
        for (where, slot), slot_body in zip(slots, bodies, strict=True):
            if slot.provider in providers or not slot.enabled:
                continue
            error = ctx.error(
                slot_body if isinstance(slot_body, dict) else body,
                f"preset {name!r} {where}: unknown provider {slot.provider!r}"
                f"{did_you_mean(slot.provider, providers)}; define it under providers: (base_url:, api_key_env:) "
                f"or use one of: {', '.join(sorted(providers))}",
                "provider" if isinstance(slot_body, dict) else None,
            )
            found.setdefault(name, error)
    return found


def _check_no_recursion(presets: dict[str, Preset], providers: dict[str, ProviderConfig], ctx: _Context) -> None:
    for preset in presets.values():
        for slot_name, slot in (
            ("aggregator", preset.aggregator),
            *((f"reference {i + 1}", s) for i, s in enumerate(preset.reference_models)),
        ):
            if slot.provider == "moa" or (slot.provider in presets and slot.provider not in providers):
                raise ConfigError(
                    f"preset {preset.name!r} {slot_name}: provider {slot.provider!r} is a MoA preset, not an "
                    "endpoint; presets cannot nest — name an OpenAI-compatible provider instead",
                    path=preset.source or ctx.path,
                )


# --------------------------------------------------------------------------- helpers


def _plain(value: Any) -> Any:
    """Positioned YAML containers back to plain dicts and lists (they are sent on the wire)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, str):
        return f"the text {value!r}"
    return f"the value {value!r}"
