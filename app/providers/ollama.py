"""An Ollama server on this machine, if one answers: which models it has, asked once with a short limit.

Nothing depends on it being there: when it is not running, the answer is simply None. The chat asks on a
worker thread after its first paint (never on the UI's thread), `moa-chat presets` as it lists them.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Iterable

from ..config import Config, Preset

OLLAMA = "ollama"
TIMEOUT = 0.5  # it is local: a running server answers in milliseconds


def _root(base_url: str) -> str:
    return base_url.removesuffix("/").removesuffix("/v1")


@functools.cache
def _installed(base_url: str) -> tuple[str, ...] | None:
    import http.client  # here, not at the top: an import the app's first screen need not wait for
    import urllib.request

    # Whatever answers on that port (or nothing, or not HTTP, or not Ollama) is "no Ollama here", never a crash.
    with (
        contextlib.suppress(OSError, ValueError, TypeError, AttributeError, http.client.HTTPException),
        urllib.request.urlopen(f"{_root(base_url)}/api/tags", timeout=TIMEOUT) as response,
    ):
        models = json.load(response).get("models") or []
        return tuple(sorted({short_name(str(m["name"])) for m in models if m.get("name")}))
    return None


def short_name(model: str) -> str:
    """A model as Ollama lets you call it: `llama3.2:latest` is `llama3.2`."""
    return model.removesuffix(":latest")


def not_pulled(preset: Preset, pulled_models: Iterable[str]) -> list[str]:
    """The Ollama models `preset` names (enabled references and the aggregator) that are not among
    `pulled_models`, by short name, sorted and each once. Other providers' slots are not Ollama's to pull."""
    slots = (*preset.references, preset.aggregator)
    wanted = {short_name(slot.model) for slot in slots if slot.provider == OLLAMA}
    # Both sides by short name: `llama3.2` in a preset is pulled when Ollama lists `llama3.2:latest`.
    return sorted(wanted - {short_name(model) for model in pulled_models})


def installed_models(config: Config, *, fresh: bool = False) -> tuple[str, ...] | None:
    """The models the configured Ollama server has pulled, or None when it does not answer. Asked once per
    process; `fresh` asks again (someone opened a list of them: Ollama may have started since)."""
    spec = config.providers.get(OLLAMA)
    if spec is None or not spec.base_url:
        return None
    if fresh:
        _installed.cache_clear()
    return _installed(spec.base_url)


def address(config: Config) -> str:
    """Where Ollama is expected, for messages: `http://localhost:11434`."""
    spec = config.providers.get(OLLAMA)
    return _root(spec.base_url) if spec is not None and spec.base_url else "(no base_url for ollama)"
