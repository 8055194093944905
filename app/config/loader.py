"""config.yaml and the bundled presets: where they live, how they merge, and what makes them wrong.

Loading is tolerant where a config written for another tool would be (unknown top-level sections,
provider names nobody defined yet: those only fail when a call is made) and strict where a user
would want to know at once (bad YAML, incomplete presets, misspelt keys), always naming the file,
the line and the key.
"""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path

from .builtin_providers import BUILTIN_PROVIDERS
from .checks import ITERATIONS_AT_MOST, Checker, YamlMapping, choice, parse_yaml
from .model import (
    DEFAULT_MAX_ITERATIONS,
    NETWORK_KEYS,
    PRIVACY_MODES,
    TOOL_ENV_POLICIES,
    Config,
    ConfigError,
    McpServerConfig,
    NetworkLimits,
    Preset,
    did_you_mean,
)
from .paths import default_config_path
from .preset_parsing import bundled_presets, check_no_recursion, parse_preset, unknown_providers
from .sections import parse_limits, parse_mcp_server, parse_pricing, parse_provider, parse_system_prompt, parse_tools

TOP_LEVEL_KEYS = (
    "moa",
    "providers",
    "keymap",
    "tools",
    "max_iterations",
    "mcp_servers",
    "tool_env",
    "tool_env_allow",
    "network",
    "system_prompt",
    "pricing",
    "save_traces",
    "privacy_filter",
)
MOA_KEYS = ("default_preset", "presets")


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
    raw: object = None
    if not config_path.exists():
        if explicit:
            raise ConfigError(f"config file not found: {config_path}")
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
        raw = parse_yaml(text, config_path)
    config = build_config(raw, config_path)
    with _cache_lock:
        _cache[config_path] = (stamp, config)
    return config


def text_line_of(path: Path, offset: int) -> int:
    """The 1-based line of a byte offset in a file (for errors about undecodable bytes)."""
    with path.open("rb") as handle:
        return handle.read(offset).count(b"\n") + 1


def load_config_text(text: str, path: str = "<config>") -> Config:
    """Build a Config from YAML text (used by tests and `--config -`-style callers)."""
    return build_config(parse_yaml(text, path), Path(path))


def _stamp(path: Path) -> tuple[float, ...]:
    try:
        st = path.stat()
        return (st.st_mtime_ns, st.st_size)
    except OSError:
        return (-1,)


