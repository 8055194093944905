"""A failed provider call, and the one-line reason a user can act on."""

from __future__ import annotations

import re
from typing import Any

import openai

from ..config import ConfigError


class LLMCallError(RuntimeError):
    """A provider call that failed, named by task, provider and model, with a reason a user can act on."""

    def __init__(
        self, reason: str, *, provider: str, model: str, task: str | None = None, status: int | None = None
    ) -> None:
        self.reason, self.provider, self.model, self.task, self.status = reason, provider, model, task, status
        super().__init__(f"{provider}:{model} failed: {reason}")


class CutOff(LLMCallError):
    """A stream that ended without a finish reason: whatever arrived is not a whole answer.

    The SDK raises nothing here (the connection closed cleanly), so the reading loop must notice."""

    def __init__(self, *, provider: str, model: str, task: str | None, characters: int) -> None:
        self.characters = characters
        if characters:
            reason = f"cut off: the stream ended without a finish reason after {characters:,} characters"
        else:
            reason = (
                "no answer: the stream ended before any reply arrived (is this an OpenAI-compatible "
                "streaming endpoint?)"
            )
        super().__init__(reason, provider=provider, model=model, task=task)
        if characters:  # not a failure to answer: an answer that stopped; say it that way
            self.args = (f"the reply from {provider}:{model} was {reason}",)

    def __str__(self) -> str:
        return str(self.args[0])


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
