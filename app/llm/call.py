"""`call_llm`: one chat-completions call to any configured OpenAI-compatible endpoint.

`call_llm_request(ChatRequest)` is the typed way in, which the engine uses; `call_llm(**kwargs)` is the same
call in the seed's keyword form. The contract (from the seed): streaming calls return the SDK's raw stream
untouched and skip response validation; `stream`, `stream_options` and `timeout` reach the request only when
given. The seed names the module these live in (`agent.auxiliary_client` there; `moa_chat.llm` here), and its
tests replace `_resolve_task_provider_model`, `_get_cached_client` and `_validate_llm_response` on it: so they
are looked up on the package `moa_chat.llm` at call time (`_seam`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from ..config import Config, load_config
from ..providers import resolve_endpoint
from .errors import call_error
from .messages import Message, StreamOptions, ToolSpec
from .request import ChatRequest, Sampling, Timeout
from .stream import is_complete_response

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


def _validate_llm_response(response: object, *, task: str | None, provider: str, model: str) -> object:
    if not is_complete_response(response):
        raise RuntimeError(f"{task or 'LLM'} call to {provider}:{model} returned a response without choices[0].message")
    return response


def call_llm(
    *,
    task: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec] | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    top_p: float | None = None,
    stop: str | tuple[str, ...] | None = None,
    reasoning_effort: str | None = None,
    timeout: Timeout | None = None,
    stream: bool = False,
    stream_options: StreamOptions | None = None,
    extra_body: Mapping[str, object] | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    config: Config | None = None,
    max_retries: int | None = None,
) -> Any:
    """Call a chat-completions endpoint; stream=True returns the SDK's raw stream (not validated).

    The seed's keyword form of `call_llm_request`: the same request, the same wire."""
    request = ChatRequest(
        model=model or "",
        messages=messages,
        provider=provider,
        task=task,
        tools=tools,
        sampling=Sampling(temperature, max_tokens, top_p, stop, reasoning_effort),
        timeout=timeout,
        stream=stream,
        stream_options=stream_options,
        extra_body=extra_body,
        max_retries=max_retries,
        base_url=base_url,
        api_key=api_key,
        config=config,
    )
    return call_llm_request(request)


def call_llm_request(request: ChatRequest) -> object:
    """Send `request` (a `CallLLM`); with `request.stream` the SDK's raw stream, else a validated complete
    response. A provider's refusal or a network fault raises LLMCallError naming the provider and model."""
    import openai  # on first use, not at start-up (see clients.warm_up)

    task = request.task
    config = request.config or load_config()
    seam = _seam()
    provider, model, base_url, api_key, _mode = seam._resolve_task_provider_model(
        task, request.provider, request.model, request.base_url, request.api_key, config=config
    )
    client, model = seam._get_cached_client(provider, model, base_url, api_key, config=config)
    body = _sdk_body(request, model)
    try:
        max_retries = request.max_retries
        sdk = client if max_retries is None else client.with_options(max_retries=max_retries)
        response: object = sdk.chat.completions.create(**body)
    except openai.OpenAIError as exc:
        raise call_error(exc, provider=provider, model=model, task=task, base_url=base_url, api_key=api_key) from exc
    if request.stream:
        return response
    return seam._validate_llm_response(response, task=task, provider=provider, model=model)


def _sdk_body(request: ChatRequest, model: str) -> dict[str, Any]:
    """The keyword arguments of the SDK's `chat.completions.create` (its own loosely typed boundary).

    The messages go in the body as they are, beside the SDK's typed transform rather than through it: the
    transform walks every message and part against its TypedDict, a cost that grows with the conversation and
    is paid for every reference at once while holding the GIL, and for chat messages it changes nothing. The
    body on the wire is the same, `messages` in its usual place."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [],
        "extra_body": {**(request.extra_body or {}), "messages": request.messages},
    }
    if request.tools:
        body["tools"] = request.tools
    body.update(request.sampling.on_wire())
    if request.timeout is not None:
        body["timeout"] = request.timeout
    if request.stream:
        body["stream"] = True
        if request.stream_options is not None:
            body["stream_options"] = request.stream_options
    return body


def _seam() -> ModuleType:
    """The package `moa_chat.llm`, where the seed's tests replace the helpers a call uses."""
    return sys.modules[__package__]
