"""Token usage as providers report it, added up across calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None  # in dollars, when the provider says (OpenRouter's usage.cost)

    def __add__(self, other: Usage | None) -> Usage:
        if other is None:
            return self
        costs = [c for c in (self.cost, other.cost) if c is not None]
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            sum(costs) if costs else None,
        )

    @classmethod
    def from_sdk(cls, usage: Any) -> Usage | None:
        """From an SDK usage object or dict; None when the provider reported none."""
        if usage is None:
            return None
        get = usage.get if isinstance(usage, dict) else lambda k, d=None: getattr(usage, k, d)
        prompt = get("prompt_tokens", 0) or 0
        completion = get("completion_tokens", 0) or 0
        total = get("total_tokens", 0) or prompt + completion
        if not isinstance(prompt, int) or not isinstance(completion, int):
            return None
        cost = get("cost", None)
        if not isinstance(cost, int | float) or isinstance(cost, bool) or cost < 0:
            cost = None
        return cls(prompt, completion, total, float(cost) if cost is not None else None)

    def as_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


def sum_usage(usages: list[Usage | None]) -> Usage:
    total = Usage()
    for usage in usages:
        total = total + usage
    return total
