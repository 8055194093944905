"""An Ollama server on this machine, if one answers: which models it has, asked once with a short limit.

Nothing depends on it being there: when it is not running, the answer is simply None.
"""

from __future__ import annotations

import contextlib
import functools
import json
import urllib.error
import urllib.request

from ..config import Config

OLLAMA = "ollama"
TIMEOUT = 0.5  # it is local: a running server answers in milliseconds


@functools.cache
def _installed(base_url: str) -> tuple[str, ...] | None:
    root = base_url.removesuffix("/").removesuffix("/v1")
    with (
        contextlib.suppress(OSError, urllib.error.URLError, ValueError, TimeoutError),
        urllib.request.urlopen(f"{root}/api/tags", timeout=TIMEOUT) as response,
    ):
        models = json.load(response).get("models") or []
        return tuple(sorted(str(m.get("name", "")).removesuffix(":latest") for m in models if m.get("name")))
    return None


def installed_models(config: Config) -> tuple[str, ...] | None:
    """The models the configured Ollama server has pulled, or None when it does not answer."""
    spec = config.providers.get(OLLAMA)
    if spec is None or not spec.base_url:
        return None
    return _installed(spec.base_url)
