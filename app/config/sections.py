"""The sections of config.yaml besides presets: providers, network limits, pricing, MCP servers, tools and
the system prompt, each read from its YAML mapping into the typed model."""

from __future__ import annotations

from typing import Literal

from .checks import (
    DOLLARS_AT_MOST,
    RETRIES_AT_MOST,
    SECONDS_AT_MOST,
    WINDOW_AT_MOST,
    Checker,
    YamlMapping,
    kind,
)
from .model import ConfigError, McpServerConfig, NetworkOverrides, ProviderConfig, ProviderModel
from .pricing import Price

TimeLimit = Literal["connect_timeout", "first_token_timeout", "stall_timeout"]
PROVIDER_TIME_LIMITS = ("connect_timeout", "first_token_timeout", "stall_timeout", "max_retry_wait")
PROVIDER_KEYS = ("base_url", "api_key_env", "headers", "max_retries", *PROVIDER_TIME_LIMITS, "models")
PROVIDER_MODEL_KEYS = ("context_window",)
MCP_SERVER_KEYS = ("command", "args", "env", "cwd")
# Each time-limit key to itself, typed as the key of NetworkOverrides it sets.
_TIME_LIMITS: dict[str, TimeLimit] = {
    "connect_timeout": "connect_timeout",
    "first_token_timeout": "first_token_timeout",
    "stall_timeout": "stall_timeout",
}


def parse_provider(
    name: str, body: object, builtin: ProviderConfig | None, check: Checker, parent: YamlMapping
) -> ProviderConfig:
    what = f"provider {name!r}"
    if not isinstance(body, dict):
        raise check.error(parent, f"{what} must be a mapping with base_url: (and api_key_env: if it needs a key)", name)
    if "api_key" in body:
        raise check.error(
            body,
            f"{what}: keys never go in the config file; put the key in an environment "
            "variable and name that variable in api_key_env:",
            "api_key",
        )
    check.check_keys(body, PROVIDER_KEYS, what)
    base_url = body.get("base_url", builtin.base_url if builtin else None)
    bad_url = not isinstance(base_url, str) or not base_url.startswith(("http://", "https://"))
    if bad_url and (builtin is None or "base_url" in body):
        raise check.error(
            body,
            f"{what} needs base_url: an http(s) URL such as http://localhost:8000/v1",
            "base_url" if "base_url" in body else None,
        )
    headers = body.get("headers", builtin.headers if builtin else {})
    if not isinstance(headers, dict):
        raise check.error(body, f"{what}: headers must be a mapping", "headers")
    api_key_env = body.get("api_key_env", builtin.api_key_env if builtin else None)
    if api_key_env is not None and not isinstance(api_key_env, str):
        raise check.error(body, f"{what}: api_key_env must be the name of an environment variable", "api_key_env")
    max_retries = check.whole_number(
        body.get("max_retries", builtin.max_retries if builtin else None),
        body,
        "max_retries",
        what,
        minimum=0,
        at_most=RETRIES_AT_MOST,
    )
    network = builtin.network.copy() if builtin else NetworkOverrides()
    network.update(parse_limits({k: v for k, v in body.items() if k in PROVIDER_TIME_LIMITS}, check, what, body))
    models = dict(builtin.models) if builtin else {}
    models.update(parse_provider_models(body.get("models"), check, what, body))
    return ProviderConfig(
        name=name,
        base_url=base_url if isinstance(base_url, str) else None,
        api_key_env=api_key_env,
        headers={str(k): str(v) for k, v in headers.items()},
        max_retries=max_retries,
        network=network,
        models=models,
    )


def parse_provider_models(value: object, check: Checker, what: str, parent: YamlMapping) -> dict[str, ProviderModel]:
    """`models: {MODEL: {context_window: 200000}}` under a provider: what the config states about its models,
    by the id requests name them with."""
    if value is None:
        return {}
    table = check.mapping(value, f"{what}: models", parent, "models")
    models = {}
    for model, body in table.items():
        where = f"{what} model {model!r}"
        if not isinstance(body, dict):
            raise check.error(table, f"{where} must be a mapping such as {{context_window: 128000}}", model)
        check.check_keys(body, PROVIDER_MODEL_KEYS, where)
        window = check.whole_number(body.get("context_window"), body, "context_window", where, at_most=WINDOW_AT_MOST)
        models[str(model)] = ProviderModel(context_window=window)
    return models


