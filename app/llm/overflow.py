"""A provider's refusal of a request longer than the model's context window, recognised in its own words.

Each family words it differently, and most say the numbers: the window, and often the prompt's size as
the server counted it. `parse_overflow` reads both from an error's HTTP status, its JSON body and its
message, so that an overflow is reported as one (never as a network or protocol failure) and the window
it names can be kept. The wordings, one example each:

- OpenAI (400 `context_length_exceeded`): "This model's maximum context length is 128000 tokens. However,
  your messages resulted in 130412 tokens. Please reduce the length of the messages." (older models and
  DeepSeek: "However, you requested 9100 tokens (8100 in the messages, 1000 in the completion)."; GPT-5:
  "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 280000 tokens.")
- llama-cpp-python's server (what the `local` provider runs) answers the same as OpenAI's older wording;
  llama.cpp itself raises "Requested tokens (9100) exceed context window of 8192".
- llama.cpp's server (400, type `exceed_context_size_error`, with `n_prompt_tokens` and `n_ctx` in newer
  builds): "request (9100 tokens) exceeds the available context size (8192 tokens), try increasing it";
  older builds: "the request exceeds the available context size, try increasing it" (no numbers).
- vLLM: "This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens."
  and, when the prompt fits but not `max_tokens` beside it, "... maximum context length is 4096 tokens and
  your request has 3800 input tokens (1000 > 4096 - 3800)".
- OpenRouter: "This endpoint's maximum context length is 163840 tokens. However, you requested about 170000
  tokens (165000 of text input, 5000 in the output). ..."
- Anthropic: "prompt is too long: 208310 tokens > 200000 maximum".
- Google (Gemini): "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)".
- xAI: "This model's maximum prompt length is 131072 but the request contains 140000 tokens".
- Mistral: "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum context
  length".
- Groq and others: code `context_length_exceeded` with "Please reduce the length of the messages or
  completion." (no numbers: an overflow all the same, its window unknown).

A limit on tokens per minute is a rate limit, not an overflow, however it is worded.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

# The window, in the words of each family (the first group is the number).
_WINDOW = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"maximum context length is (\d[\d,]*) tokens",
        r"maximum context length of (\d[\d,]*) tokens",
        r"context size \((\d[\d,]*) tokens\)",
        r"exceed context window of (\d[\d,]*)",
        r"tokens > (\d[\d,]*) maximum",
        r"maximum number of tokens allowed \((\d[\d,]*)\)",
        r"maximum prompt length is (\d[\d,]*)",
        r"configured limit of (\d[\d,]*) tokens",
        r"too large for model with (\d[\d,]*) maximum context length",
        r"model's context length \((\d[\d,]*) tokens\)",
        r"configured context size is (\d[\d,]*) tokens",
        r"must be <= (\d[\d,]*)\. Given",
        r"exceeds the limit of (\d[\d,]*)",
    )
)
# The prompt's size as the server counted it.
_PROMPT = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"messages resulted in (\d[\d,]*) tokens",
        r"\((\d[\d,]*) in the messages",
        r"\((\d[\d,]*) of text input",
        r"request \((\d[\d,]*) tokens\)",
        r"prompt is too long: (\d[\d,]*) tokens",
        r"input token count \((\d[\d,]*)\)",
        r"request contains (\d[\d,]*) tokens",
        r"request has (\d[\d,]*) (?:input|prompt) tokens",
        r"prompt contains (\d[\d,]*) tokens",
        r"requested tokens \((\d[\d,]*)\)",
        r"the input \((\d[\d,]*) tokens\)",
        r"prompt has (\d[\d,]*) tokens",
        r"given: (\d[\d,]*) `inputs` tokens",
        r"prompt token count of (\d[\d,]*)",
    )
)
# The answer's share the server counted beside the prompt, when it says.
_OUTPUT = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"(\d[\d,]*) in the completion",
        r"(\d[\d,]*) in the output",
        r"\((\d[\d,]*) > \d[\d,]* - \d[\d,]*\)",
        r"and (\d[\d,]*) `max_new_tokens`",
    )
)
# Words that say "too long for the window" even without a number.
_SAID = re.compile(
    r"context_length_exceeded|exceed_context_size|exceeds the available context size|maximum context length"
    r"|context window|prompt is too long|prompt too long|input is too long|reduce the length of the messages"
    r"|maximum prompt length|context size has been exceeded|exceeds context size|too large for model with",
    re.IGNORECASE,
)
_RATE_LIMIT = re.compile(r"per minute|\bTPM\b|rate.?limit|throttl|too many requests", re.IGNORECASE)
_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error", "model_context_window_exceeded"})


@dataclass(frozen=True)
class Overflow:
    """What an overflow error said: the window and the prompt's size in tokens, each None when not said."""

    window: int | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None  # the answer's room the server counted beside the prompt


def parse_overflow(status: int | None, body: object, message: str = "") -> Overflow | None:
    """The overflow an error describes, or None when it is another error.

    `status` is the HTTP status (None for an error event in a stream), `body` the error's JSON as the SDK
    keeps it (the object under "error", or the whole body) and `message` its text."""
    if status == 429:
        return None
    fields = body if isinstance(body, dict) else {}
    text = " ".join(part for part in (_text_of(body), message) if part)
    if _RATE_LIMIT.search(text):
        return None
    coded = str(fields.get("code", "")) in _CODES or str(fields.get("type", "")) in _CODES
    window = _whole(fields.get("n_ctx")) or _first(_WINDOW, text)
    prompt = _whole(fields.get("n_prompt_tokens")) or _first(_PROMPT, text)
    if not coded and not _SAID.search(text) and window is None:
        return None
    if status is not None and status >= 500 and window is None:
        return None  # a server error merely mentioning the window is not a refusal of this request
    return Overflow(window=window, prompt_tokens=prompt, output_tokens=_first(_OUTPUT, text))


def _text_of(body: object) -> str:
    if isinstance(body, str):
        return body
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str):
            return message
        inner = body.get("error")
        if inner is not None and inner is not body:
            return _text_of(inner)
        return json.dumps(body, default=str)
    return ""


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        match = pattern.search(text)
        if match is not None:
            return _whole(match.group(1).replace(",", ""))
    return None


def _whole(value: object) -> int | None:
    """A positive whole number from JSON or text, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str) and value.isdigit():
        return int(value) or None
    return None
