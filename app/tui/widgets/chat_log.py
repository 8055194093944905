"""The chat log: the conversation as it happens, following the newest text unless the user scrolled up."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from ...config import Preset
from ...session import Exchange
from ...session.attachments import describe, split_attachments
from ...terminal import inert
from .reply import AssistantReply

FIRST_BATCH = 6  # stored exchanges mounted when a session opens: more than a tall screen shows
HISTORY_BATCH = 20  # and then at a time, as the user scrolls up

# A prompt up to WHOLE_* shows whole; a longer one shows its first SHOWN_* and how much more there is (the
# gap, so a note never hides just a line or two). A pasted megabyte in full would bury the reply under
# thousands of lines, and wrapping it for the log froze the whole UI for seconds.
WHOLE_LINES, WHOLE_CHARACTERS = 60, 6_000
SHOWN_LINES, SHOWN_CHARACTERS = 40, 4_000


class ChatLog(VerticalScroll):
    """The conversation, live and stored. A stored one opens with its newest exchanges; earlier ones are
    mounted a page at a time when the user scrolls to the top, so a long session opens at once."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._history: list[Exchange] = []
        self._unshown = 0  # how many of the oldest stored exchanges are not mounted yet
        self._paging = False

    def on_mount(self) -> None:
        # Anchored: new content keeps the view at the bottom until the user scrolls up, and following
        # resumes when they scroll back down (Textual's anchor semantics).
        self.anchor()

    async def show_history(self, history: list[Exchange]) -> AssistantReply | None:
        """Replace what the log shows with a stored conversation; returns its last reply."""
        await self.remove_children()
        self._history, self._unshown = history, max(0, len(history) - FIRST_BATCH)
        widgets: list[Widget] = []
        if self._unshown:
            marker = EarlierMessages(classes="earlier-messages")
            marker.show_count(self._unshown)
            widgets.append(marker)
        for exchange in history[self._unshown :]:
            widgets.extend(exchange_widgets(exchange))
        await self.mount_all(widgets)
        self.scroll_end(animate=False)
        replies = [w for w in widgets if isinstance(w, AssistantReply)]
        return replies[-1] if replies else None

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if new_value <= 0 and self._unshown and not self._paging:
            self.call_later(self.show_earlier)

    async def on_earlier_messages_requested(self, event: EarlierMessages.Requested) -> None:
        event.stop()
        await self.show_earlier()

    async def show_earlier(self) -> None:
        if not self._unshown or self._paging:
            return
        # Mounting above the view moves it; until the view is back on what the user was reading, scroll
        # events are ours, not the user asking for more.
        self._paging = True
        marker = self.query_one(EarlierMessages)
        children = list(self.children)
        position = children.index(marker) + 1
        first_shown = children[position] if position < len(children) else None
        start = max(0, self._unshown - HISTORY_BATCH)
        page = [w for exchange in self._history[start : self._unshown] for w in exchange_widgets(exchange)]
        await self.mount_all(page, before=first_shown)
        self._unshown = start
        if start:
            marker.show_count(start)
        else:
            await marker.remove()
        if first_shown is not None:
            self.scroll_to_widget(first_shown, animate=False, top=True)

        def settled() -> None:
            self._paging = False

        self.call_after_refresh(settled)

    def forget_history(self) -> None:
        self._history, self._unshown = [], 0


def exchange_widgets(exchange: Exchange) -> list[Widget]:
    widgets: list[Widget] = []
    if exchange.prompt is not None:
        widgets.append(UserMessage(exchange.prompt))
    if exchange.reply or exchange.turn is not None:
        widgets.append(AssistantReply.saved(exchange.reply, exchange.turn))
    return widgets


class UserMessage(Static):
    def __init__(self, text: str) -> None:
        typed, chips = split_attachments(text)
        shown = shown_prompt(typed)
        if chips:
            # Attached files as chips: their text went to the models, the log shows what they were.
            shown = Content.assemble(
                shown, "\n", Content("  ").join(Content.styled(f" 📎 {inert(describe(c))} ", "reverse") for c in chips)
            )
        super().__init__(shown, classes="user-message")
        self.text = text  # all of it, as sent
        self.attachments = chips


def shown_prompt(text: str) -> Content:
    """A prompt as the log shows it: whole, or its first SHOWN_LINES lines (SHOWN_CHARACTERS at most) and a
    note of the rest."""
    if len(text) <= WHOLE_CHARACTERS and text.count("\n") + (not text.endswith("\n")) <= WHOLE_LINES:
        return Content(inert(text))
    cut = -1
    for _ in range(SHOWN_LINES):
        cut = text.find("\n", cut + 1)
        if cut < 0:
            break
    cut = min(SHOWN_CHARACTERS, len(text) if cut < 0 else cut)
    rest = text[cut:]
    hidden_lines = rest.count("\n") - rest.endswith("\n")  # lines that start after the cut (none is shown)
    more = f"{hidden_lines:,} more lines" if hidden_lines else f"{len(rest):,} more characters"
    note = f"… {more} not shown here · {len(text):,} characters in all"
    return Content.assemble(inert(text[:cut]), "\n", (note, "italic $text-muted"))


class Notice(Static):
    """A note from moa-chat itself (not a model): start-up hints, warnings, the iteration cap."""

    def __init__(self, text: str, level: str = "info") -> None:
        super().__init__(Content(inert(text)), classes=f"notice -{level}")


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
