"""The presets the endpoint serves as models: those that can run here; the others named with the reason."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import Config, Preset
from ..providers import cycle_order, readiness
from .wire import ApiError


@dataclass(frozen=True)
class Catalog:
    served: dict[str, Preset]
    left_out: dict[str, str]  # preset name: why it cannot run (no key, no local extra)
    default: str

    @classmethod
    def of(cls, config: Config, default: str) -> Catalog:
        served: dict[str, Preset] = {}
        left_out: dict[str, str] = {}
        for preset in cycle_order(config):
            ready = readiness(config, preset)
            if ready.runnable:
                served[preset.name] = preset
            else:
                left_out[preset.name] = f"set {ready.needs}" if ready.needs else ready.problem or "cannot run here"
        return cls(served, left_out, default)

    def preset(self, model: str) -> Preset:
        """The preset a request's `model` names; ApiError(404) when it is not served, saying why."""
        preset = self.served.get(model)
        if preset is not None:
            return preset
        why = self.left_out.get(model)
        detail = f": {why}" if why else f"; GET /v1/models lists the {len(self.served)} served here"
        raise ApiError(404, f"The model {model!r} is not served{detail}", code="model_not_found", param="model")

    def models(self, created: int) -> dict[str, object]:
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
