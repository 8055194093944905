"""A turn on the session layer's tool loop, as the tests run it: `ToolLoop` with its environment and plan."""

from __future__ import annotations

import random

from moa_chat.config import Config
from moa_chat.engine import AnswerExtractor, CancelToken, Observer, TurnEnv, TurnPlan
from moa_chat.session import ToolLoop
from moa_chat.session.chat_tools import ChatTools
from moa_chat.tools import ApprovalPolicy, ToolRegistry


def tool_loop(
    config: Config,
    preset: str = "wire",
    *,
    tools: ToolRegistry | None = None,
    approval: ApprovalPolicy | None = None,
    observer: Observer | None = None,
    cancel: CancelToken | None = None,
    rng: random.Random | None = None,
    answer_extractor: AnswerExtractor | None = None,
) -> ToolLoop:
    """The tool loop of one turn on `preset`, offering `tools` (each call asked about as `approval` says)."""
    env = TurnEnv(config, cancel=cancel or CancelToken(), observer=observer)
    plan = TurnPlan(config.preset(preset), rng=rng, answer_extractor=answer_extractor)
    return ToolLoop(env, plan, ChatTools(tools, approval))
