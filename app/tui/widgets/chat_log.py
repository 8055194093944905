"""The chat log: the conversation as it happens, following the newest text unless the user scrolled up."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widgets import Static

from ...config import Preset


class ChatLog(VerticalScroll):
    def on_mount(self) -> None:
        # Anchored: new content keeps the view at the bottom until the user scrolls up, and following
        # resumes when they scroll back down (Textual's anchor semantics).
        self.anchor()


class UserMessage(Static):
    def __init__(self, text: str) -> None:
        super().__init__(Content(text), classes="user-message")
        self.text = text


class Notice(Static):
    """A note from moa-chat itself (not a model): start-up hints, warnings, the iteration cap."""

    def __init__(self, text: str, level: str = "info") -> None:
        super().__init__(Content(text), classes=f"notice -{level}")


class Welcome(Static):
    def __init__(self, preset_name: str, references: int, aggregator: str, keys: dict[str, str] | None = None) -> None:
        keys = keys or {}
        text = Content.assemble(
            ("moa-chat", "bold $accent"),
            " — ask anything; a panel of ",
            (str(references), "bold"),
            " reference models advises and ",
            (aggregator, "bold"),
            " answers.\n",
            ("Enter", "bold"),
            " sends · ",
            (keys.get("newline", "Ctrl+J").split(" / ")[0], "bold"),
            " new line · ",
            (keys.get("preset_picker", "F2"), "bold"),
            " presets · ",
            (keys.get("help", "F1"), "bold"),
            " help · preset ",
            (preset_name, "bold"),
        )
        super().__init__(text, classes="welcome")

    @classmethod
    def for_preset(cls, preset: Preset, keys: dict[str, str] | None = None) -> Welcome:
        return cls(preset.name, len(preset.references), preset.aggregator.label, keys)


class EarlierMessages(Static, can_focus=True):
    """Stands above the oldest exchange shown while earlier ones are still in the store."""

    BINDINGS = [("enter", "show", "Show earlier")]

    class Requested(Message):
        pass

    def show_count(self, count: int) -> None:
        noun = "exchange" if count == 1 else "exchanges"
        self.update(
            Content.assemble(
                (f"↑ {count:,} earlier {noun}", "bold"), (" — scroll to the top or press Enter to show them", "italic")
            )
        )

    def action_show(self) -> None:
        self.post_message(self.Requested())

    def on_click(self) -> None:
        self.post_message(self.Requested())
