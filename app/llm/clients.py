"""One SDK client per endpoint and key, shared by every call and thread (keeps connections warm)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from functools import cache
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
_sending = threading.local()


@contextlib.contextmanager
def sending(on_sent: Callable[[], object]) -> Iterator[None]:
    """While the block runs, call `on_sent` (on this thread) as each request it makes leaves the SDK: built
    and handed to the HTTP transport, which only has to write it out. A caller waiting for its requests to
    leave (the chat, which keeps its UI thread off the GIL meanwhile) learns it from this."""
    _sending.on_sent = on_sent
    try:
        yield
    finally:
        _sending.on_sent = None


def _request_leaving(request: object) -> None:
    on_sent = getattr(_sending, "on_sent", None)
    if on_sent is not None:
        on_sent()


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
            client = _client_type()(
                base_url=base_url,
                api_key=api_key,
                default_headers=dict(headers) or None,
                max_retries=limits.max_retries,
                timeout=timeout,
                http_client=openai.DefaultHttpxClient(event_hooks={"request": [_request_leaving]}),
            )
            _clients[key] = client
    return client, model


@cache
def _client_type() -> type[openai.OpenAI]:
    """The SDK's client, reading stream chunks through pydantic's validation.

    The SDK builds each chunk with its lenient `construct_type`, which walks the model's type hints in Python:
    on a fast stream that keeps a worker thread busy most of the time, holding the GIL the UI thread needs to
    paint (bench/stream_render.py measures it). pydantic's own validation builds the same object many times
    faster. A chunk that bends the schema (a provider that leaves out a required field) fails
    validation and takes the SDK's way, so nothing a provider sends is refused that the SDK would take.
    """
    import openai
    import pydantic
    from openai.types.chat import ChatCompletionChunk

    class Client(openai.OpenAI):
        def _process_response_data(self, *, data: object, cast_to: Any, response: httpx.Response) -> Any:
            if cast_to is ChatCompletionChunk and isinstance(data, dict):
                with contextlib.suppress(pydantic.ValidationError):
                    return ChatCompletionChunk.model_validate(data)
            return super()._process_response_data(data=data, cast_to=cast_to, response=response)

    return Client


def load_sdk() -> None:
    """Import the SDK now (the first time, the slowest import moa-chat makes; nothing after)."""
    import openai  # noqa: F401


def load_transport() -> None:
    """Load what the SDK loads at its first request (the HTTP transport, the chat resource and its stream
    reader), with a client that sends nothing."""
    import openai

    with openai.OpenAI(api_key="unused", http_client=openai.DefaultHttpxClient()) as client:
        client.chat.completions  # noqa: B018 - a resource is loaded when first read


def warm_up(then: Callable[[], object] | None = None) -> None:
    """Import the SDK, and what its first request loads, on a background thread once the app has shown its
    first screen, so that neither the start-up nor the first turn waits for it; then call `then` (on that
    thread)."""

    def load() -> None:
        load_sdk()
        load_transport()
        if then is not None:
            then()

    threading.Thread(target=load, name="moa-import-sdk", daemon=True).start()
