"""Providers: where a call goes (the endpoint and its key), and the providers moa-chat runs itself."""

from .endpoints import (
    Endpoint,
    MissingApiKeyError,
    ServerStarter,
    UnknownProviderError,
    has_key,
    is_remote_keyed,
    key_for,
    provider_config,
    resolve_endpoint,
    start_server,
)
from .readiness import (
    Readiness,
    StartChoice,
    choose_start,
    cycle_order,
    missing_keys,
    next_runnable,
    preflight,
    readiness,
)

__all__ = [
    "Endpoint",
    "MissingApiKeyError",
    "Readiness",
    "ServerStarter",
    "StartChoice",
    "UnknownProviderError",
    "choose_start",
    "cycle_order",
    "has_key",
    "is_remote_keyed",
    "key_for",
    "missing_keys",
    "next_runnable",
    "preflight",
    "provider_config",
    "readiness",
    "resolve_endpoint",
    "start_server",
]
