"""Context windows for the loopback server: each model's window enforced, and told the way real servers tell it.

A `ServedWindows` given to `OpenAICompatibleServer` makes the server count every request's prompt (with its
own tokenizer, `loopback_tokens`, which is not moa-chat's estimate), refuse a request over its model's
window with that model's family's real error, and answer the metadata endpoints each family has:

- openai: refuses prompt + max_tokens > window with 400 `context_length_exceeded` ("maximum context length is
  N tokens. However, your messages resulted in M tokens"); tells nothing.
- groq: the same refusal without numbers; tells `context_window` in `/v1/models`.
- openrouter: prompt + max_tokens > window, 400 "This endpoint's maximum context length is N tokens. However,
  you requested about T tokens (M of text input, K in the output)"; tells `context_length` in `/v1/models`.
- anthropic: prompt > window, 400 "prompt is too long: M tokens > N maximum"; tells nothing.
- vllm: prompt + max_tokens > window, 400 "maximum context length is N tokens. However, your request has M
  input tokens"; tells `max_model_len` in `/v1/models`.
- llama.cpp: prompt >= window, 400 `exceed_context_size_error` with `n_prompt_tokens` and `n_ctx`; tells
  `default_generation_settings.n_ctx` in `/props` (and only `n_ctx_train`, never the window, in `/v1/models`).
- llama-cpp-python: prompt >= window; a stream gets 200, an empty event stream and the connection closed
  under it, another request 400 `context_length_exceeded`; tells nothing (the `local` provider knows its own).
- ollama: never refuses (Ollama cuts the prompt's start off, silently); lists its models in `/api/tags`, tells
  `context_length` in `/api/ps` once the model is loaded, and a Modelfile's `num_ctx` in `/api/show`.

`/extras/tokenize/count` (llama-cpp-python) and `/tokenize` (llama.cpp) count text with the same tokenizer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Family = Literal["openai", "groq", "openrouter", "anthropic", "vllm", "llama.cpp", "llama-cpp-python", "ollama"]
_PROMPT_ONLY: frozenset[Family] = frozenset({"anthropic", "llama.cpp", "llama-cpp-python"})
_WORDS = re.compile(r"\w{1,6}|[^\w\s]")
PER_MESSAGE = 4  # the loopback tokenizer's chat template: tokens around each message
PER_REQUEST = 3  # and the answer's opening


def loopback_tokens(text: str) -> int:
    """The loopback server's tokenizer: a word of up to six letters or digits (longer ones in pieces of
    six), or one punctuation mark, is a token."""
    return len(_WORDS.findall(text))


def prompt_tokens(body: dict[str, Any], count: Callable[[str], int] = loopback_tokens) -> int:
    """A chat request's prompt in the loopback tokenizer: each message's text and tool calls, its
    template's tokens, and the tools offered."""
    total = PER_REQUEST
    for message in body.get("messages") or []:
        total += PER_MESSAGE + count(str(message.get("role", "")))
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        total += count(content or "")
        for call in message.get("tool_calls") or []:
            total += count(json.dumps(call.get("function", {})))
    if body.get("tools"):
        total += count(json.dumps(body["tools"]))
    return total


@dataclass(frozen=True)
class ModelWindow:
    """One model's window on the loopback server, and how its family refuses and tells it."""

    tokens: int
    family: Family = "openai"
    loaded: bool = True  # ollama: whether the model is loaded (/api/ps lists it with its context_length)
    num_ctx: int | None = None  # ollama: a num_ctx its Modelfile sets (/api/show's parameters)
    trained: int | None = None  # llama.cpp's n_ctx_train and ollama's <arch>.context_length (never the window)


@dataclass(frozen=True)
class Refusal:
    """How the server answers a request over its model's window."""

    status: int
    body: dict[str, Any] | None  # None: an empty event stream, then the connection closed
    prompt_tokens: int


