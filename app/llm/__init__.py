"""The model-call layer: `call_llm` (the seed's streaming contract) and `call_llm_request` (call.py), the request
as a value (request.py), the messages (messages.py), the client cache (clients.py), stream assembly (stream.py),
errors, usage and a provider's model list. This package is where the seed's tests find `call_llm` and replace
its helpers."""

# The helpers a call looks up here (call._seam), where the seed's tests replace them.
from .call import _resolve_task_provider_model as _resolve_task_provider_model
from .call import _validate_llm_response as _validate_llm_response
from .call import call_llm, call_llm_request
from .clients import get_cached_client as _get_cached_client  # noqa: F401 - looked up here, as above
from .clients import load_sdk, sending, warm_up
from .errors import (
    ContextOverflow,
    CutOff,
    LLMCallError,
    TimedOut,
    closed_midway,
    describe_error,
    format_wait,
    is_transient,
    loaded_sdk,
    overflow_in,
    retry_after,
)
from .messages import Message, StreamOptions, ToolSpec
from .models import list_models
from .request import CallLLM, ChatRequest, Sampling, Timeout
from .stream import StreamAssembler, ToolCall, close_stream, is_complete_response, note_bytes, stream_chunks
from .usage import Usage

__all__ = [
    "CallLLM",
    "ChatRequest",
    "ContextOverflow",
    "CutOff",
    "LLMCallError",
    "Message",
    "Sampling",
    "StreamAssembler",
    "StreamOptions",
    "TimedOut",
    "Timeout",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "call_llm",
    "call_llm_request",
    "close_stream",
    "closed_midway",
    "describe_error",
    "format_wait",
    "is_complete_response",
    "is_transient",
    "list_models",
    "load_sdk",
    "loaded_sdk",
    "note_bytes",
    "overflow_in",
    "retry_after",
    "sending",
    "stream_chunks",
    "warm_up",
]
