"""The chat log: the conversation as it happens, following the newest text unless the user scrolled up.

It keeps only the newest exchanges mounted. Each widget mounted costs on every layout pass, and a
conversation of 200 turns mounted whole took five times as long to send and show a short turn as one of 10.
A stored session opens with its newest exchanges and mounts earlier ones a page at a time as the user scrolls
up (EarlierMessages); a live one, whenever a reply ends with the view at the bottom, folds away the exchanges
more than a few screens above it into the same pages, as recipes that build them again when scrolled to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from textual.containers import VerticalScroll
from textual.content import Content
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from ...config import Preset
from ...engine.events import CompactionEnded
from ...session import Exchange
from ...session.attachments import describe, split_attachments
from ...session.reply_parts import stored_reply
from ...text.inert import inert
from ..drawing.rows import repeated_line
from .compaction_marker import CompactionMarker
from .reply import AssistantReply

FIRST_BATCH = 6  # stored exchanges mounted when a session opens: more than a tall screen shows
HISTORY_BATCH = 20  # and then at a time, as the user scrolls up
KEEP_SCREENS = 3  # a live log keeps the exchanges that fill this many screens above its bottom mounted
KEEP_EXCHANGES = 4  # and at least this many (the last is what regenerate and edit work on)

# A prompt up to WHOLE_* shows whole; a longer one shows its first SHOWN_* and how much more there is (the
# gap, so a note never hides just a line or two). A pasted megabyte in full would bury the reply under
# thousands of lines, and wrapping it for the log froze the whole UI for seconds.
WHOLE_LINES, WHOLE_CHARACTERS = 60, 6_000
SHOWN_LINES, SHOWN_CHARACTERS = 40, 4_000


@dataclass(frozen=True)
class Earlier:
    """An exchange (or what came before the first) not mounted: how to build its widgets when scrolled to."""

    build: Callable[[], list[Widget]]
    exchange: bool = True  # False for notices before the first prompt: not counted as an exchange


class ChatLog(VerticalScroll):
    """The conversation, live and stored: only the newest exchanges mounted, earlier ones a page at a time when
    the user scrolls to the top (see the module's docstring)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._earlier: list[Earlier] = []  # oldest first, all above the first exchange mounted
        self._paging = False

    def on_mount(self) -> None:
        # Anchored: new content keeps the view at the bottom until the user scrolls up, and following
        # resumes when they scroll back down (Textual's anchor semantics).
        self.anchor()

    def render_lines(self, crop: Region) -> list[Strip]:
        return repeated_line(self, crop) or super().render_lines(crop)

    def in_view(self, chain: list[Widget], focused: Widget | None) -> list[Widget]:
        """`chain` (the screen's Tab stops) less the log's own that are scrolled out of view: focused, one of
        those would scroll the log to it. The focused widget stays, wherever it is."""
        view = self.scrollable_content_region
        return [w for w in chain if w is focused or self not in w.ancestors or view.overlaps(w.region)]

    def focus_newest_stop(self) -> bool:
        """Focus the log's last tab stop in view (a tool call's header, the earlier-messages line); False if
        none."""
        stops = [widget for widget in self.screen.focus_chain if self in widget.ancestors]
        if stops:
            stops[-1].focus()
        return bool(stops)

    async def show_history(self, history: list[Exchange]) -> AssistantReply | None:
        """Replace what the log shows with a stored conversation; returns its last reply."""
        await self.remove_children()
        unshown = max(0, len(history) - FIRST_BATCH)
        self._earlier = [Earlier(partial(exchange_widgets, exchange)) for exchange in history[:unshown]]
        widgets: list[Widget] = []
        if self._earlier:
            marker = EarlierMessages(classes="earlier-messages")
            marker.show_count(self._earlier_count())
            widgets.append(marker)
        for exchange in history[unshown:]:
            widgets.extend(exchange_widgets(exchange))
        await self.mount_all(widgets)
        self.scroll_end(animate=False)
        replies = [w for w in widgets if isinstance(w, AssistantReply)]
        return replies[-1] if replies else None

    def _earlier_count(self) -> int:
        return sum(earlier.exchange for earlier in self._earlier)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if new_value <= 0 and self._earlier and not self._paging:
            self.call_later(self.show_earlier)

    async def on_earlier_messages_requested(self, event: EarlierMessages.Requested) -> None:
        event.stop()
        await self.show_earlier()

    async def show_earlier(self) -> None:
        if not self._earlier or self._paging:
            return
        # Mounting above the view moves it; until the view is back on what the user was reading, scroll
        # events are ours, not the user asking for more.
        self._paging = True
        marker = self.query_one(EarlierMessages)
        children = list(self.children)
        position = children.index(marker) + 1
        first_shown = children[position] if position < len(children) else None
        start = max(0, len(self._earlier) - HISTORY_BATCH)
        page = [widget for earlier in self._earlier[start:] for widget in earlier.build()]
        await self.mount_all(page, before=first_shown)
        del self._earlier[start:]
        if self._earlier:
            marker.show_count(self._earlier_count())
        else:
            await marker.remove()
        if first_shown is not None:
            self.scroll_to_widget(first_shown, animate=False, top=True)

        def settled() -> None:
            self._paging = False

        self.call_after_refresh(settled)

    def forget_history(self) -> None:
        self._earlier = []

    def page(self, direction: int) -> None:
        """A page up (direction < 0) or down. Scrolling up releases the anchor, so a streaming reply stops
        pulling the view down. Textual releases it on any scroll, even a page down at the very bottom, which
        moves nothing and would leave the next reply growing out of view: a page that reaches the end anchors
        it again instead."""
        if direction < 0:
            self.scroll_page_up(animate=False)
        elif self.scroll_y + self.scrollable_content_region.height >= self.max_scroll_y:
            self.scroll_end(animate=False)  # and follows new text again (the anchor holds)
        else:
            self.scroll_page_down(animate=False)

    def last_prompt(self) -> UserMessage | None:
        """The newest prompt on screen, if any."""
        prompts = self.query(UserMessage)
        return prompts.last() if prompts else None

    async def drop_after(self, widget: Widget, *, inclusive: bool = False) -> None:
        """Take the widgets after `widget` (and it, if inclusive) off the screen; the store keeps them."""
        children = list(self.children)
        position = children.index(widget) + (0 if inclusive else 1)
        await self.remove_children(children[position:])

    def on_assistant_reply_ended(self, event: AssistantReply.Ended) -> None:
        # After the layout that placed the reply's footer: the heights to keep are known then.
        self.call_after_refresh(self.fold_away)

    async def fold_away(self) -> None:
        """Unmount the exchanges far above the view, as recipes the EarlierMessages marker builds again.

        Only while the view follows the bottom (a reader scrolled up keeps what they are reading, and what is
        between), only whole exchanges, and only those made of widgets that can be built again."""
        if self._paging or self.scroll_y < self.max_scroll_y or not self.is_mounted:
            return
        groups: list[list[Widget]] = []
        for child in self.children:
            if isinstance(child, EarlierMessages):
                continue
            if isinstance(child, UserMessage) or not groups:
                groups.append([])
            groups[-1].append(child)
        keep_height = KEEP_SCREENS * self.scrollable_content_region.height
        kept, height = 0, 0
        while kept < len(groups) and (kept < KEEP_EXCHANGES or height < keep_height):
            kept += 1
            height += sum(widget.outer_size.height + widget.styles.margin.top for widget in groups[-kept])
        folded: list[Earlier] = []
        gone: list[Widget] = []
        for group in groups[: len(groups) - kept]:
            builds = [_recipe(widget) for widget in group]
            if any(build is None for build in builds):
                break  # something that cannot be built again stays, and so does everything after it
            folded.append(Earlier(partial(_build_all, builds), exchange=isinstance(group[0], UserMessage)))
            gone.extend(group)
        if not gone:
            return
        self._earlier.extend(folded)
        with self.app.batch_update():
            await self.remove_children(gone)
            markers = self.query_children(EarlierMessages)
            if markers:
                markers.first().show_count(self._earlier_count())
            else:
                marker = EarlierMessages(classes="earlier-messages")
                marker.show_count(self._earlier_count())
                await self.mount(marker, before=0)


def _recipe(widget: Widget) -> Callable[[], Widget] | None:
    """How to build `widget` again, or None if it cannot be."""
    if isinstance(widget, UserMessage):
        return partial(UserMessage, widget.text)
    if isinstance(widget, NoticeLine):
        return partial(NoticeLine, widget.message, widget.level)
    if isinstance(widget, AssistantReply):
        return widget.recipe()
    return None


def _build_all(builds: list[Callable[[], Widget] | None]) -> list[Widget]:
    return [build() for build in builds if build is not None]


def exchange_widgets(exchange: Exchange) -> list[Widget]:
    widgets: list[Widget] = []
    if exchange.prompt is not None:
        widgets.append(UserMessage(exchange.prompt))
    if exchange.reply or exchange.turn is not None:
        widgets.append(AssistantReply.drawn(stored_reply(exchange.reply, exchange.turn)))
    if (kept := exchange.summary) is not None:
        compacted = CompactionEnded(kept.exchanges, kept.tokens_before, kept.tokens_after, kept.text)
        widgets.append(CompactionMarker(compacted))
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
        # Who is speaking sits in the top edge (chat.tcss): what renders stays just the prompt.
        self.border_title = "You"
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


class NoticeLine(Static):
    """A note from moa-chat itself (not a model): start-up hints, warnings, the iteration cap."""

    def __init__(self, text: str, level: str = "info") -> None:
        super().__init__(Content(inert(text)), classes=f"notice -{level}")
        self.message, self.level = text, level  # to build it again (ChatLog.fold_away)


class Welcome(Static):
    """The empty conversation: what moa-chat does, the preset and its models, and the keys that matter.

    It takes the height the log has left and stands in the middle of it (chat.tcss), instead of a few lines
    pinned to the bottom of an empty screen. Its lines never wrap, so the height it needs is known: a notice
    mounted under it takes room from it down to that, and only then does the log scroll. On a short screen
    (60×20 with a notice under it) it first gives up its blank lines, then the two lines about what moa-chat
    does, then its name: the preset, its models and the keys always show, whole, never cut at the top.
    """

    def __init__(self, preset: Preset, keys: dict[str, str] | None = None) -> None:
        keys = keys or {}

        def key(binding_id: str, default: str) -> str:
            return keys.get(binding_id, default).split(" / ")[0]

        label_width = 12

        def fact(label: str, *value: str | tuple[str, str]) -> Content:
            return Content.assemble((f"{label:<{label_width}}", "$text-muted"), *value)

        def keys_line(*pairs: tuple[str, str]) -> Content:
            return Content(" · ").join(Content.assemble((k, "bold"), f" {does}") for k, does in pairs)

        references = [slot.label for slot in preset.references]
        lines = [
            Content.styled("◆ moa-chat", "bold $text-accent"),
            Content("Ask anything. A panel of reference models advises;"),
            Content("one aggregator reads their answers and replies."),
            Content(""),
            fact(
                "preset",
                (inert(preset.name), "bold $text-accent"),
                "  ",
                (inert(preset.description), "italic $text-muted"),
            ),
            *(
                fact("references" if number == 0 else "", inert(label))
                for number, label in enumerate(references or ["none"])
            ),
            fact("aggregator", (inert(preset.aggregator.label), "bold")),
            Content(""),
            keys_line(
                ("Enter", "send"), (key("newline", "Ctrl+J"), "new line"), (key("preset_picker", "F2"), "presets")
            ),
            keys_line((key("toggle_sidebar", "F4"), "sidebar"), (key("help", "F1"), "help")),
        ]
        super().__init__(Content("\n").join(lines), classes="welcome")
        self._lines = lines
        # What gives way, a group at a time, when the log is shorter than every line: the blank lines, then what
        # moa-chat does, then its name.
        self._spare = ({len(lines) - 3}, {3}, {1, 2}, {0})
        self.styles.min_height = len(lines) - sum(len(group) for group in self._spare)

    def render(self) -> Content:
        dropped: set[int] = set()
        for group in self._spare:
            if len(self._lines) - len(dropped) <= self.size.height:
                break
            dropped |= group
        return Content("\n").join(line for n, line in enumerate(self._lines) if n not in dropped)

    @classmethod
    def for_preset(cls, preset: Preset, keys: dict[str, str] | None = None) -> Welcome:
        return cls(preset, keys)


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
