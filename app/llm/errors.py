"""A failed provider call, and the one-line reason a user can act on.

The SDK (openai, on httpx2) is not imported here: it costs half a second, and an error of its can only
exist once it has been imported, so `loaded_sdk()` finds it in sys.modules when there is anything to describe.
"""

from __future__ import annotations

import contextlib
import importlib
import ipaddress
import re
import socket
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..config import ConfigError
from .overflow import Overflow, parse_overflow

if TYPE_CHECKING:
    import openai


class LLMCallError(RuntimeError):
    """A provider call that failed, named by task, provider and model, with a reason a user can act on.

    `transient` says whether the same request may well succeed if sent again (a 503, a refused
    connection); `retry_after` is the wait the provider asked for, in seconds, when it said."""

    def __init__(
        self,
        reason: str,
        *,
        provider: str,
        model: str,
        task: str | None = None,
        status: int | None = None,
        transient: bool = False,
        retry_after: float | None = None,
    ) -> None:
        self.reason, self.provider, self.model, self.task, self.status = reason, provider, model, task, status
        self.transient, self.retry_after = transient, retry_after
        super().__init__(f"{provider}:{model} failed: {reason}")


class TimedOut(LLMCallError):
    """A time limit of `network:` passed: no first byte, or no byte for too long mid-answer.

    Never retried: a provider that did not answer in time would only make the user wait that long again."""


class ContextOverflow(LLMCallError):
    """The provider refused the request as longer than the model's context window.

    Never transient: the same request fails again. `window` is the window the provider named and
    `prompt_tokens` the request's size as it counted it, each None when it did not say; `output_tokens`
    is the room for the answer it counted beside the prompt, when it said."""

    def __init__(
        self,
        *,
        provider: str,
        model: str,
        task: str | None = None,
        status: int | None = None,
        window: int | None = None,
        prompt_tokens: int | None = None,
        output_tokens: int | None = None,
    ) -> None:
        self.window, self.prompt_tokens, self.output_tokens = window, prompt_tokens, output_tokens
        super().__init__(
            overflow_reason(window, prompt_tokens, output_tokens),
            provider=provider,
            model=model,
            task=task,
            status=status,
        )


def overflow_reason(window: int | None, prompt_tokens: int | None, output_tokens: int | None = None) -> str:
    """ "the conversation is longer than the model's context window (9,100 tokens sent, window 8,192 tokens)"."""
    said = []
    if prompt_tokens is not None:
        answer = f" and {output_tokens:,} asked for the answer" if output_tokens else ""
        said.append(f"{prompt_tokens:,} tokens sent{answer}")
    said.append(f"window {window:,} tokens" if window is not None else "the provider did not say its window")
    return f"the conversation is longer than the model's context window ({', '.join(said)})"


def overflow_in(exc: BaseException) -> Overflow | None:
    """What `exc` says of an overflow when it is the provider refusing a request as longer than the window
    (an HTTP error, or an error event in a stream), else None."""
    openai = loaded_sdk()
    if openai is None or not isinstance(exc, openai.APIError) or isinstance(exc, openai.APIConnectionError):
        return None
    return parse_overflow(getattr(exc, "status_code", None), exc.body, exc.message)


def call_error(
    exc: openai.OpenAIError, *, provider: str, model: str, task: str | None, base_url: str, api_key: str
) -> LLMCallError:
    """The error a failed call raises: a ContextOverflow when the provider refused the request as longer than
    the window, else an LLMCallError with the reason a user can act on (never the key)."""
    status = getattr(exc, "status_code", None)
    overflow = overflow_in(exc)
    if overflow is not None:
        return ContextOverflow(
            provider=provider,
            model=model,
            task=task,
            status=status,
            window=overflow.window,
            prompt_tokens=overflow.prompt_tokens,
            output_tokens=overflow.output_tokens,
        )
    # A provider may echo the request's Authorization header or the key itself: never pass that on.
    reason = redact(describe_call_error(exc, base_url=base_url, provider=provider), (api_key,))
    return LLMCallError(
        reason,
        provider=provider,
        model=model,
        task=task,
        status=status,
        transient=is_transient(exc),
        retry_after=retry_after(exc),
    )


class CutOff(LLMCallError):
    """A stream that ended without a finish reason: whatever arrived is not a whole answer.

    The SDK raises nothing here (the connection closed cleanly), so the reading loop must notice."""

    def __init__(
        self, *, provider: str, model: str, task: str | None, characters: int, closed: str | None = None
    ) -> None:
        self.characters = characters
        if characters and closed:
            reason = f"cut off: the connection was closed mid-reply after {characters:,} characters ({closed})"
        elif closed:
            reason = f"no answer: the connection was closed before any reply arrived ({closed})"
        elif characters:
            reason = f"cut off: the stream ended without a finish reason after {characters:,} characters"
        else:
            reason = (
                "no answer: the stream ended before any reply arrived (is this an OpenAI-compatible "
                "streaming endpoint?)"
            )
        # Nothing arrived: the same request may well get a whole answer next time.
        super().__init__(reason, provider=provider, model=model, task=task, transient=not characters)
        if characters:  # not a failure to answer: an answer that stopped; say it that way
            self.args = (f"the reply from {provider}:{model} was {reason}",)

    def __str__(self) -> str:
        return str(self.args[0])


class MalformedChunk(LLMCallError):
    """A streamed chunk that is not a chat-completion chunk (not JSON): the provider or a proxy garbled the
    stream. Worth asking again while nothing of the answer was shown."""

    def __init__(self, *, provider: str, model: str, task: str | None, sample: str) -> None:
        super().__init__(
            f"the provider sent a malformed chunk ({sample!r} is not JSON)",
            provider=provider,
            model=model,
            task=task,
            transient=True,
        )