def build_config(raw: object, path: Path) -> Config:
    """The Config a parsed config.yaml describes (an empty file, None, describes the defaults).

    Each section, provider, preset and setting is checked on its own, and one ConfigError names every
    mistake found (in file order), not only the first."""
    check = Checker(path)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise check.error(None, "the file must hold a mapping of sections (moa:, providers:, ...)", raw)
    check.collect(lambda: check.check_keys(raw, TOP_LEVEL_KEYS, "config.yaml"))

    providers = dict(BUILTIN_PROVIDERS)
    provider_bodies = check.collect(lambda: _section(raw, "providers", check)) or {}
    for name, body in provider_bodies.items():
        provider = check.collect(
            partial(parse_provider, str(name), body, providers.get(str(name)), check, provider_bodies)
        )
        if provider is not None:
            providers[str(name)] = provider

    presets = bundled_presets()
    broken: set[str] = set()  # presets with a mistake: reported once, never again as "unknown"
    moa = check.collect(lambda: _section(raw, "moa", check))
    if moa is not None:
        check.collect(lambda: check.check_keys(moa, MOA_KEYS, "moa"))
        preset_bodies = check.collect(lambda: _section(moa, "presets", check, what="moa.presets"))
        for name, body in (preset_bodies or {}).items():
            preset = check.collect(partial(parse_preset, str(name), body, check, preset_bodies))
            if preset is None:
                broken.add(str(name))
            else:
                presets[str(name)] = preset
    default_preset = check.collect(lambda: _default_preset(moa, presets, broken, check))

    check.collect(lambda: check_no_recursion(presets, providers, check))
    problems = unknown_providers(presets, providers, check, moa)

    keymap = raw.get("keymap") or {}
    if not isinstance(keymap, dict) or not all(isinstance(v, str) for v in keymap.values()):
        check.errors.append(check.error(raw, "keymap must map binding ids to keys, e.g. `switch_preset: f5`", "keymap"))
        keymap = {}

    tools = check.collect(lambda: parse_tools(raw.get("tools"), check, raw, "tools"))
    tool_env_allow = raw.get("tool_env_allow", [])
    if not isinstance(tool_env_allow, list) or not all(isinstance(v, str) for v in tool_env_allow):
        check.errors.append(
            check.error(raw, "tool_env_allow must be a list of environment variable names", "tool_env_allow")
        )
        tool_env_allow = []
    max_iterations = check.collect(
        lambda: check.whole_number_or(
            DEFAULT_MAX_ITERATIONS, raw.get("max_iterations"), raw, "max_iterations", at_most=ITERATIONS_AT_MOST
        )
    )
    tool_env = choice(raw.get("tool_env", "core"), TOOL_ENV_POLICIES)
    if tool_env is None:
        check.errors.append(
            check.error(raw, "tool_env must be `core` (a fixed set plus tool_env_allow) or `all`", "tool_env")
        )

    system_prompt = check.collect(lambda: parse_system_prompt(raw, check, "config.yaml"))
    pricing = check.collect(lambda: parse_pricing(raw.get("pricing"), check, raw))
    save_traces = check.collect(lambda: check.flag(raw.get("save_traces", False), raw, "save_traces"))
    raw_privacy = raw.get("privacy_filter", "off")
    privacy_filter = choice("off" if raw_privacy is False else raw_privacy, PRIVACY_MODES)  # YAML reads `off` as false
    if privacy_filter is None:
        check.errors.append(
            check.error(
                raw, f"privacy_filter must be one of {', '.join(PRIVACY_MODES)}, not {raw_privacy!r}", "privacy_filter"
            )
        )
    network = NetworkLimits()
    network_body = check.collect(lambda: _section(raw, "network", check))
    if network_body is not None:
        check.collect(lambda: check.check_keys(network_body, NETWORK_KEYS, "network"))
        network = network.merged(parse_limits(network_body, check, "network"))

    mcp_servers: dict[str, McpServerConfig] = {}
    server_bodies = check.collect(lambda: _section(raw, "mcp_servers", check)) or {}
    for name, body in server_bodies.items():
        server = check.collect(partial(parse_mcp_server, str(name), body, check, server_bodies))
        if server is not None:
            mcp_servers[str(name)] = server

    check.raise_collected()
    return Config(
        path=path,
        presets=presets,
        providers=providers,
        default_preset=default_preset,
        keymap={str(k): str(v) for k, v in keymap.items()},
        tools=tools,
        mcp_servers=mcp_servers,
        max_iterations=max_iterations or DEFAULT_MAX_ITERATIONS,
        tool_env=tool_env or "core",
        tool_env_allow=tuple(str(name) for name in tool_env_allow),
        problems=problems,
        network=network,
        system_prompt=system_prompt,
        pricing=pricing or {},
        save_traces=bool(save_traces),
        privacy_filter=privacy_filter or "off",
    )


def _section(parent: YamlMapping, key: str, check: Checker, *, what: str | None = None) -> YamlMapping | None:
    """The mapping under `key` (None when it is left out or empty)."""
    value = parent.get(key)
    return None if value is None else check.mapping(value, what or key, parent, key)


def _default_preset(
    moa: YamlMapping | None, presets: dict[str, Preset], broken: set[str], check: Checker
) -> str | None:
    chosen = moa.get("default_preset") if moa is not None else None
    if chosen is None or moa is None:
        return None
    if not isinstance(chosen, str):
        raise check.error(moa, "moa.default_preset must be a preset name", "default_preset")
    if chosen not in presets and chosen not in broken:
        raise check.error(
            moa,
            f"moa.default_preset: unknown preset {chosen!r}{did_you_mean(chosen, presets)}; "
            f"available presets: {', '.join(sorted(presets))}",
            "default_preset",
        )
    return chosen
