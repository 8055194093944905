"""Images in stored messages: each kept once, by the SHA-256 of its bytes (the `images` table), and a message's
content parts stored with each image as a reference to it ({"type": "image_ref", "sha256", "media_type"});
read back, the parts are as they were sent. A prompt sent again with the same screenshot, or the same image
in many sessions, costs its bytes once.
"""

from __future__ import annotations

import base64
import hashlib
import sqlite3
from collections.abc import Callable
from typing import Any

from ..images import read_part

ImageLookup = Callable[[str], tuple[str, bytes] | None]


def kept_parts(db: sqlite3.Connection, content: list[Any], now: float) -> list[dict[str, object]]:
    """The parts to store for `content`, each image's bytes kept once in `images`."""
    parts: list[dict[str, object]] = []
    for part in content:
        image = read_part(part)
        if image is None or image.data is None:  # text, or an image by URL (kept as the URL)
            parts.append(dict(part) if isinstance(part, dict) else {"type": "text", "text": str(part)})
            continue
        media = image.url.split(";", 1)[0].removeprefix("data:")
        digest = hashlib.sha256(image.data).hexdigest()
        db.execute(
            "INSERT OR IGNORE INTO images (sha256, media_type, bytes, created) VALUES (?, ?, ?, ?)",
            (digest, media, image.data, now),
        )
        parts.append({"type": "image_ref", "sha256": digest, "media_type": media})
    return parts


def parts_text(content: object) -> str:
    """The text of a message's parts (what search finds and the log shows)."""
    if not isinstance(content, list):
        return str(content or "")
    return "\n\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")


def sent_parts(parts: list[dict[str, object]], lookup: ImageLookup) -> list[dict[str, object]]:
    """Stored parts as they were sent: each image reference as its image part again (a data: URL); an image
    no longer kept becomes a note saying so."""
    out: list[dict[str, object]] = []
    for part in parts:
        if part.get("type") != "image_ref":
            out.append(part)
            continue
        found = lookup(str(part.get("sha256", "")))
        if found is None:
            out.append({"type": "text", "text": "[an image that is no longer kept]"})
            continue
        media, data = found
        url = f"data:{media};base64,{base64.b64encode(data).decode()}"
        out.append({"type": "image_url", "image_url": {"url": url}})
    return out
