"""The shapes of the JSON the store writes and reads back: a stored preset, a tool call, a session summary
and the export of a whole session.

Rows written by other versions of moa-chat may lack fields added since, hence `total=False` on the
shapes of stored presets.
"""

from __future__ import annotations

from typing import TypedDict


class SlotJson(TypedDict, total=False):
    """A Slot, as dataclasses.asdict writes it."""

    provider: str
    model: str
    temperature: float | None
    max_tokens: int | None
    reasoning_effort: str | None
    timeout: float | None
    extra_body: dict[str, object] | None
    enabled: bool
    samples: int
    context_window: int | None


class PresetJson(TypedDict, total=False):
    """A Preset as a turn stored it (tuples come back as lists)."""

    name: str
    reference_models: list[SlotJson]
    aggregator: SlotJson
    description: str
    reference_temperature: float | None
    aggregator_temperature: float | None
    reference_timeout: float | None
    max_workers: int
    tools: list[str] | None
    fanout: str
    max_iterations: int | None
    source: str
    system_prompt: str | None
    layers: int
    auto_layers: bool  # `layers: auto`: `layers` is then max_layers
    agreement: SlotJson | None
    quorum: int | None
    deadline: float | None
    shuffle: bool
    anonymous: bool
    max_cost_per_turn: float | None
    save_traces: bool | None
    compact_model: SlotJson | None
    compact_at: float
    output_reserve: int


class SummaryJson(TypedDict):
    """A session summary as `moa-chat sessions --json` and the JSON export write it."""

    id: str
    title: str
    created: str  # ISO 8601, UTC
    updated: str
    preset: str
    turns: int
    cost: float | None


class FunctionCallJson(TypedDict):
    name: str
    arguments: str  # JSON text, as the model wrote it


class ToolCallJson(TypedDict):
    """A tool call as the chat completions API spells it in an assistant message."""

    id: str
    type: str
    function: FunctionCallJson


class TurnJson(TypedDict):
    """A turn in the JSON export."""

    id: int
    kind: str
    user_message_id: int | None
    preset: PresetJson
    status: str
    error: str | None
    seconds: float | None
    # Each call's record, with the reference's full answer as "text" and a reasoning model's thinking as
    # "reasoning" (null when none came).
    calls: list[dict[str, object]]


class SessionJson(TypedDict):
    """Everything the store holds for a session: `moa-chat export --json`."""

    session: SummaryJson
    # The conversation shown, in order, then every other version's messages, each with its id, parent_id,
    # turn_id, partial and `shown` (on the conversation shown)
    messages: list[dict[str, object]]
    turns: list[TurnJson]
