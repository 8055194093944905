"""What a provider serves: its `/models` list, asked once, with a short time limit."""

from __future__ import annotations

from ..config import Config
from ..providers import resolve_endpoint
from .clients import get_cached_client
from .errors import LLMCallError, describe_call_error, redact

MODELS_TIMEOUT = 5.0  # a model list is a convenience: never let it hold up the chat


def list_models(provider: str, config: Config, *, timeout: float = MODELS_TIMEOUT) -> list[str]:
    """The model ids `provider` serves, sorted; LLMCallError (naming the provider) when it cannot say."""
    import openai

    endpoint = resolve_endpoint(provider, config)
    client, _ = get_cached_client(provider, "", endpoint.base_url, endpoint.api_key, config=config)
    try:
        page = client.with_options(timeout=timeout, max_retries=0).models.list()
        return sorted({model.id for model in page})
    except openai.OpenAIError as exc:
        reason = redact(describe_call_error(exc, base_url=endpoint.base_url, provider=provider), (endpoint.api_key,))
        raise LLMCallError(
            f"could not list its models: {reason}", provider=provider, model="*", task="list_models"
        ) from exc
