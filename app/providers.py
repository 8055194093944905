"""The built-in table of OpenAI-compatible endpoints, and turning a provider name into a usable endpoint."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .config import Config, ConfigError, ProviderConfig

DEMO_PROVIDER = "demo"
# Local servers accept any key; the SDK insists on a non-empty one.
_PLACEHOLDER_KEY = "not-needed"

BUILTIN_PROVIDERS: dict[str, ProviderConfig] = {
    p.name: p
    for p in (
        ProviderConfig("openai", "https://api.openai.com/v1", "OPENAI_API_KEY"),
        ProviderConfig(
            "openrouter",
            "https://openrouter.ai/api/v1",
            "OPENROUTER_API_KEY",
            # OpenRouter attributes traffic by these; harmless elsewhere.
            headers={"HTTP-Referer": "https://github.com/moa-chat/moa-chat", "X-Title": "moa-chat"},
        ),
        ProviderConfig("together", "https://api.together.xyz/v1", "TOGETHER_API_KEY"),
        ProviderConfig("groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY"),
        ProviderConfig("deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
        ProviderConfig("mistral", "https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
        ProviderConfig("ollama", "http://localhost:11434/v1", None),
        ProviderConfig("lmstudio", "http://localhost:1234/v1", None),
        # The base URL is the loopback demo server's, known only once it has started.
        ProviderConfig(DEMO_PROVIDER, None, None, max_retries=0),
    )
}


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
    if name == DEMO_PROVIDER and base_url is None:
        from .demo import demo_base_url

        base_url = demo_base_url()
    spec = None if base_url and name not in config.providers else provider_config(name, config)
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
