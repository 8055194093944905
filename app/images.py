"""Images in a conversation: OpenAI image parts (`{"type": "image_url", "image_url": {"url": "data:..."}}`),
what their bytes say (format, width, height, read from the header alone), the limits on them, and the note a
model that cannot see gets in an image's place.

An image travels as a data: URL inside the user message's content parts, as every vision-capable
OpenAI-compatible server takes it, so the same message goes to each reference and the aggregator; a slot
that cannot see (`vision: false`, or a provider that refused an image) gets the message with each image
replaced by a text note that names it.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from dataclasses import dataclass
from typing import Any

MAX_IMAGE_BYTES = 5 * 1024 * 1024  # per image: what Anthropic and most vision servers take
MAX_IMAGES = 20  # per request (a prompt, or an API conversation): every reference gets a copy of each
MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}
SUFFIXES = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".gif": "gif", ".webp": "webp"}
# Providers read a data: URL of the plain form data:<type>;base64,<data> (some parse it strictly), so an image
# part carries no name; the prompt's text names its images (session/image_attachments.py), in order.
_DATA_URL = re.compile(r"^data:(?P<media>image/[\w.+-]+)(?P<params>(?:;[\w-]+=[^;,]*)*);base64,(?P<data>.*)$", re.S)


class ImageError(ValueError):
    """An image that cannot be sent, phrased for the person who gave it."""


@dataclass(frozen=True)
class ImageFacts:
    format: str  # png, jpeg, gif, webp
    width: int
    height: int
    size: int  # bytes

    @property
    def media_type(self) -> str:
        return MEDIA_TYPES[self.format]

    def describe(self) -> str:
        """ "PNG, 1280×720, 48 KB"."""
        return f"{self.format.upper()}, {self.width}×{self.height}, {_kilobytes(self.size)}"


def _kilobytes(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MB" if size >= 1024 * 1024 else f"{max(1, round(size / 1024))} KB"


def facts(data: bytes) -> ImageFacts | None:
    """The format and size an image's header gives, or None when it is not a PNG, JPEG, GIF or WebP."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return ImageFacts("png", width, height, len(data))
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return ImageFacts("gif", width, height, len(data))
    if data.startswith(b"RIFF") and data[8:12] == b"WEBP" and len(data) >= 30:
        return _webp(data)
    if data.startswith(b"\xff\xd8"):
        return _jpeg(data)
    return None


def _webp(data: bytes) -> ImageFacts | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
    elif chunk == b"VP8 ":
        width, height = (v & 0x3FFF for v in struct.unpack("<HH", data[26:30]))
    elif chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        width, height = (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    else:
        return None
    return ImageFacts("webp", width, height, len(data))


def _jpeg(data: bytes) -> ImageFacts | None:
    at = 2
    while at + 9 < len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            at += 2
            continue
        length = int.from_bytes(data[at + 2 : at + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame carries the size
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return ImageFacts("jpeg", width, height, len(data))
        at += 2 + length
    return None


def checked(data: bytes, name: str) -> ImageFacts:
    """The image's facts, or ImageError saying why it cannot be sent."""
    found = facts(data)
    if found is None:
        raise ImageError(f"cannot send {name}: not a PNG, JPEG, GIF or WebP image")
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageError(
            f"cannot send {name}: it is {_kilobytes(len(data))}, over the {MAX_IMAGE_BYTES // 1024 // 1024} MB an "
            "image may be; make it smaller (a screenshot of the part that matters, or a JPEG)"
        )
    if not found.width or not found.height:
        raise ImageError(f"cannot send {name}: its header gives no size")
    return found


def image_part(data: bytes, name: str) -> dict[str, Any]:
    """An OpenAI image part carrying the image as a data: URL (`name` says which one in an error)."""
    found = checked(data, name)
    url = f"data:{found.media_type};base64,{base64.b64encode(data).decode()}"
    return {"type": "image_url", "image_url": {"url": url}}


@dataclass(frozen=True)
class ImageInPart:
    name: str
    data: bytes | None  # None: a URL moa-chat does not fetch
    url: str


def read_part(part: object) -> ImageInPart | None:
    """An image part's name and bytes (None for a part that is no image)."""
    if not isinstance(part, dict) or part.get("type") != "image_url":
        return None
    inner = part.get("image_url")
    url = str(inner.get("url", "")) if isinstance(inner, dict) else ""
    match = _DATA_URL.match(url)
    if match is None:
        return ImageInPart(url.rsplit("/", 1)[-1][:80] or "image", None, url)
    try:
        data = base64.b64decode(match.group("data"), validate=False)
    except (binascii.Error, ValueError):
        data = b""
    return ImageInPart("image", data, url)


def note(part: object, name: str = "") -> str:
    """The note a model that cannot see gets in an image's place ("[image photo.png, 1280×720, not shown to
    this model]"); `name`: what the prompt calls it."""
    image = read_part(part)
    found = facts(image.data) if image is not None and image.data is not None else None
    size = f", {found.width}×{found.height}" if found is not None else ""
    return f"[image{' ' + name if name else ''}{size}, not shown to this model]"


# How a prompt's text names its attached images, in order (session/image_attachments.py writes it).
IMAGE_NAMES = re.compile(r'<attached-image path="([^"\n]*)"')
IMAGE_MARKER = re.compile(r'<attached-image path="(?P<path>[^"\n]*)"[^>\n]*/>')
