"""`call_llm`: one chat-completions call to any configured OpenAI-compatible endpoint.

The contract (from the seed): streaming calls return the SDK's raw stream untouched and skip response
validation; `stream`, `stream_options` and `timeout` reach the request only when given. This module is
where the seed names it (`agent.auxiliary_client` there), so `call_llm` and the helpers the seed's tests
replace (`_resolve_task_provider_model`, `_get_cached_client`, `_validate_llm_response`) are looked up
here at call time.
"""

from __future__ import annotations

from typing import Any

from ..config import Config, load_config
from ..providers import resolve_endpoint
from .clients import get_cached_client as _get_cached_client
from .clients import load_sdk, sending, warm_up
from .errors import (
    CutOff,
    LLMCallError,
    TimedOut,
    closed_midway,
    describe_call_error,
    describe_error,
    format_wait,
    is_transient,
    redact,
    retry_after,
)
from .models import list_models
from .stream import StreamAssembler, ToolCall, close_stream, is_complete_response, note_bytes, stream_chunks
from .usage import Usage

__all__ = [
    "CutOff",
    "LLMCallError",
    "StreamAssembler",
    "TimedOut",
    "ToolCall",
    "Usage",
    "call_llm",
    "close_stream",
    "closed_midway",
    "describe_error",
    "format_wait",
    "is_complete_response",
    "is_transient",
    "list_models",
    "load_sdk",
    "note_bytes",
    "retry_after",
    "sending",
    "stream_chunks",
    "warm_up",
]

API_MODE = "chat_completions"


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
    max_retries: int | None = None,
) -> Any:
    """Call a chat-completions endpoint; stream=True returns the SDK's raw stream (not validated)."""
    import openai  # on first use, not at start-up (see clients.warm_up)

    config = config or load_config()
    provider, model, base_url, api_key, _mode = _resolve_task_provider_model(
        task, provider, model, base_url, api_key, config=config
    )
    client, model = _get_cached_client(provider, model, base_url, api_key, config=config)
    # The messages go in the body as they are, beside the SDK's typed transform rather than through it: the
    # transform walks every message and part against its TypedDict (about 0.2 ms a message, so 90 ms of CPU
    # per request in a 200-turn conversation, for every reference at once, holding the GIL), and for chat
    # messages it changes nothing. The body on the wire is the same, `messages` in its usual place.
    request: dict[str, Any] = {
        "model": model,
        "messages": [],
        "extra_body": {**(extra_body or {}), "messages": messages},
    }
    if tools:
        request["tools"] = tools
    if temperature is not None:
        request["temperature"] = temperature
    if max_tokens is not None:
        request["max_tokens"] = max_tokens
    if reasoning_effort is not None:
        request["reasoning_effort"] = reasoning_effort
    if timeout is not None:
        request["timeout"] = timeout
    if stream:
        request["stream"] = True
        if stream_options is not None:
            request["stream_options"] = stream_options
    try:
        sdk = client if max_retries is None else client.with_options(max_retries=max_retries)
        response = sdk.chat.completions.create(**request)
    except openai.OpenAIError as exc:
        # A provider may echo the request's Authorization header or the key itself: never pass that on.
        reason = redact(describe_call_error(exc, base_url=base_url, provider=provider), (api_key,))
        raise LLMCallError(
            reason,
            provider=provider,
            model=model,
            task=task,
            status=getattr(exc, "status_code", None),
            transient=is_transient(exc),
            retry_after=retry_after(exc),
        ) from exc
    if stream:
        return response
    return _validate_llm_response(response, task=task, provider=provider, model=model)
