"""Which calls see a turn's images: each slot that can gets them as they are, one that cannot gets a text note
in each image's place ("[image photo.png, 1280×720, not shown to this model]"), and its card says so.

A slot cannot see when its config says `vision: false`, or once its provider has refused a request for its
images: the refusal is read from the error (a 4xx that names images, vision or the content's type), the call
is sent again at once with the notes, and the model is remembered as one that cannot see for as long as the
process runs, so later calls send it notes from the start.
"""

from __future__ import annotations

import dataclasses
import re
import threading

from ..config import Slot
from ..llm import ChatRequest, LLMCallError
from ..llm.images import count_images, without_images

# What providers say when a model is sent an image it cannot read: OpenAI's "does not support image input",
# vLLM's and llama.cpp's "image input is not supported" / "multimodal", Groq's "content must be a string",
# Ollama's "does not support images".
_REFUSAL = re.compile(
    r"image|vision|multimodal|multi-modal|content must be a string|expected a string|unsupported content", re.I
)


class BlindModels:
    """The models whose providers refused an image, for the life of the process."""

    def __init__(self) -> None:
        self._labels: set[str] = set()
        self._lock = threading.Lock()

    def learn(self, label: str) -> None:
        with self._lock:
            self._labels.add(label)

    def __contains__(self, label: object) -> bool:
        with self._lock:
            return label in self._labels

    def forget(self) -> None:
        with self._lock:
            self._labels.clear()


BLIND = BlindModels()


def can_see(slot: Slot) -> bool:
    if slot.vision is not None:
        return slot.vision
    return slot.label not in BLIND


def refused_images(exc: LLMCallError, request: ChatRequest) -> bool:
    """Whether a failed call's provider refused it for its images (and it had some)."""
    if exc.status is None or not 400 <= exc.status < 500 or exc.status in (401, 403, 408, 429):
        return False
    return bool(_REFUSAL.search(exc.reason)) and count_images(request.messages) > 0


def fitted(slot: Slot, request: ChatRequest) -> tuple[ChatRequest, int]:
    """The request as this slot gets it, and how many images it holds notes for: with notes in place of its
    images when it cannot see, else unchanged (and 0)."""
    if can_see(slot):
        return request, 0
    return _withheld(request)


def learned(slot: Slot, request: ChatRequest) -> tuple[ChatRequest, int]:
    """After its provider refused the images: the slot is remembered as one that cannot see, and the request
    to send again has notes in their place."""
    BLIND.learn(slot.label)
    return _withheld(request)


def _withheld(request: ChatRequest) -> tuple[ChatRequest, int]:
    images = count_images(request.messages)
    if not images:
        return request, 0
    return dataclasses.replace(request, messages=without_images(request.messages)), images
