"""An Ollama server on this machine, if one answers: which models it has, asked with a short limit.

When it is not running, the answer is None, and a preset whose aggregator is on Ollama cannot run
(readiness.py). The last answer is kept: `installed_models` asks when nothing is known yet (or `fresh`),
`last_answer` only reads what is known. The chat asks on a worker thread after its first paint and again
every few seconds (never on the UI's thread), so an Ollama started or stopped meanwhile is found;
`moa-chat presets` and `moa-chat api` ask as they start.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from ..config import Config, Preset

OLLAMA = "ollama"
TIMEOUT = 0.5  # it is local: a running server answers in milliseconds


def _root(base_url: str) -> str:
    return base_url.removesuffix("/").removesuffix("/v1")


@dataclass(frozen=True)
class Answer:
    """What Ollama said when last asked: the models it has pulled, or None when nothing answered."""

    models: tuple[str, ...] | None


_answers: dict[str, Answer] = {}  # by base URL
_lock = threading.Lock()


def _probe(base_url: str) -> tuple[str, ...] | None:
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
    """The models the configured Ollama server has pulled, or None when it does not answer (half a second at
    most; a refused connection at once). Asked once, then read from the last answer; `fresh` asks again
    (Ollama may have started or stopped since)."""
    base_url = _base_url(config)
    if base_url is None:
        return None
    with _lock:
        known = _answers.get(base_url)
    if known is not None and not fresh:
        return known.models
    models = _probe(base_url)
    with _lock:
        _answers[base_url] = Answer(models)
    return models


def last_answer(config: Config) -> Answer | None:
    """What the configured Ollama said when last asked, without asking; None when it has not been asked."""
    base_url = _base_url(config)
    if base_url is None:
        return None
    with _lock:
        return _answers.get(base_url)


def forget() -> None:
    """Forget every answer: the next `installed_models` asks again."""
    with _lock:
        _answers.clear()


def not_running(config: Config, preset: Preset) -> str | None:
    """What `preset` needs when its aggregator is on an Ollama that did not answer when last asked ("Ollama
    running at http://localhost:11434 (start it with `ollama serve`)"); None when it answered, or has not been
    asked yet, or the aggregator is elsewhere."""
    answer = last_answer(config)
    if preset.aggregator.provider != OLLAMA or answer is None or answer.models is not None:
        return None
    return f"Ollama running at {address(config)} (start it with `ollama serve`)"


def _base_url(config: Config) -> str | None:
    spec = config.providers.get(OLLAMA)
    return spec.base_url if spec is not None and spec.base_url else None


def address(config: Config) -> str:
    """Where Ollama is expected, for messages: `http://localhost:11434`."""
    spec = config.providers.get(OLLAMA)
    return _root(spec.base_url) if spec is not None and spec.base_url else "(no base_url for ollama)"
