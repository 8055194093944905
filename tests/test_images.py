"""Images end to end: what an image's header says, `ask -a photo.png` and `@photo.png` in the chat, the store
keeping each image once, export embedding it, a slot with `vision: false` told of it in a note, and the
limits with their errors."""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest
from conftest import WIRE_CONFIG, write_config
from image_helpers import png
from moa_chat.config import load_config
from moa_chat.images import MAX_IMAGE_BYTES, ImageError, checked, facts
from moa_chat.session.image_attachments import ImageAttachment, split_images, with_images
from moa_chat.store import SessionStore
from moa_chat.tui.widgets.chat_log import UserPrompt
from tui_helpers import make_app, run_turn

BLIND_AGGREGATOR = """
    blind-agg:
      description: an aggregator that cannot see
      reference_models:
        - provider: wire
          model: ref-a
      aggregator:
        provider: wire
        model: agg
        vision: false
"""


def shape(data: bytes) -> tuple[str, int, int] | None:
    found = facts(data)
    return (found.format, found.width, found.height) if found is not None else None


def test_each_format_is_read_from_its_header():
    gif = b"GIF89a" + struct.pack("<HH", 640, 480) + b"\0" * 20
    jpeg = (
        b"\xff\xd8"
        + b"\xff\xe0"
        + struct.pack(">H", 16)
        + b"\0" * 14
        + b"\xff\xc0"
        + struct.pack(">HBHH", 17, 8, 600, 800)
        + b"\0" * 10
    )
    webp = b"RIFF" + b"\0" * 4 + b"WEBPVP8X" + b"\0" * 8 + (1919).to_bytes(3, "little") + (1079).to_bytes(3, "little")
    assert shape(png(1280, 720)) == ("png", 1280, 720)
    assert shape(gif) == ("gif", 640, 480)
    assert shape(jpeg) == ("jpeg", 800, 600)
    assert shape(webp) == ("webp", 1920, 1080)
    assert facts(b"%PDF-1.7") is None
    with pytest.raises(ImageError, match="not a PNG, JPEG, GIF or WebP image"):
        checked(b"hello", "notes.png")
    with pytest.raises(ImageError, match="over the 5 MB an image may be"):
        checked(png(8, 8) + b"\0" * MAX_IMAGE_BYTES, "huge.png")


def test_an_attached_images_marker_reads_back_as_a_chip():
    picture = png(1280, 720)
    content = with_images("what is this?", [ImageAttachment("shots/photo.png", picture, checked(picture, "x"))])
    assert isinstance(content, list) and content[1]["image_url"]["url"].startswith("data:image/png;base64,")
    typed, chips = split_images(content[0]["text"])
    assert typed == "what is this?"
    assert [chip.describe() for chip in chips] == ["shots/photo.png · PNG 1280×720 · 4 KB"]


def moa(home, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "moa_chat", *args], cwd=home, capture_output=True, text=True, timeout=120
    )


def test_ask_attach_sends_the_image_keeps_it_once_and_export_embeds_it(home):
    (home / "photo.png").write_bytes(png(1280, 720))
    first = moa(home, "--preset", "demo", "ask", "What is in this screenshot?", "-a", "photo.png")
    assert first.returncode == 0, first.stderr
    assert "moa-chat: attached photo.png (PNG, 1280×720, 4 KB)" in first.stderr
    assert "`photo.png` (PNG, 1280×720, 4 KB)" in first.stdout  # the demo read the image itself
    again = moa(home, "--preset", "demo", "ask", "-c", "And now?", "-a", "photo.png")
    assert again.returncode == 0, again.stderr
    store = SessionStore()
    (session,) = store.sessions()
    images = store._query("SELECT sha256, media_type, length(bytes) AS size FROM images")
    assert [(row["media_type"], row["size"]) for row in images] == [("image/png", len(png(1280, 720)))]
    prompts = [m for m in store.path(session.id) if m.role == "user"]
    assert all(m.parts and m.parts[1]["type"] == "image_url" for m in prompts)  # read back as it was sent
    markdown = moa(home, "export", session.id)
    assert markdown.stdout.count("![photo.png](data:image/png;base64,") == 2
    exported = json.loads(moa(home, "export", session.id, "--format", "json").stdout)
    first_prompt = next(m for m in exported["messages"] if m["role"] == "user")
    assert first_prompt["content"][1]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")


@pytest.mark.parametrize(
    ("name", "data", "why"),
    [
        ("notes.png", b"just text\n", "not a PNG, JPEG, GIF or WebP image"),
        ("huge.png", png(8, 8) + b"\0" * MAX_IMAGE_BYTES, "over the 5 MB an image may be"),
        ("../outside.png", png(8, 8), "is outside the working folder"),
    ],
    ids=["not-an-image", "too-large", "outside"],
)
def test_an_image_that_cannot_be_sent_says_why_and_exits_2(home, name, data, why):
    (home / name).write_bytes(data)
    done = moa(home, "--preset", "demo", "ask", "what is it?", "-a", name)
    assert done.returncode == 2 and why in done.stderr, done.stderr


def test_a_slot_that_cannot_see_gets_a_note_and_the_others_the_image(home, llm_server, tmp_path, monkeypatch, capsys):
    from moa_chat.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "chart.png").write_bytes(png(300, 200))
    write_config(home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra=BLIND_AGGREGATOR))
    assert main(["--preset", "blind-agg", "ask", "--no-save", "-a", "chart.png", "read the chart"]) == 0
    seen = llm_server.requests_for("ref-a")[0].body["messages"][-1]["content"]
    assert any(part["type"] == "image_url" for part in seen)
    told = next(m["content"] for m in llm_server.requests_for("agg")[0].body["messages"] if m["role"] == "user")
    assert {"type": "text", "text": "[image chart.png, 300×200, not shown to this model]"} in told
    assert "◌ wire:agg cannot see (vision: false): 1 image sent as a note" in capsys.readouterr().err


async def test_at_image_in_the_chat_sends_it_and_shows_a_chip(home, llm_server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "photo.png").write_bytes(png(1280, 720))
    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra=BLIND_AGGREGATOR)
    app = make_app(load_config(write_config(home, text)), "blind-agg")
    async with app.run_test(size=(100, 30)) as pilot:
        await run_turn(pilot, "what is in @photo.png?")
        message = app.query_one(UserPrompt)
        assert "▣ photo.png · PNG 1280×720 · 4 KB" in message.render().plain
        assert "attached-image" not in message.render().plain
        card = app.screen.sidebar.aggregator_card
        assert card.withheld == 1 and "1 image not shown (cannot see)" in card.render().plain
    parts = llm_server.requests_for("ref-a")[0].body["messages"][-1]["content"]
    assert any(part["type"] == "image_url" for part in parts)
