"""Images attached to a prompt (`ask -a photo.png`, `@photo.png` in the chat): sent to the panel as OpenAI
image parts, and named in the prompt's text by a marker, so the stored conversation, the chat's chip and the
export say which image went with it (the image itself is kept once, by its content's hash, in the store).

An image comes from the working folder, as a text attachment does: a path that resolves outside it (an
absolute path, `..`, a symlink) is refused unless it is allowed by name (`ask --allow-path`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from ..images import MAX_IMAGES, SUFFIXES, ImageError, ImageFacts, checked, image_part
from ..llm.messages import Content, ContentPart
from .attachments import AttachmentError, read_confined

_MARKER = '<attached-image path="{path}" format="{format}" width="{width}" height="{height}" bytes="{size}"/>'
_MARKERS = re.compile(
    r'\n\n<attached-image path="(?P<path>[^"\n]*)" format="(?P<format>\w+)" width="(?P<width>\d+)" '
    r'height="(?P<height>\d+)" bytes="(?P<size>\d+)"/>'
)


@dataclass(frozen=True)
class ImageAttachment:
    path: str  # as the user named it
    data: bytes
    facts: ImageFacts


@dataclass(frozen=True)
class ImageChip:
    """An attached image as the chat shows it, read back from a message's text."""

    path: str
    format: str
    width: int
    height: int
    size: int

    def describe(self) -> str:
        """ "photo.png · PNG 1280×720 · 48 KB"."""
        facts = ImageFacts(self.format, self.width, self.height, self.size)
        return f"{self.path} · {facts.describe().replace(', ', ' ', 1).replace(', ', ' · ')}"


def is_image_path(path: str | Path) -> bool:
    return Path(path).suffix.lower() in SUFFIXES


def read_image(path: str | Path, *, base: Path, allowed: Sequence[Path] = (), hint: str = "") -> ImageAttachment:
    """The image at `path`, read as `read_confined` reads a file, and checked to be an image it can send."""
    named, data = read_confined(path, base=base, allowed=allowed, hint=hint)
    try:
        return ImageAttachment(named, data, checked(data, named))
    except ImageError as exc:
        raise AttachmentError(str(exc)) from None


def with_images(text: str, images: Sequence[ImageAttachment]) -> Content:
    """The message content: `text` with a marker naming each image, then the images as parts; `text` alone
    when there are none."""
    if not images:
        return text
    if len(images) > MAX_IMAGES:
        raise AttachmentError(f"{len(images)} images attached: at most {MAX_IMAGES} go with one prompt")
    markers = "".join(
        "\n\n"
        + _MARKER.format(
            path=image.path.replace('"', "'").replace("\n", " "),
            format=image.facts.format,
            width=image.facts.width,
            height=image.facts.height,
            size=image.facts.size,
        )
        for image in images
    )
    parts: list[ContentPart] = [{"type": "text", "text": text + markers}]
    parts += [cast(ContentPart, image_part(image.data, Path(image.path).name)) for image in images]
    return parts


def split_images(text: str) -> tuple[str, list[ImageChip]]:
    """A prompt's text as (what the user typed, the images attached to it)."""
    chips = [
        ImageChip(m["path"], m["format"], int(m["width"]), int(m["height"]), int(m["size"]))
        for m in _MARKERS.finditer(text)
    ]
    return (_MARKERS.sub("", text), chips) if chips else (text, [])


def prompt_text(content: Content) -> str:
    """The text of a prompt's content (its images are named in it by their markers)."""
    if isinstance(content, str):
        return content
    return "\n\n".join(part["text"] for part in content if part["type"] == "text")
