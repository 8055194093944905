"""An assistant reply: streamed Markdown, tool blocks where they happened, and a quiet footer.

The widget only draws. A live reply is built empty and shows the turn's events as they come (its text through
a ReplyPacer, tui/reply_pacer.py, one batch per frame); a finished one, stored or folded away by the log and
built again, is built from its `ReplyParts` (session/reply_parts.py), which the session decodes from what the
store keeps. Either way the reply's end is drawn from a `ReplyEnding`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from ...engine import CallRetrying
from ...session import ToolCallEvent
from ...session.reply_parts import CutVersion, PanelAnswer, ReplyEnding, ReplyPart, ReplyParts, Thought
from ...text.inert import inert
from ...text.wording import plural
from ..drawing.rows import repeated_line
from ..reply_pacer import ReplyPacer
from ..reply_status import WaitingStatus, consulting
from . import thinking
from .reply_versions import RestartNote
from .thinking import ThinkingBlock
from .tool_block import ToolBlock

if TYPE_CHECKING:  # the Markdown widgets are imported where a reply first needs them (DEFERRED in tui/app.py)
    from .markdown import ReplyMarkdown

__all__ = ["AssistantReply", "PanelAnswer", "ReplyMeta"]

CODE_BLOCK = re.compile(r"```[^\n]*\n(.*?)```", re.S)


class ReplyMeta(Static):
    """The reply's footer: preset, aggregator, time, tokens, version. A click shows the panel's answers.

    The version ("version 1/2") is never cut: it is what F9 and F10 step through. When the line is too long
    for the column, the facts before it give way, from their end, with an ellipsis."""

    class Clicked(Message):
        pass

    def __init__(self, facts: Content, version: str, *, classes: str) -> None:
        super().__init__(classes=classes)
        self.facts, self.version = facts, version

    def show(self, facts: Content, version: str) -> None:
        self.facts, self.version = facts, version
        self.refresh()

    def render(self) -> Content:
        if not self.version:
            return self.facts
        tail = Content(f" · {self.version}")
        room = self.size.width - tail.cell_length
        facts = self.facts if self.facts.cell_length <= room else self.facts.truncate(max(room, 1), ellipsis=True)
        return Content.assemble(facts, tail)

    def on_click(self) -> None:
        self.post_message(self.Clicked())


_MARKS = {"interrupted": "cut_off"}  # how a reply's border shows its end (chat.tcss)


def _mark(ending: ReplyEnding) -> str:
    """The class that shows the reply's end on its border."""
    return f"-{_MARKS.get(ending.status, ending.status)}"


@dataclass(frozen=True)
class _TextRun:
    """The run of text the reply is streaming (since its last tool block): its Markdown, the pacer that feeds it,
    and where it starts in the reply's text."""

    markdown: ReplyMarkdown
    pacer: ReplyPacer
    start: int