def parse_limits(body: YamlMapping, check: Checker, what: str, parent: YamlMapping | None = None) -> NetworkOverrides:
    """Checked time limits and retries; a time limit of `null`, `0` or `off` switches it off. Each bad value
    is kept in `check` (the others still apply), so that one load names every one."""
    parent = body if parent is None else parent
    limits = NetworkOverrides()
    for key, value in body.items():
        try:
            if key == "max_retries":
                retries = check.whole_number(value, parent, key, what, minimum=0, at_most=RETRIES_AT_MOST)
                if retries is not None:
                    limits["max_retries"] = retries
            elif key == "max_retry_wait":
                wait = check.number(value, parent, key, what, minimum=0, at_most=SECONDS_AT_MOST, unit=" seconds")
                if wait is not None:
                    limits["max_retry_wait"] = float(wait)
            elif isinstance(key, str) and key in _TIME_LIMITS:
                limit = _TIME_LIMITS[key]
                if value is None or value == 0 or value == "off":
                    limits[limit] = None
                else:
                    seconds = check.number(
                        value, parent, key, what, minimum=0.001, at_most=SECONDS_AT_MOST, unit=" seconds"
                    )
                    limits[limit] = None if seconds is None else float(seconds)
        except ConfigError as exc:
            check.errors.extend(exc.errors)
    return limits


def parse_pricing(value: object, check: Checker, parent: YamlMapping) -> dict[str, Price]:
    """`pricing: {provider:model: {input: 0.4, output: 1.6}}`, dollars per million tokens."""
    if value is None:
        return {}
    table = check.mapping(value, "pricing", parent, "pricing")
    prices = {}
    for label, body in table.items():
        what = f"pricing {label!r}"
        if ":" not in str(label):
            raise check.error(table, f"{what}: name the model as provider:model", label)
        if not isinstance(body, dict):
            raise check.error(
                table, f"{what} must be a mapping with input: and output: (dollars per million tokens)", label
            )
        check.check_keys(body, ("input", "output"), what)
        dollars = []
        for key in ("input", "output"):
            amount = check.number(body.get(key), body, key, what, minimum=0, at_most=DOLLARS_AT_MOST, unit=" dollars")
            if amount is None:
                raise check.error(
                    body, f"{what} needs {key}: (dollars per million tokens)", key if key in body else None
                )
            dollars.append(float(amount))
        prices[str(label)] = Price(*dollars)
    return prices


def parse_system_prompt(body: YamlMapping, check: Checker, what: str) -> str | None:
    value = body.get("system_prompt")
    if value is None:
        return None
    if not isinstance(value, str):
        raise check.error(
            body, f"{what}: system_prompt must be text (use `|` for several lines), not {kind(value)}", "system_prompt"
        )
    return value.strip() or None


def parse_tools(value: object, check: Checker, parent: YamlMapping, key: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if value in ("none", False) or value == []:
        return ()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(str(v) for v in value)
    raise check.error(parent, "tools must be a list of tool names (e.g. [read_file, list_directory]) or `none`", key)


def parse_mcp_server(name: str, body: object, check: Checker, parent: YamlMapping) -> McpServerConfig:
    what = f"MCP server {name!r}"
    if not isinstance(body, dict):
        raise check.error(parent, f"{what} must be a mapping with command: (and optional args:, env:)", name)
    check.check_keys(body, MCP_SERVER_KEYS, what)
    command = body.get("command")
    if not isinstance(command, str) or not command:
        raise check.error(body, f"{what} needs command: the program to start", "command" if "command" in body else None)
    args = body.get("args", [])
    if not isinstance(args, list):
        raise check.error(body, f"{what}: args must be a list", "args")
    env = body.get("env", {})
    if not isinstance(env, dict):
        raise check.error(body, f"{what}: env must be a mapping", "env")
    cwd = body.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise check.error(body, f"{what}: cwd must be a folder path, not {kind(cwd)}", "cwd")
    return McpServerConfig(
        name=name,
        command=command,
        args=tuple(str(a) for a in args),
        env={str(k): str(v) for k, v in env.items()},
        cwd=cwd,
    )
