"""What a provider says about a model's context window, from its own metadata, asked with a short time limit.

- The `local` provider (llama-cpp-python, started by moa-chat) runs with the window it was given
  (MOA_CHAT_LOCAL_N_CTX): known without asking.
- `GET /models` (OpenAI-compatible) carries a window in some servers' entries: vLLM's `max_model_len`,
  llama.cpp's `meta.n_ctx` (newer builds), OpenRouter's and Together's `context_length`, Groq's
  `context_window`, Mistral's `max_context_length`. A llama.cpp entry's `n_ctx_train` is the length the model
  was trained on, not the window the server runs it with: never read as one.
- llama.cpp's server (`owned_by: llamacpp` in that list) tells its window at `GET /props`,
  `default_generation_settings.n_ctx` (the window of one slot, what a request gets).
- Ollama (a provider named `ollama`, or one on port 11434) runs a model with the window it chose when it
  loaded it: `GET /api/ps` lists each loaded model's `context_length`. Before a model is loaded, only a
  `num_ctx` its Modelfile sets is certain (`POST /api/show`'s `parameters`, capped at the trained length in
  `model_info`); otherwise Ollama decides at load time (OLLAMA_CONTEXT_LENGTH, or a default that depends on
  the machine's memory), so the window is unknown until then, and asked again later.

Everything goes through the provider's own SDK client (its base URL, key and headers), with no retries.
Nothing here raises: a provider that cannot be asked, or does not say, gives an unknown window and why.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..config import Config, ConfigError
from ..providers import MissingApiKeyError, ollama, resolve_endpoint
from ..providers.local import DEFAULT_N_CTX, LOCAL_PROVIDER, N_CTX_ENV, context_size
from .clients import get_cached_client
from .exact_count import TokenizerKind, server_root

if TYPE_CHECKING:
    import openai

DISCOVERY_TIMEOUT = 3.0  # metadata is a convenience: a provider slower than this leaves the window unknown
OLLAMA = "ollama"
OLLAMA_PORT = 11434
# Fields of a /models entry that hold the window a server runs a model with, and whose they are.
_ENTRY_FIELDS = (
    ("max_model_len", "vLLM"),
    ("context_length", ""),
    ("context_window", ""),
    ("max_context_length", ""),
)


@dataclass(frozen=True)
class ProviderWindow:
    """A provider's answer: the window (None: it does not say), where the number came from, or why not."""

    tokens: int | None
    source: str
    settled: bool = True  # False: the provider may say more later (an Ollama model not loaded yet)
    tokenizer: TokenizerKind | None = None  # the server counts text itself (exact_count.ServerTokenizer)
    base_url: str | None = None  # where it was asked


def ask_provider(config: Config, provider: str, model: str, *, timeout: float = DISCOVERY_TIMEOUT) -> ProviderWindow:
    """What `provider` says about `model`'s window. Blocks for up to a few times `timeout` (run it on a
    worker, never on a UI thread); never raises."""
    spec = config.providers.get(provider)
    if spec is None:
        return ProviderWindow(None, f"no provider {provider!r} is configured")
    if not spec.base_url:
        if provider == LOCAL_PROVIDER:
            return _local_window()
        return ProviderWindow(None, f"the {provider} provider's models have no window")
    try:
        endpoint = resolve_endpoint(provider, config)
    except MissingApiKeyError as exc:
        return ProviderWindow(None, f"not asked: {exc.env_var} is not set")
    except ConfigError as exc:
        return ProviderWindow(None, f"cannot ask {provider}: {exc.message}")
    is_ollama = provider == OLLAMA or urlsplit(endpoint.base_url).port == OLLAMA_PORT
    if is_ollama and provider == OLLAMA and not _ollama_answers(config):
        # Its list of models is asked without the SDK (ollama.py): an Ollama that is not running costs nothing.
        return ProviderWindow(None, f"Ollama does not answer at {ollama.address(config)}", settled=False)
    client, _ = get_cached_client(provider, model, endpoint.base_url, endpoint.api_key, config=config)
    asking = client.with_options(timeout=timeout, max_retries=0)
    if is_ollama:
        return _ollama(asking, endpoint.base_url, model)
    return _listed(asking, endpoint.base_url, model)


def _ollama_answers(config: Config) -> bool:
    """Whether the configured Ollama answers: taken from its last answer when that said it runs (the chat
    has asked already), asked again when it has not been asked or did not answer then."""
    last = ollama.last_answer(config)
    if last is not None and last.models is not None:
        return True
    return ollama.installed_models(config, fresh=True) is not None


def _local_window() -> ProviderWindow:
    try:
        n_ctx = context_size()
    except ConfigError as exc:
        return ProviderWindow(None, exc.message)
    said = f"{N_CTX_ENV}={n_ctx}" if n_ctx != DEFAULT_N_CTX else "the default"
    return ProviderWindow(n_ctx, f"the local server's n_ctx ({said})", tokenizer="llama-cpp-python")


def _listed(client: openai.OpenAI, base_url: str, model: str) -> ProviderWindow:
    entries, failure = _model_list(client, base_url)
    if failure is not None:
        return ProviderWindow(None, f"could not ask /models: {failure}", base_url=base_url)
    entry = next((e for e in entries if _same_model(e.get("id"), model)), None)
    if entry is None:
        return ProviderWindow(None, f"/models does not list {model}", base_url=base_url)
    if entry.get("owned_by") == "llamacpp":
        return _llama_cpp(client, base_url, entry)
    for field, whose in _ENTRY_FIELDS:
        tokens = _whole(entry.get(field))
        if tokens is not None:
            by = f" ({whose})" if whose else ""
            return ProviderWindow(tokens, f"/models {field}{by}", base_url=base_url)
    return ProviderWindow(None, "/models does not say", base_url=base_url)