class AssistantReply(Vertical):
    class PanelRequested(Message):
        def __init__(self, reply: AssistantReply) -> None:
            super().__init__()
            self.reply = reply

    class Ended(Message):
        """The reply has ended (its footer is on): the log may fold away what is far above it."""

    def __init__(
        self,
        preset_name: str,
        aggregator: str,
        references: int,
        *,
        seats: int | None = None,
        parts: ReplyParts | None = None,
        version: tuple[int, int] = (1, 1),
    ) -> None:
        """A live reply, empty until the turn's events come; or with `parts`, a finished one drawn whole.
        `seats`: the panel's calls, one per sidebar card (a model asked `samples:` times has one per sample)."""
        super().__init__(classes="assistant-reply")
        self.preset_name, self.aggregator = preset_name, aggregator
        self.references = references
        self._waiting = WaitingStatus(references if seats is None else seats)
        self.version = version
        self._given = parts  # what a finished reply was built from, kept to build it again (recipe)
        self.ending: ReplyEnding | None = parts.ending if parts is not None else None
        self.panel: tuple[PanelAnswer, ...] = parts.panel if parts is not None else ()
        self.text = parts.text if parts is not None else ""
        # A live reply's text runs (once closed), tool and thinking blocks, and notes of a restart, in order.
        self._parts: list[str | ToolBlock | ThinkingBlock | RestartNote] = []
        self._run: _TextRun | None = None
        self._tools: dict[str, ToolBlock] = {}
        if self.ending is not None:
            self.add_class(_mark(self.ending))

    @classmethod
    def drawn(cls, parts: ReplyParts, *, version: tuple[int, int] = (1, 1)) -> AssistantReply:
        """A finished reply (stored, or built again after the log folded it away), built whole so that a page
        of history mounts in one pass."""
        return cls(parts.preset, parts.aggregator, parts.references, parts=parts, version=version)

    @property
    def finished(self) -> bool:
        return self.ending is not None

    def render_lines(self, crop: Region) -> list[Strip]:
        return repeated_line(self, crop) or super().render_lines(crop)

    def compose(self) -> ComposeResult:
        yield Static(self._header(None if self.finished else consulting(self.references)), classes="reply-header")
        if self._given is not None:
            yield from map(_part_widget, self._given.parts)
            yield from self._ending_widgets(self._given.ending)

    def _header(self, status: str | None) -> Content:
        """Who answers (the aggregator, by model), and while nothing is written yet, what it is waiting for."""
        label = inert(self.aggregator) if self.aggregator != "?" else "assistant"
        parts: list[str | tuple[str, str]] = [("◆ ", "$text-accent"), (label, "bold $text-accent")]
        if status:
            # "<aggregator> is writing…" reads on from the name the header already shows.
            rest = status[len(self.aggregator) :] if status.startswith(self.aggregator + " ") else f"  {status}"
            parts.append((inert(rest), "italic $text-muted"))
        return Content.assemble(*parts)

    def set_status(self, text: str | None) -> None:
        self.query_one(".reply-header", Static).update(self._header(text))

    # ------------------------------------------------------------------ a live reply: the turn's events

    def panel_event(self, event: object) -> None:
        """A panel event of this reply's turn: while no text has come, the header says what it waits for."""
        if isinstance(event, CallRetrying) and event.role == "aggregator":
            thinking.forget(self)  # the failed attempt's thought: the next one thinks afresh
        status = self._waiting.after(event)
        if status is not None and not self.text:
            self.set_status(status)

    def show_consulting(self) -> None:
        """The panel is being asked (a server moa-chat runs itself has started)."""
        self.set_status(consulting(self.references))

    async def append_text(self, text: str) -> None:
        if not text:
            return
        if self._run is None:
            from .markdown import ReplyMarkdown

            thinking.settle(self)
            self.set_status(None)
            markdown = ReplyMarkdown(classes="reply-markdown")
            await self.mount(markdown)
            self._run = _TextRun(markdown, ReplyPacer(markdown), len(self.text))
        self.text += text
        self._run.pacer.write(text)

    async def think(self, text: str) -> None:
        """A reasoning model's thinking, shown folded above what it writes next (thinking.py)."""
        if (block := await thinking.feed(self, text)) is not None:
            self._parts.append(block)
            self.set_status(f"{self.aggregator} is thinking…")

    @property
    def settled(self) -> bool:
        """Whether all the text that arrived is in the Markdown (for benches and tests)."""
        return self._run is None or self._run.pacer.settled

    @property
    def behind(self) -> bool:
        """Whether more text waits to be shown than one batch holds (see `drain`)."""
        return self._run is not None and self._run.pacer.behind

    @property
    def draining(self) -> bool:
        """Whether the turn is over and the text that arrived is still being shown (see `drain`)."""
        return self._run is not None and self._run.pacer.draining

    def drain(self, then: Callable[[], object]) -> None:
        """No more text will come: call `then` once all of it is on screen, with frames painted meanwhile."""
        if self._run is None:
            then()
        else:
            self._run.pacer.drain(then)

    def hurry(self) -> None:
        """Show the rest of a drain at once."""
        if self._run is not None:
            self._run.pacer.hurry()

    def on_unmount(self) -> None:
        if self._run is not None:  # removed mid-stream (the app quit, the log was cleared)
            self._run.pacer.cancel()

    async def _close_run(self) -> None:
        """What arrived of the text run is all shown, and the run ends (a tool block, a restart or the end
        comes next)."""
        run = self._run
        if run is None:
            return
        await run.pacer.close()
        # What is shown must be exactly what arrived (it is; a mismatch would be a bug, so render it whole).
        text = self.text[run.start :]
        if run.markdown.source != text:
            await run.markdown.update(text)
        self._parts.append(text)
        self._run = None

    async def restart(self, reason: str) -> None:
        """The aggregator's stream was cut off after text arrived and it is asked again: the reply as it stood
        is kept as an earlier version (`earlier`), marked cut off; what the round that was cut wrote and thought
        goes, and what streams next is the fresh version, after a line that says why."""
        run = self._run
        if run is None:
            return
        await self._close_run()
        cut = CutVersion(self.text, reason)
        self.text = self.text[: run.start]
        gone: list[Widget] = []
        while self._parts and isinstance(self._parts[-1], str | ThinkingBlock):
            part = self._parts.pop()
            gone.append(part if isinstance(part, ThinkingBlock) else run.markdown)
        note = RestartNote(cut)
        self._parts.append(note)
        await self.remove_children(gone)
        await self.mount(note)
        self.set_status("asking again…")

    @property
    def earlier(self) -> list[CutVersion]:
        """The versions of this reply that were cut off and asked for again, oldest first."""
        return [note.cut for note in self.query_children(RestartNote)]

    async def tool_event(self, event: ToolCallEvent) -> None:
        # Ids made up for servers that send none (call_0, ...) repeat in each round of the tool loop.
        key = f"{event.iteration}:{event.call_id}"
        block = self._tools.get(key)
        if block is None:
            await self._close_run()
            thinking.settle(self)
            block = ToolBlock(event)
            self._tools[key] = block
            self._parts.append(block)
            self.set_status(None)
            await self.mount(block)
        else:
            block.update_from(event)

    async def finish(self, ending: ReplyEnding, *, text: str = "", panel: tuple[PanelAnswer, ...] = ()) -> None:
        """The turn is over: the rest of the text shown, and how it ended. `text`: the reply's text as the
        conversation keeps it (its runs joined; empty: as streamed); `panel`: the answers it was written from."""
        # The last text and the footer, shown in one frame: each await between them would otherwise let a layout
        # and a paint in (two frames before the reply looks done).
        from .markdown import batch_update

        with batch_update(self):
            await self._close_run()
            self.text = text or self.text
            self.panel = panel
            self.set_status(None)
            thinking.settle(self)
            self.ending = ending
            await self.mount_all(self._ending_widgets(ending))
            self.add_class(_mark(ending))
            self.post_message(self.Ended())

    # ------------------------------------------------------------------ a finished reply

    def _ending_widgets(self, ending: ReplyEnding) -> list[Widget]:
        """The line that says how the reply ended badly or early, if it did, and the footer."""
        widgets: list[Widget] = []
        if ending.status == "failed":
            why = inert(ending.error or "the turn failed")
            widgets.append(Static(Content.assemble(("✗ ", "bold"), why), classes="reply-error"))
        elif ending.status in ("cut_off", "interrupted"):
            why = inert(ending.error or "the reply never finished: moa-chat stopped while it streamed")
            widgets.append(Static(Content.assemble(("✂ ", "bold"), why), classes="reply-warning"))
        elif ending.warning:
            widgets.append(Static(Content.assemble(("⚠ ", "bold"), inert(ending.warning)), classes="reply-warning"))
        widgets.append(ReplyMeta(*self._meta(), classes=f"reply-meta -{ending.status}"))
        return widgets

    def _meta(self) -> tuple[Content, str]:
        """The footer's facts, and its version ("" for an exchange with one)."""
        assert self.ending is not None, "a finished reply has a footer"
        ending = self.ending
        facts = [self.preset_name, self.aggregator]
        if ending.seconds is not None:
            facts.append(f"{ending.seconds:.1f}s")
        if ending.tokens:
            facts.append(plural(ending.tokens, "token"))
        if ending.status in ("cancelled", "failed", "interrupted", "cut_off"):
            facts.insert(0, ending.status.replace("_", " "))
        which, count = self.version
        return Content(" · ".join(facts)), f"version {which}/{count}" if count > 1 else ""

    def show_version(self, which: int, count: int) -> None:
        self.version = (which, count)
        for meta in self.query(ReplyMeta):
            meta.show(*self._meta())

    def on_reply_meta_clicked(self, event: ReplyMeta.Clicked) -> None:
        event.stop()
        self.post_message(self.PanelRequested(self))

    def shown_parts(self) -> ReplyParts | None:
        """What this reply shows, as parts (None while it is not finished)."""
        if self.ending is None:
            return None
        if self._given is not None:
            return self._given
        parts = tuple(
            part.event if isinstance(part, ToolBlock | ThinkingBlock | RestartNote) else part for part in self._parts
        )
        return ReplyParts(self.preset_name, self.aggregator, self.references, parts, self.text, self.ending, self.panel)

    def recipe(self) -> Callable[[], AssistantReply] | None:
        """How to build this reply again as it is now (None while it is not finished)."""
        parts = self.shown_parts()
        return None if parts is None else partial(AssistantReply.drawn, parts, version=self.version)

    def last_code_block(self) -> str | None:
        blocks = CODE_BLOCK.findall(self.text)
        return blocks[-1] if blocks else None


def _part_widget(part: ReplyPart) -> Widget:
    """The widget that draws one part of a finished reply."""
    from .markdown import ReplyMarkdown

    if isinstance(part, str):
        return ReplyMarkdown(part, classes="reply-markdown")
    if isinstance(part, Thought):
        return ThinkingBlock.folded(part)
    if isinstance(part, CutVersion):
        return RestartNote(part)
    return ToolBlock(part)
