"""One SDK client per endpoint and key, shared by every call and thread (keeps connections warm)."""

from __future__ import annotations

import threading

import openai

from ..config import Config, load_config

_clients: dict[tuple, openai.OpenAI] = {}
_clients_lock = threading.Lock()


def get_cached_client(
    provider: str,
    model: str,
    base_url: str,
    api_key: str,
    *,
    config: Config | None = None,
) -> tuple[openai.OpenAI, str]:
    """One client per endpoint and key, shared by every call and thread (keeps connections warm)."""
    spec = (config or load_config()).providers.get(provider)
    headers = tuple(sorted(spec.headers.items())) if spec else ()
    max_retries = spec.max_retries if spec and spec.max_retries is not None else openai.DEFAULT_MAX_RETRIES
    key = (base_url, api_key, headers, max_retries)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = openai.OpenAI(
                base_url=base_url, api_key=api_key, default_headers=dict(headers) or None, max_retries=max_retries
            )
            _clients[key] = client
    return client, model
