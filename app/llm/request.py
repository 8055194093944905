"""`ChatRequest`: one chat-completions call as a value, and `CallLLM`, the callable that sends one.

The engine builds every request (references, samples, layers, the aggregator) as a `ChatRequest` and hands it
to a `CallLLM`: `llm.call_llm_request` on the wire, or whatever a caller injected (the seed's facade, a
test). `as_call_kwargs` turns it into the keyword arguments of the seed's `call_llm(...)`, holding only what
was set, so a request without streaming carries no `stream`, `stream_options` or `timeout` key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypedDict

from ..config import Config
from .messages import Message, StreamOptions, ToolSpec

if TYPE_CHECKING:
    import httpx2

# A call's time limit: seconds, or the SDK's httpx Timeout (connect, read, write and pool apart).
Timeout: TypeAlias = "float | httpx2.Timeout"


@dataclass(frozen=True)
class Sampling:
    """How the model samples; a field left None stays off the wire, so the provider's default applies."""

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: str | tuple[str, ...] | None = None
    reasoning_effort: str | None = None

    def on_wire(self) -> dict[str, object]:
        """The settings that were set, by their names in a request (a list of stops as a list)."""
        stop = list(self.stop) if isinstance(self.stop, tuple) else self.stop
        fields = {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "top_p": self.top_p,
            "stop": stop,
            "reasoning_effort": self.reasoning_effort,
        }
        return {name: value for name, value in fields.items() if value is not None}


class CallKwargs(TypedDict, total=False):
    """The keyword arguments of `call_llm(...)` (the seed's signature), as `ChatRequest.as_call_kwargs` fills them."""

    task: str | None
    provider: str | None
    model: str | None
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] | None
    temperature: float | None
    max_tokens: int | None
    top_p: float | None
    stop: str | tuple[str, ...] | None
    reasoning_effort: str | None
    timeout: Timeout | None
    stream: bool
    stream_options: StreamOptions | None
    extra_body: Mapping[str, object] | None
    base_url: str | None
    api_key: str | None
    config: Config | None
    max_retries: int | None


@dataclass(frozen=True)
class ChatRequest:
    """Everything one chat-completions call needs. `provider` names an endpoint of the config (or give
    `base_url`); `task` names the call's purpose (`moa_reference`, `moa_aggregator`) in errors and traces."""

    model: str
    messages: Sequence[Message]
    provider: str | None = None
    task: str | None = None
    tools: Sequence[ToolSpec] | None = None
    sampling: Sampling = field(default_factory=Sampling)
    timeout: Timeout | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    extra_body: Mapping[str, object] | None = None
    # Retries inside the SDK; None leaves the client's own. The engine sets 0: its retries are ModelCall's.
    max_retries: int | None = None
    base_url: str | None = None
    api_key: str | None = None
    config: Config | None = field(default=None, repr=False, compare=False)

    def as_call_kwargs(self) -> CallKwargs:
        """The seed's `call_llm(**kwargs)` form: task, provider, model and messages always; the rest only
        when set (`stream_options` only on a streaming call)."""
        kwargs: CallKwargs = {
            "task": self.task,
            "provider": self.provider,
            "model": self.model,
            "messages": self.messages,
        }
        if self.tools is not None:
            kwargs["tools"] = self.tools
        if self.config is not None:
            kwargs["config"] = self.config
        sampling = self.sampling
        if sampling.temperature is not None:
            kwargs["temperature"] = sampling.temperature
        if sampling.max_tokens is not None:
            kwargs["max_tokens"] = sampling.max_tokens
        if sampling.top_p is not None:
            kwargs["top_p"] = sampling.top_p
        if sampling.stop is not None:
            kwargs["stop"] = sampling.stop
        if sampling.reasoning_effort is not None:
            kwargs["reasoning_effort"] = sampling.reasoning_effort
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        if self.timeout is not None:
            kwargs["timeout"] = self.timeout
        if self.stream:
            kwargs["stream"] = True
            if self.stream_options is not None:
                kwargs["stream_options"] = self.stream_options
        if self.max_retries is not None:
            kwargs["max_retries"] = self.max_retries
        if self.base_url is not None:
            kwargs["base_url"] = self.base_url
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key
        return kwargs

    def as_trace(self) -> dict[str, object]:
        """The request as a trace keeps it (the store's TraceWriter picks the fields it writes)."""
        trace: dict[str, object] = dict(self.as_call_kwargs())
        trace.pop("config", None)
        trace.pop("api_key", None)
        return trace


class CallLLM(Protocol):
    """Sends one request. Returns what the provider answered: with `request.stream`, the SDK's raw stream
    (or any iterable of chat-completion chunks); else a complete chat.completion (an SDK object or a dict)."""

    def __call__(self, request: ChatRequest, /) -> object: ...