class ServedWindows:
    """The windows a loopback server enforces, by model id; `count` is its tokenizer."""

    def __init__(self, windows: dict[str, ModelWindow], *, count: Callable[[str], int] = loopback_tokens) -> None:
        self.windows = dict(windows)
        self.count = count
        self.asked: list[str] = []  # each metadata or tokenizer endpoint asked, in order, for a test to look at

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        return prompt_tokens(body, self.count)

    def refusal(self, body: dict[str, Any]) -> Refusal | None:
        """The family's answer to a request over its model's window, or None when it fits (or the family
        never refuses)."""
        window = self.windows.get(str(body.get("model")))
        if window is None or window.family == "ollama":
            return None
        prompt = self.prompt_tokens(body)
        output = body.get("max_tokens") or body.get("max_completion_tokens")
        output = output if isinstance(output, int) else None
        if window.family in _PROMPT_ONLY:
            over = prompt > window.tokens if window.family == "anthropic" else prompt >= window.tokens
        else:
            over = prompt + (output or 0) > window.tokens
        if not over:
            return None
        if window.family == "llama-cpp-python" and body.get("stream"):
            return Refusal(200, None, prompt)
        return Refusal(400, _error_body(window, prompt, output), prompt)

    def models(self, listed: list[str]) -> list[dict[str, Any]]:
        """`/v1/models` entries: the listed models and the windowed ones, with each family's own fields."""
        self.asked.append("/v1/models")
        entries = []
        for model in dict.fromkeys([*listed, *self.windows]):
            entry: dict[str, Any] = {"id": model, "object": "model", "owned_by": "moa-chat"}
            window = self.windows.get(model)
            if window is not None:
                entry.update(_model_fields(window))
            entries.append(entry)
        return entries

    def get(self, path: str) -> dict[str, Any] | None:
        """The answer to a GET of a metadata endpoint (`/props`, `/api/ps`), or None for another path."""
        route = path.split("?")[0].rstrip("/")
        self.asked.append(route)
        if route == "/props":
            llama = [w for w in self.windows.values() if w.family == "llama.cpp"]
            if llama:
                settings = {"n_ctx": llama[0].tokens, "params": {"n_predict": -1, "temperature": 0.8}}
                return {"default_generation_settings": settings, "total_slots": 1, "model_path": "/models/m.gguf"}
        if route == "/api/tags":
            pulled = [m for m, w in self.windows.items() if w.family == "ollama"]
            return {"models": [{"name": m if ":" in m else f"{m}:latest", "model": m} for m in pulled]}
        if route == "/api/ps":
            loaded = [(m, w) for m, w in self.windows.items() if w.family == "ollama" and w.loaded]
            return {"models": [{"name": m, "model": m, "size": 1, "context_length": w.tokens} for m, w in loaded]}
        return None

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """The answer to a POST of a metadata or tokenizer endpoint, or None for another path."""
        route = path.split("?")[0].rstrip("/")
        self.asked.append(route)
        if route == "/api/show":
            window = self.windows.get(str(body.get("model") or body.get("name")))
            if window is None or window.family != "ollama":
                return 404, {"error": f"model '{body.get('model')}' not found"}
            parameters = f"num_ctx {window.num_ctx}\nstop <|im_end|>" if window.num_ctx else "stop <|im_end|>"
            info = {"general.architecture": "llama", "llama.context_length": window.trained or 131072}
            return 200, {"parameters": parameters, "model_info": info, "details": {"format": "gguf"}}
        if route == "/extras/tokenize/count":
            return 200, {"count": self.count(str(body.get("input", "")))}
        if route == "/extras/tokenize":
            return 200, {"tokens": list(range(self.count(str(body.get("input", "")))))}
        if route == "/tokenize":
            return 200, {"tokens": list(range(self.count(str(body.get("content", "")))))}
        return None


def _model_fields(window: ModelWindow) -> dict[str, Any]:
    if window.family == "vllm":
        return {"owned_by": "vllm", "max_model_len": window.tokens}
    if window.family == "openrouter":
        return {"context_length": window.tokens, "top_provider": {"context_length": window.tokens}}
    if window.family == "groq":
        return {"owned_by": "Meta", "context_window": window.tokens}
    if window.family == "llama.cpp":
        return {"owned_by": "llamacpp", "meta": {"n_ctx_train": window.trained or 131072, "n_vocab": 32000}}
    if window.family == "llama-cpp-python":
        return {"owned_by": "me", "permissions": []}
    if window.family == "ollama":
        return {"owned_by": "library"}
    return {"owned_by": "openai"}


def _error_body(window: ModelWindow, prompt: int, output: int | None) -> dict[str, Any]:
    """The family's error body for a request of `prompt` tokens (and `output` asked for the answer)."""
    n, family = window.tokens, window.family
    if family == "llama.cpp":
        message = f"request ({prompt} tokens) exceeds the available context size ({n} tokens), try increasing it"
        error = {"code": 400, "message": message, "type": "exceed_context_size_error"}
        return {"error": {**error, "n_prompt_tokens": prompt, "n_ctx": n}}
    if family == "llama-cpp-python":
        message = (
            f"This model's maximum context length is {n} tokens. However, you requested {prompt + (output or 0)} "
            f"tokens ({prompt} in the messages, {output} in the completion). Please reduce the length of the "
            "messages or completion."
        )
        return {"error": _invalid_request(message, "context_length_exceeded")}
    if family == "openrouter":
        message = (
            f"This endpoint's maximum context length is {n} tokens. However, you requested about "
            f"{prompt + (output or 0)} tokens ({prompt} of text input, {output or 0} in the output). Please reduce "
            'the length of either one, or use the "middle-out" transform to compress your prompt automatically.'
        )
        return {"error": {"message": message, "code": 400, "metadata": {"provider_name": None}}}
    if family == "anthropic":
        message = f"prompt is too long: {prompt} tokens > {n} maximum"
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    if family == "vllm":
        message = (
            f"This model's maximum context length is {n} tokens. However, your request has {prompt} input tokens. "
            "Please reduce the length of the input messages."
        )
        return {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}
    if family == "groq":
        return {
            "error": _invalid_request(
                "Please reduce the length of the messages or completion.", "context_length_exceeded"
            )
        }
    if prompt > n:
        message = (
            f"This model's maximum context length is {n} tokens. However, your messages resulted in {prompt} "
            "tokens. Please reduce the length of the messages."
        )
    else:
        message = (
            f"This model's maximum context length is {n} tokens. However, you requested {prompt + (output or 0)} "
            f"tokens ({prompt} in the messages, {output} in the completion). Please reduce the length of the "
            "messages or completion."
        )
    return {"error": _invalid_request(message, "context_length_exceeded")}


def _invalid_request(message: str, code: str) -> dict[str, Any]:
    return {"message": message, "type": "invalid_request_error", "param": "messages", "code": code}
