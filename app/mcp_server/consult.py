"""One consultation of the panel, as `consult_panel` runs it: a fresh conversation (the preset's system prompt,
then the question with its context and images), one turn on the session's tool loop with no tools offered,
and what came of it: the aggregator's synthesis, and each reference's answer, model, time and tokens.

The turn is blocking, so it runs on one of the engine's kept threads; `Progress` hears of each reference as
it answers (from the turn's threads), and the `CancelToken` ends the turn when the client cancels its request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import Config, Preset
from ..engine import (
    AggregatorStarted,
    CancelToken,
    ImagesWithheld,
    ReferenceFinished,
    TurnEnv,
    TurnEvent,
    TurnPlan,
)
from ..engine.privacy import model_filter
from ..images import ImageError, checked
from ..llm.messages import Message
from ..session import ToolLoop, TurnResult
from ..session.attachments import AttachmentError
from ..session.image_attachments import ImageAttachment, with_images

# Told as the references answer: (answered, of how many, a line saying who).
Progress = Callable[[int, int, str], None]


class ConsultError(ValueError):
    """A consultation that cannot be asked (a bad image, an unknown preset), phrased for the client."""


@dataclass(frozen=True)
class Image:
    data: bytes
    name: str


def question_message(question: str, context: str, images: Sequence[Image]) -> Message:
    """The user message: the question, its context below it, and its images as OpenAI image parts (named in
    the text, as the chat names an attached image)."""
    text = f"{question}\n\n<context>\n{context}\n</context>" if context.strip() else question
    try:
        attached = [ImageAttachment(image.name, image.data, checked(image.data, image.name)) for image in images]
        return {"role": "user", "content": with_images(text, attached)}
    except (ImageError, AttachmentError) as exc:
        raise ConsultError(str(exc)) from None


def consult(
    config: Config, preset: Preset, message: Message, *, cancel: CancelToken, progress: Progress | None = None
) -> TurnResult:
    """The panel's turn on `message`, run here (the caller's thread); never raises."""
    total = sum(slot.samples for slot in preset.references) * max(1, preset.layers)
    answered = 0

    def observe(event: TurnEvent) -> None:
        nonlocal answered
        if progress is None:
            return
        if isinstance(event, ReferenceFinished):
            answered += 1
            progress(answered, total, f"{event.label} {'answered' if event.status == 'ok' else event.status}")
        elif isinstance(event, AggregatorStarted):
            progress(answered, total, f"{event.label} writes the synthesis")
        elif isinstance(event, ImagesWithheld):
            progress(answered, total, f"{event.label} cannot see: the images went to it as notes")

    env = TurnEnv(config, cancel=cancel, observer=observe, message_filter=model_filter(config))
    conversation: list[Message] = []
    system = config.system_prompt_for(preset)
    if system:
        conversation.append({"role": "system", "content": system})
    conversation.append(message)
    return ToolLoop(env, TurnPlan(preset)).run(conversation)


def report(preset: Preset, result: TurnResult) -> dict[str, Any]:
    """The structured content: the synthesis, then each reference's answer, model, time and tokens."""
    references = []
    for finished in result.references:
        record = finished.record
        references.append(
            {
                "model": record.label,
                "status": record.status,
                "seconds": record.seconds,
                "tokens": record.usage.as_dict() if record.usage is not None else None,
                "answer": finished.text,
                "error": record.error,
            }
        )
    usage = result.ledger.usage()
    return {
        "preset": preset.name,
        "aggregator": preset.aggregator.label,
        "synthesis": result.text,
        "references": references,
        "seconds": result.seconds,
        "usage": usage.as_dict(),
        "cost": result.ledger.cost(),
    }
