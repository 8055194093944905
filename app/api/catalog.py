"""The presets the endpoint serves as models: those that can run here; the others named with the reason.

What can run is read when asked, not fixed at start: a preset on an Ollama that was not running is served
once Ollama answers. Ollama is asked again when the list of models is read or a request names a preset left
out, at most every RECHECK seconds (a refused connection answers at once, a running Ollama in milliseconds).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..config import Config, Preset
from ..providers import cycle_order, readiness
from ..providers.ollama import installed_models
from .wire import ApiError

RECHECK = 5.0  # seconds: how long Ollama's last answer stands before a request asks again


class Catalog:
    def __init__(self, config: Config, default: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config, self.default = config, default
        self._clock = clock
        self._asked_at: float | None = None
        self._served: dict[str, Preset] = {}
        self._left_out: dict[str, str] = {}
        self._read()

    @classmethod
    def of(cls, config: Config, default: str) -> Catalog:
        catalog = cls(config, default)
        catalog.recheck(force=True)
        return catalog

    def recheck(self, *, force: bool = False) -> None:
        """Ask Ollama again if its last answer is older than RECHECK (or `force`)."""
        now = self._clock()
        if force or self._asked_at is None or now - self._asked_at >= RECHECK:
            self._asked_at = now
            installed_models(self.config, fresh=True)
            self._read()

    def _read(self) -> None:
        """What can run, from what is known now: the keys and this machine do not change while the server
        runs, Ollama's answer only when it is asked again (`recheck`)."""
        states = [readiness(self.config, preset) for preset in cycle_order(self.config)]
        self._served = {state.preset.name: state.preset for state in states if state.runnable}
        self._left_out = {state.preset.name: state.reason or "" for state in states if not state.runnable}

    @property
    def served(self) -> dict[str, Preset]:
        return self._served

    @property
    def left_out(self) -> dict[str, str]:
        """Preset name: why it cannot run, as `moa-chat presets` and the chat say it ("needs OPENAI_API_KEY")."""
        return self._left_out

    def preset(self, model: str) -> Preset:
        """The preset a request's `model` names; ApiError(404) when it is not served, saying why."""
        preset = self.served.get(model)
        if preset is None and model in self.config.presets:
            self.recheck()  # left out: Ollama may have started since
            preset = self.served.get(model)
        if preset is not None:
            return preset
        why = self.left_out.get(model)
        detail = f": {why}" if why else f"; GET /v1/models lists the {len(self.served)} served here"
        raise ApiError(404, f"The model {model!r} is not served{detail}", code="model_not_found", param="model")

    def models(self, created: int) -> dict[str, object]:
        self.recheck()
        return {
            "object": "list",
            "data": [
                {
                    "id": name,
                    "object": "model",
                    "created": created,
                    "owned_by": "moa-chat",
                    "moa_chat": {
                        "description": preset.description,
                        "aggregator": preset.aggregator.label,
                        "references": [slot.label for slot in preset.references],
                        "default": name == self.default,
                    },
                }
                for name, preset in self.served.items()
            ],
        }
