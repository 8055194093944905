"""One SDK client per endpoint and key, shared by every call and thread (keeps connections warm)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from ..config import Config, load_config
from ..config.model import NetworkLimits

if TYPE_CHECKING:
    import httpx2 as httpx
    import openai

# The byte-level limits are the engine's watchdog's to enforce, with its clear message; the HTTP client's
# read timeout sits this far behind them, to bound a request nobody watches (the seed's direct calls).
BACKSTOP_MARGIN = 15.0


def http_timeout(limits: NetworkLimits) -> httpx.Timeout:
    import httpx2 as httpx

    waits = [w for w in (limits.first_token_timeout, limits.stall_timeout) if w is not None]
    read = max(waits) + BACKSTOP_MARGIN if len(waits) == 2 else None
    return httpx.Timeout(connect=limits.connect_timeout, read=read, write=read, pool=limits.connect_timeout)


_clients: dict[tuple[Any, ...], openai.OpenAI] = {}
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
    import openai  # here, not at start-up: it takes half a second (see warm_up)

    config = config or load_config()
    spec = config.providers.get(provider)
    headers = tuple(sorted(spec.headers.items())) if spec else ()
    limits = config.limits(provider)
    timeout = http_timeout(limits)
    key = (base_url, api_key, headers, limits.max_retries, repr(timeout))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = openai.OpenAI(
                base_url=base_url,
                api_key=api_key,
                default_headers=dict(headers) or None,
                max_retries=limits.max_retries,
                timeout=timeout,
            )
            _clients[key] = client
    return client, model


def warm_up() -> None:
    """Import the SDK on a background thread, once the app has shown its first screen, so that neither
    the start-up nor the first turn waits for it."""

    def load() -> None:
        import openai  # noqa: F401

    threading.Thread(target=load, name="moa-import-sdk", daemon=True).start()