def _llama_cpp(client: openai.OpenAI, base_url: str, entry: dict[str, Any]) -> ProviderWindow:
    meta = entry.get("meta")
    tokens = _whole(meta.get("n_ctx")) if isinstance(meta, dict) else None
    if tokens is not None:
        return ProviderWindow(tokens, "llama.cpp /models meta.n_ctx", tokenizer="llama.cpp", base_url=base_url)
    props, failure = _get(client, f"{server_root(base_url)}/props")
    settings = props.get("default_generation_settings") if isinstance(props, dict) else None
    tokens = _whole(settings.get("n_ctx")) if isinstance(settings, dict) else None
    if tokens is None and isinstance(props, dict):
        tokens = _whole(props.get("n_ctx"))
    if tokens is None:
        why = f"could not ask llama.cpp /props: {failure}" if failure else "llama.cpp /props does not say n_ctx"
        return ProviderWindow(None, why, tokenizer="llama.cpp", base_url=base_url)
    return ProviderWindow(tokens, "llama.cpp /props n_ctx", tokenizer="llama.cpp", base_url=base_url)


def _ollama(client: openai.OpenAI, base_url: str, model: str) -> ProviderWindow:
    root = server_root(base_url)
    running, failure = _get(client, f"{root}/api/ps")
    if failure is not None:
        return ProviderWindow(None, f"could not ask Ollama /api/ps: {failure}", settled=False, base_url=base_url)
    loaded = running.get("models") if isinstance(running, dict) else None
    for entry in loaded if isinstance(loaded, list) else []:
        if isinstance(entry, dict) and _same_model(entry.get("name") or entry.get("model"), model):
            tokens = _whole(entry.get("context_length"))
            if tokens is not None:
                return ProviderWindow(tokens, "Ollama /api/ps context_length (the loaded model)", base_url=base_url)
    shown, failure = _post(client, f"{root}/api/show", {"model": model})
    num_ctx = _num_ctx(shown.get("parameters")) if isinstance(shown, dict) else None
    if num_ctx is not None:
        trained = _trained_length(shown.get("model_info")) if isinstance(shown, dict) else None
        tokens = min(num_ctx, trained) if trained else num_ctx
        return ProviderWindow(tokens, "Ollama /api/show num_ctx (the model's Modelfile)", base_url=base_url)
    why = f"could not ask Ollama /api/show: {failure}" if failure else "Ollama chooses it when it loads the model"
    return ProviderWindow(None, f"{why}; not loaded yet", settled=False, base_url=base_url)


def _num_ctx(parameters: object) -> int | None:
    """`num_ctx 8192` in Ollama's parameters text (one `name value` a line)."""
    if not isinstance(parameters, str):
        return None
    for line in parameters.splitlines():
        name, _, value = line.strip().partition(" ")
        if name == "num_ctx":
            return _whole(value.strip())
    return None


def _trained_length(info: object) -> int | None:
    if not isinstance(info, dict):
        return None
    return next((_whole(v) for k, v in info.items() if str(k).endswith(".context_length")), None)


_lists: dict[str, tuple[list[dict[str, Any]], str | None]] = {}
_list_locks: dict[str, threading.Lock] = {}
_lists_lock = threading.Lock()


def _model_list(client: openai.OpenAI, base_url: str) -> tuple[list[dict[str, Any]], str | None]:
    """A server's /models entries, asked once per process (callers of the same server meanwhile wait)."""
    with _lists_lock:
        lock = _list_locks.setdefault(base_url, threading.Lock())
    with lock:
        if base_url not in _lists:
            answer, failure = _get(client, "models")
            data = answer.get("data") if isinstance(answer, dict) else None
            entries = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []
            if failure is None and not isinstance(data, list):
                failure = "its answer is not a model list"
            _lists[base_url] = (entries, failure)
        return _lists[base_url]


def forget_model_lists() -> None:
    """Ask servers for their /models again (tests; a provider restarted with other models)."""
    with _lists_lock:
        _lists.clear()


def _get(client: openai.OpenAI, url: str) -> tuple[Any, str | None]:
    return _asking(lambda: client.get(url, cast_to=object))


def _post(client: openai.OpenAI, url: str, body: dict[str, Any]) -> tuple[Any, str | None]:
    return _asking(lambda: client.post(url, body=body, cast_to=object))


def _asking(ask: Callable[[], object]) -> tuple[Any, str | None]:
    """(the JSON answer, None), or (None, why not)."""
    import openai

    from .errors import describe_error

    try:
        return ask(), None
    except openai.OpenAIError as exc:
        return None, describe_error(exc)


def _same_model(listed: object, model: str) -> bool:
    """A listed id names `model`: the same, or Ollama's `:latest` tag left out on either side."""
    if not isinstance(listed, str):
        return False
    return listed == model or listed.removesuffix(":latest") == model.removesuffix(":latest")


def _whole(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, float) and value.is_integer() and value > 0:
        return int(value)
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            number = int(value)
            return number if number > 0 else None
    return None
