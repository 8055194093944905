"""`call_llm`: one chat-completions call to any configured OpenAI-compatible endpoint.

The contract (from the seed): streaming calls return the SDK's raw stream untouched and skip response
validation; `stream`, `stream_options` and `timeout` reach the request only when given.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

import openai

from .config import Config, ConfigError, load_config
from .providers import resolve_endpoint
from .stream import is_complete_response

API_MODE = "chat_completions"


class LLMCallError(RuntimeError):
    """A provider call that failed, named by task, provider and model, with a reason a user can act on."""

    def __init__(
        self, reason: str, *, provider: str, model: str, task: str | None = None, status: int | None = None
    ) -> None:
        self.reason, self.provider, self.model, self.task, self.status = reason, provider, model, task, status
        super().__init__(f"{provider}:{model} failed: {reason}")


def _resolve_task_provider_model(
    task: str | None,
    provider: str | None,
    model: str | None,
    base_url: str | None = None,
    api_key: str | None = None,
    *,
    config: Config | None = None,
) -> tuple[str, str, str, str, str]:
    """(provider, model, base_url, api_key, api_mode) for a call; errors name what is missing."""
    if not model:
        raise ValueError(f"call_llm({task or 'call'}): a model is required")
    if not provider:
        if not base_url:
            raise ValueError(f"call_llm({task or 'call'}): give a provider or a base_url")
        provider = "custom"
    endpoint = resolve_endpoint(provider, config or load_config(), base_url=base_url, api_key=api_key)
    return provider, model, endpoint.base_url, endpoint.api_key, API_MODE


_clients: dict[tuple, openai.OpenAI] = {}
_clients_lock = threading.Lock()


def _get_cached_client(
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


def _validate_llm_response(response: Any, *, task: str | None, provider: str, model: str) -> Any:
    if not is_complete_response(response):
        raise RuntimeError(f"{task or 'LLM'} call to {provider}:{model} returned a response without choices[0].message")
    return response


def call_llm(
    *,
    task: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    reasoning_effort: str | None = None,
    timeout: Any = None,
    stream: bool = False,
    stream_options: dict[str, Any] | None = None,
    extra_body: dict[str, Any] | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    config: Config | None = None,
) -> Any:
    """Call a chat-completions endpoint; stream=True returns the SDK's raw stream (not validated)."""
    config = config or load_config()
    provider, model, base_url, api_key, _mode = _resolve_task_provider_model(
        task, provider, model, base_url, api_key, config=config
    )
    client, model = _get_cached_client(provider, model, base_url, api_key, config=config)
    request: dict[str, Any] = {"model": model, "messages": messages}
    if tools:
        request["tools"] = tools
    if temperature is not None:
        request["temperature"] = temperature
    if max_tokens is not None:
        request["max_tokens"] = max_tokens
    if reasoning_effort is not None:
        request["reasoning_effort"] = reasoning_effort
    if extra_body:
        request["extra_body"] = extra_body
    if timeout is not None:
        request["timeout"] = timeout
    if stream:
        request["stream"] = True
        if stream_options is not None:
            request["stream_options"] = stream_options
    try:
        response = client.chat.completions.create(**request)
    except openai.OpenAIError as exc:
        raise LLMCallError(
            describe_error(exc), provider=provider, model=model, task=task, status=getattr(exc, "status_code", None)
        ) from exc
    if stream:
        return response
    return _validate_llm_response(response, task=task, provider=provider, model=model)


def close_stream(stream: Any) -> None:
    """Close an SDK stream at once, even while another thread is blocked reading it.

    Closing the response alone leaves a blocked read waiting for the server's next byte (measured: the
    full 10 s of a silent stream); shutting the socket down wakes that read immediately.
    """
    response = getattr(stream, "response", None)
    extensions = getattr(response, "extensions", None) or {}
    network = extensions.get("network_stream")
    sock = network.get_extra_info("socket") if network is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    close = getattr(stream, "close", None)
    if close is not None:
        close()


def describe_error(exc: BaseException) -> str:
    """A one-line reason for a failed call: HTTP status and the server's message, or the network fault."""
    if isinstance(exc, LLMCallError):
        return exc.reason
    if isinstance(exc, ConfigError):
        return exc.message
    if isinstance(exc, openai.APITimeoutError):
        return "timed out waiting for the provider"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f": {_first_line(str(cause))}" if cause and str(cause) else ""
        return f"cannot reach the endpoint{detail}"
    if isinstance(exc, openai.APIStatusError):
        message = _server_message(exc.body) or _first_line(exc.message)
        hint = {
            401: " (check the API key)",
            403: " (the key may lack access to this model)",
            404: " (check the model name and base_url)",
            429: " (rate limited; try again shortly)",
        }
        return f"HTTP {exc.status_code}: {message}{hint.get(exc.status_code, '')}"
    text = _first_line(str(exc)) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


def _server_message(body: Any) -> str | None:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return _first_line(inner["message"])
        if isinstance(inner, str):
            return _first_line(inner)
    return None


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 300 else line[:297] + "..."
