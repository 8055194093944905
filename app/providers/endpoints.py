"""Turning a provider name into a usable endpoint: its base URL and its key from the environment."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..config import Config, ConfigError, ProviderConfig
from . import lifecycle

# Local servers accept any key; the SDK insists on a non-empty one.
_PLACEHOLDER_KEY = "not-needed"


class MissingApiKeyError(ConfigError):
    def __init__(self, provider: str, env_var: str) -> None:
        self.provider, self.env_var = provider, env_var
        super().__init__(
            f"provider {provider!r} needs an API key: set the environment variable {env_var} "
            f"(e.g. `export {env_var}=...`), or pick another preset with --preset (try `--preset demo`)"
        )


class UnknownProviderError(ConfigError):
    pass


@dataclass(frozen=True)
class Endpoint:
    """Where a call goes and with which key (headers and retries live on the ProviderConfig)."""

    base_url: str
    api_key: str


def provider_config(name: str, config: Config) -> ProviderConfig:
    try:
        return config.providers[name]
    except KeyError:
        known = ", ".join(sorted(config.providers))
        raise UnknownProviderError(
            f"unknown provider {name!r}: define it under `providers:` in config.yaml with base_url: and "
            f"api_key_env:, or use one of: {known}",
            path=config.path,
        ) from None


def resolve_endpoint(name: str, config: Config, *, base_url: str | None = None, api_key: str | None = None) -> Endpoint:
    """Base URL and key for a provider; explicit base_url/api_key win over the table."""
    spec = config.providers.get(name)
    if base_url is None:
        # A call whose turn did not start its provider first starts it here, quietly, by the one rule.
        base_url = start_server(name, config)
    if spec is None and not base_url:
        spec = provider_config(name, config)  # raises: names the providers that exist
    if base_url is None:
        assert spec is not None
        base_url = spec.base_url
        if name == "openai" and os.environ.get("OPENAI_BASE_URL"):
            base_url = os.environ["OPENAI_BASE_URL"]
    if api_key is None:
        api_key = key_for(spec) if spec else None
    if not base_url:
        raise UnknownProviderError(f"provider {name!r} has no base_url", path=config.path)
    return Endpoint(base_url=base_url.rstrip("/"), api_key=api_key or _PLACEHOLDER_KEY)


class ServerStarter(Protocol):
    """Starts a provider's server before a turn's first call (`start_server`); injected into ChatSession, so a
    session whose calls never reach a wire is given none rather than detected."""

    def __call__(
        self,
        name: str,
        config: Config,
        *,
        report: lifecycle.Reporter | None = None,
        abandon: Callable[[], bool] | None = None,
    ) -> str | None: ...


def start_server(
    name: str,
    config: Config,
    *,
    report: lifecycle.Reporter | None = None,
    abandon: Callable[[], bool] | None = None,
) -> str | None:
    """Start `name` now if moa-chat runs it itself and the config gives it no address of its own, telling
    `report` how it goes; raises what the start raised. Returns the running server's base URL, None for
    a provider that is simply an address. The one place that decides: resolve_endpoint asks here too."""
    spec = config.providers.get(name)
    if spec is not None and spec.base_url:
        return None
    return lifecycle.start(name, report, abandon=abandon)


def key_for(spec: ProviderConfig) -> str | None:
    """The provider's key from its environment variable; None if it needs none."""
    if not spec.api_key_env:
        return None
    key = os.environ.get(spec.api_key_env, "").strip()
    if not key:
        raise MissingApiKeyError(spec.name, spec.api_key_env)
    return key


def has_key(name: str, config: Config) -> bool:
    """True when a call to this provider would find its key (or needs none)."""
    spec = config.providers.get(name)
    if spec is None:
        return False
    return not spec.api_key_env or bool(os.environ.get(spec.api_key_env, "").strip())


def is_remote_keyed(name: str, config: Config) -> bool:
    spec = config.providers.get(name)
    return bool(spec and spec.api_key_env)