class EmptyAnswer(LLMCallError):
    """A whole answer with no text and no tool call. Transient unless the provider stopped it on purpose
    (max_tokens used up, a content filter), which it would do again."""


# What a key or a credential looks like when a provider echoes it back in an error message.
_SECRET_SHAPES = re.compile(
    r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"  # an Authorization header's value
    r"|\b(sk|pk|rk|gsk|xai|csk|fw)[-_][A-Za-z0-9_-]{12,}"  # common provider key prefixes
    r"|\bAIza[0-9A-Za-z_-]{20,}"  # Google API keys
)


def redact(text: str, secrets: tuple[str | None, ...] = ()) -> str:
    """`text` without the given secret values or anything shaped like a key or bearer token."""
    for secret in secrets:
        if secret and len(secret) >= 6:
            text = text.replace(secret, "[redacted]")
    return _SECRET_SHAPES.sub("[redacted]", text)


# What the SDK's own retry loop treats as worth another try (openai._base_client._should_retry).
TRANSIENT_STATUSES = frozenset({408, 409, 429})


def loaded_module(name: str) -> Any:
    """Module `name` if its import has begun, else None. One still being imported on another thread (the
    chat's warm-up) is waited for: half-loaded, it lacks the names asked of it."""
    if name not in sys.modules:
        return None
    return importlib.import_module(name)  # at once if loaded; else once the other thread's import is done


def loaded_sdk() -> Any:
    """The openai module if it is loaded (it is whenever one of its errors exists), else None."""
    return loaded_module("openai")


def _http() -> Any:
    return loaded_module("httpx2")


def is_transient(exc: BaseException) -> bool:
    """Whether sending the same request again may well succeed: the SDK's rules, `x-should-retry` first."""
    openai = loaded_sdk()
    if openai is None:
        return False
    if isinstance(exc, openai.APITimeoutError):
        return False  # a time limit: see TimedOut
    if isinstance(exc, openai.APIConnectionError):
        return True
    if isinstance(exc, openai.APIStatusError):
        should: str | None = exc.response.headers.get("x-should-retry")
        if should in ("true", "false"):
            return should == "true"
        status: int = exc.status_code
        return status in TRANSIENT_STATUSES or status >= 500
    return False


def retry_after(exc: BaseException) -> float | None:
    """The wait a provider asked for, in seconds: `retry-after-ms`, or `retry-after` in seconds or as a date."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    with contextlib.suppress(TypeError, ValueError):
        milliseconds = headers.get("retry-after-ms")
        if milliseconds is not None:
            return max(float(milliseconds) / 1000, 0.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    with contextlib.suppress(TypeError, ValueError):
        return max(float(value), 0.0)
    import email.utils  # an HTTP date is rare here: the email package need not load at every start-up

    with contextlib.suppress(TypeError, ValueError, IndexError):
        when = email.utils.parsedate_to_datetime(value)
        return max((when - datetime.now(when.tzinfo or UTC)).total_seconds(), 0.0)
    return None


def format_wait(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def describe_call_error(exc: openai.OpenAIError, *, base_url: str, provider: str) -> str:
    """`describe_error`, with what only the caller knows: the endpoint refused, and whether it is local."""
    import openai

    if isinstance(exc, openai.APIConnectionError) and not isinstance(exc, openai.APITimeoutError) and _refused(exc):
        reason = f"connection refused by {base_url}"
        if _is_local(base_url):
            reason += f" — is the {provider} server running on this machine?"
            if provider == "ollama":
                reason += " (start it with `ollama serve`)"
        return reason
    if isinstance(exc, openai.APIConnectionError) and _unresolved(exc):
        host = urlsplit(base_url).hostname or base_url
        return f"the host {host} could not be resolved (DNS): check base_url {base_url} and the network"
    reason = describe_error(exc)
    wait = retry_after(exc)
    if isinstance(exc, openai.APIStatusError) and exc.status_code == 429 and wait is not None:
        reason = reason.replace("try again shortly", f"the provider asks to wait {format_wait(wait)}")
    return reason


def _refused(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(8):  # the cause chain: openai error → httpx.ConnectError → OSError
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError) or "connection refused" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _unresolved(exc: BaseException) -> bool:
    """Whether the cause chain holds a failed name lookup (socket.gaierror: the host has no address)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, socket.gaierror):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _is_local(base_url: str) -> bool:
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(host).is_loopback
    return False


def closed_midway(exc: BaseException) -> str | None:
    """What happened, when a read failed because the connection closed or reset under it; else None."""
    openai, httpx = loaded_sdk(), _http()
    if httpx is not None and isinstance(exc, httpx.TimeoutException):
        return None
    kinds: tuple[type[BaseException], ...] = (ConnectionError,)
    if httpx is not None:
        kinds += (httpx.TransportError,)
    if openai is not None:
        kinds += (openai.APIConnectionError,)
    if isinstance(exc, kinds):
        cause = exc.__cause__ if openai is not None and isinstance(exc, openai.APIConnectionError) else None
        cause = cause or exc
        return _first_line(str(cause)) or type(cause).__name__
    return None


def describe_error(exc: BaseException) -> str:
    """A one-line reason for a failed call: HTTP status and the server's message, or the network fault."""
    if isinstance(exc, LLMCallError):
        return exc.reason
    if isinstance(exc, ConfigError):
        return exc.message
    openai = loaded_sdk()
    if openai is not None:
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
