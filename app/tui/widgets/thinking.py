"""What a reasoning model thought before it answered, in its reply: a dimmed, folded block above the text.

While the aggregator thinks, the block streams its last few lines under a "thinking…" line. When the answer
begins (its text, a tool call, or the end of the reply), the block folds to one line that says how long it
thought and about how many tokens it took; Enter or a click opens it to the whole thought, and closes it
again. Each aggregator round that thinks gets its own block, above what that round wrote. A stored reply
shows its rounds' thoughts folded.

Only the block's own lines are drawn while it streams: the last LIVE_CHARACTERS of the thought, wrapped, so a
batch costs the same after a long thought as at its start.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.content import Content
from textual.widget import Widget

from ...engine import clock
from ...session.reply_parts import Thought
from ...text.wording import plural

LIVE_LINES = 4  # lines of the thought shown while it streams
LIVE_CHARACTERS = 2_000  # the end of the thought those lines are taken from (plenty for four lines)
CHARACTERS_PER_TOKEN = 4  # a thought's size in tokens, estimated: the provider reports its reasoning tokens late


class ThinkingBlock(Widget, can_focus=True):
    """One aggregator round's thought: live while it streams, then folded to a line until opened."""

    # Two bindings for one key, so that the footer says what Enter will do: only one is active at a time.
    BINDINGS = [
        Binding("enter,space", "fold(False)", "Show thinking"),
        Binding("enter,space", "fold(True)", "Hide thinking"),
    ]

    DEFAULT_CSS = """
    ThinkingBlock {
        height: auto;
    }
    """

    def __init__(self, text: str = "", *, live: bool = True, seconds: float | None = None) -> None:
        super().__init__(classes="thinking-block -live" if live else "thinking-block")
        self.thought = text
        self.live = live
        self.opened = False
        self.seconds = seconds
        self._began = clock.monotonic()
        self._shown_lines = 0  # lines the live block drew last: a layout is needed only when that changes

    @classmethod
    def folded(cls, thought: Thought) -> ThinkingBlock:
        return cls(thought.text, live=False, seconds=thought.seconds)

    @property
    def event(self) -> Thought:
        """What to build this block again from (named as a tool block's, so a reply keeps both alike)."""
        return Thought(self.thought, self.seconds)

    # ------------------------------------------------------------------ state

    def feed(self, text: str) -> None:
        self.thought += text
        if self.live and not self.opened:
            lines = len(self._tail(self._width()))
            self.refresh(layout=lines != self._shown_lines)
        else:
            self.refresh(layout=True)

    def settle(self) -> None:
        """The answer began: fold to one line (once)."""
        if not self.live:
            return
        self.live = False
        self.seconds = round(clock.monotonic() - self._began, 1)
        self.remove_class("-live")
        self.refresh(layout=True)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "fold":
            return parameters == (self.opened,)
        return True

    def action_fold(self, fold: bool) -> None:
        self.toggle()

    def on_click(self) -> None:
        self.toggle()

    def toggle(self) -> None:
        self.opened = not self.opened
        self.set_class(self.opened, "-open")
        self.refresh(layout=True)
        self.refresh_bindings()  # the footer's "Show thinking" becomes "Hide thinking", and back

    # ------------------------------------------------------------------ rendering

    def _width(self) -> int:
        return self.size.width or 80

    def _tail(self, width: int) -> list[Content]:
        """The last LIVE_LINES lines of the thought, wrapped at `width`."""
        end = self.thought[-LIVE_CHARACTERS:].strip("\n")
        if not end:
            return []
        lines = [line for line in Content(end).wrap(max(8, width)) if line.plain.strip()]
        return lines[-LIVE_LINES:]

    def summary(self) -> str:
        """The folded line's words: how long it thought, about how many tokens."""
        words = "thought" if self.seconds is None else f"thought for {self.seconds:.1f}s"
        tokens = len(self.thought) // CHARACTERS_PER_TOKEN
        return f"{words} · ~{plural(tokens, 'token')}" if tokens else words

    def render(self) -> Content:
        if self.live and not self.opened:
            tail = self._tail(self._width())
            self._shown_lines = len(tail)
            head = Content.assemble(("◌ ", "$text-muted"), ("thinking…", "italic $text-muted"))
            return Content("\n").join([head, *(line.stylize("italic $text-muted") for line in tail)])
        mark = "▾ " if self.opened else "▸ "
        words = "thinking…" if self.live else self.summary()
        head = Content.assemble((mark, "$text-muted"), (words, "italic $text-muted"))
        if not self.opened:
            return head
        return Content("\n").join([head, Content.assemble((self.thought.strip(), "$text-muted"))])


async def feed(reply: Widget, text: str) -> ThinkingBlock | None:
    """Show `text` in the reply's block for this round (the last one after its last tool call); returns the
    block if it had to be mounted (at the end of the reply, above what the round writes next)."""
    for child in reversed(reply.children):
        if isinstance(child, ThinkingBlock):
            child.feed(text)
            return None
        if child.has_class("tool-block"):
            break
    block = ThinkingBlock(text)
    await reply.mount(block)
    return block


def settle(reply: Widget) -> None:
    """The reply's answer began (its text, a tool call, its end): its thinking folds."""
    for child in reply.children:
        if isinstance(child, ThinkingBlock):
            child.settle()


def forget(reply: Widget) -> None:
    """The aggregator's attempt failed before it answered and is asked again: what that attempt thought goes
    (the fresh attempt thinks afresh, into the same block)."""
    for child in reply.children:
        if isinstance(child, ThinkingBlock) and child.live:
            child.thought = ""
            child.refresh(layout=True)
