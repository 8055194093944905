"""What a turn will cost, estimated before it is sent, for `max_cost_per_turn`.

A rough upper estimate from sizes, not a tokenizer: about four characters a token, every reply as long as
its slot's `max_tokens` allows (DEFAULT_REPLY_TOKENS when unset), a later layer reading all of the layer
before, and the aggregator reading the last layer's answers. Under `layers: auto`, every layer up to
`max_layers` runs, each but the last followed by the agreement judge's call. Calls with no known price are
named, not guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..config import Config, Preset
from ..llm.messages import Message
from ..prompts import ADVISOR_PROMPT, message_text
from .panel import layer_panel

CHARACTERS_PER_TOKEN = 4
DEFAULT_REPLY_TOKENS = 1_000
GUIDANCE_OVERHEAD = 150  # the guidance's own words, in tokens
VERDICT_TOKENS = 20  # `layers: auto`: the judge's one-word answer, with room for a little more


@dataclass(frozen=True)
class Estimate:
    dollars: float
    unpriced: tuple[str, ...]  # provider:model labels with no price (left out of `dollars`)


def tokens_of(messages: Sequence[Message]) -> int:
    return sum(len(message_text(m.get("content"))) // CHARACTERS_PER_TOKEN + 4 for m in messages)


def estimate_turn(config: Config, preset: Preset, messages: Sequence[Message], *, solo: bool = False) -> Estimate:
    prompt = tokens_of(messages)
    dollars = 0.0
    unpriced: list[str] = []

    def charge(label: str, prompt_tokens: int, reply_tokens: int) -> None:
        nonlocal dollars
        price = config.price(label)
        if price is None:
            if label not in unpriced:
                unpriced.append(label)
        else:
            dollars += price.cost(prompt_tokens, reply_tokens)

    earlier = 0  # tokens of the previous layer's answers
    layer_out = 0
    if not solo:
        advisor = len(ADVISOR_PROMPT) // CHARACTERS_PER_TOKEN
        first = 0
        for layer in range(1, preset.layers + 1):
            seats = layer_panel(preset, layer, first)
            first += len(seats)
            layer_out = 0
            for seat in seats:
                out = seat.slot.max_tokens or DEFAULT_REPLY_TOKENS
                charge(seat.slot.label, prompt + advisor + earlier, out)
                layer_out += out
            earlier = layer_out
            if preset.auto_layers and layer < preset.layers:  # the most it can cost: every check says disagree
                judge = preset.agreement_judge
                charge(judge.label, prompt + layer_out + GUIDANCE_OVERHEAD, judge.max_tokens or VERDICT_TOKENS)
    aggregator = preset.aggregator
    charge(aggregator.label, prompt + layer_out + GUIDANCE_OVERHEAD, aggregator.max_tokens or DEFAULT_REPLY_TOKENS)
    return Estimate(dollars, tuple(unpriced))
