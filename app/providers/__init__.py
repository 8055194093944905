"""Providers: where a call goes (the endpoint and its key), and the providers moa-chat runs itself."""

from .readiness import StartChoice, choose_start, missing_keys, preflight
from .registry import (
    Endpoint,
    MissingApiKeyError,
    UnknownProviderError,
    has_key,
    is_remote_keyed,
    key_for,
    provider_config,
    resolve_endpoint,
)

__all__ = [
    "Endpoint",
    "MissingApiKeyError",
    "StartChoice",
    "UnknownProviderError",
    "choose_start",
    "has_key",
    "is_remote_keyed",
    "key_for",
    "missing_keys",
    "preflight",
    "provider_config",
    "resolve_endpoint",
]
