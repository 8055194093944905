"""An assistant reply: streamed Markdown, tool blocks where they happened, and a quiet footer."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from ...engine import CallRetrying
from ...session import ToolCallEvent, TurnResult
from ...store import StoredTurn
from ...text.inert import inert
from ...text.wording import plural
from . import thinking
from .reply_status import WaitingStatus, consulting
from .reply_versions import CutVersion, RestartNote
from .rows import repeated_line
from .thinking import ThinkingBlock, Thought
from .tool_block import ToolBlock

if TYPE_CHECKING:  # the Markdown widgets are imported where a reply first needs them (DEFERRED in tui/app.py)
    from .markdown import ReplyMarkdown

CODE_BLOCK = re.compile(r"```[^\n]*\n(.*?)```", re.S)


class _Segment:
    """One run of streamed text between tool blocks (the reply's text from `start` on), and the task that hands
    it to its Markdown: whatever arrived since the last batch, one batch per frame, so the batch size follows
    how fast the screen keeps up (Textual's MarkdownStream appends back to back instead, and its batches grow
    until each one re-lays out the whole reply). The Markdown draws a finished block once (tui/widgets/markdown.py),
    so that a batch costs the same at the end of a long reply as at its start."""

    def __init__(self, widget: ReplyMarkdown, start: int) -> None:
        self.widget = widget
        self.start = start
        self._pending: list[str] = []
        self._wake = asyncio.Event()
        self._busy = False
        self._ended = asyncio.Event()  # no more text will come (drain, hurry): no pauses, a frame per batch
        self._hurried = asyncio.Event()  # what is left goes in one batch, with no frame waited for
        self._drained: Callable[[], object] | None = None  # set by drain(): called once all is on screen
        self._batch = BATCH_CHARACTERS[0]
        self._task = asyncio.create_task(self._run())

    def write(self, text: str) -> None:
        self._pending.append(text)
        self._wake.set()

    @property
    def settled(self) -> bool:
        """Whether everything written so far is in the Markdown's blocks."""
        return not self._pending and not self._busy

    @property
    def behind(self) -> bool:
        """Whether more text waits than one batch shows: the stream has outrun the screen."""
        return sum(map(len, self._pending)) > self._batch

    @property
    def draining(self) -> bool:
        """Whether drain() was called and its callback has not run yet."""
        return self._drained is not None and not self._task.done()

    def drain(self, then: Callable[[], object]) -> None:
        """No more text will come: show what is left batch by batch, a frame painted after each (the last one
        too), then call `then`. A long backlog drawn in one batch would hold the screen still."""
        if self._task.done():
            then()
            return
        self._drained = then
        self._ended.set()
        self._wake.set()

    def hurry(self) -> None:
        """Show what is left in one batch, without waiting for frames (the user asked to be done, or a tool
        block comes next)."""
        self._ended.set()
        self._hurried.set()
        self._wake.set()

    async def _run(self) -> None:
        try:
            await self._write_batches()
        finally:  # a batch that failed must not keep the turn from ending (close() raises its error)
            if self._drained is not None:
                self._drained()

    async def _write_batches(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            started = time.monotonic()
            if self._pending:
                text = "".join(self._pending)
                self._pending.clear()
                if len(text) > self._batch and not self._hurried.is_set():
                    # More than a frame's worth: the rest waits for the next batch, after this one is shown.
                    text, rest = text[: self._batch], text[self._batch :]
                    self._pending.append(rest)
                    self._wake.set()
                self._busy = True
                try:
                    await self.widget.stream(text)
                finally:
                    self._busy = False
                self._pace(len(text), time.monotonic() - started)
            if self._ended.is_set():
                if not self._hurried.is_set():
                    # Draining: no more text will come, so no pause; only the frame that shows this batch (after
                    # the last batch too, so that the reply is on screen before the turn's end adds to it). The
                    # chat paints it as soon as it is idle (ChatScreen.paints_uncapped).
                    await self._painted()
                if not self._pending:
                    return
                continue
            # Give the screen its turn to show this batch; the text that arrives meanwhile joins the next (and the
            # end of the turn, at once: the last text must not wait out the pause). A cheap batch needs a short
            # pause only: a slow stream's last token then shows as soon as Textual's own get_stream would show it.
            spent = time.monotonic() - started
            if spent >= BATCH_PERIOD:
                # A slow batch (a new kind of block, the first code block's lexer): the screen paints it before the
                # next one starts: two such batches back to back would hold the screen still.
                await self._painted()
                continue
            pause = min(BATCH_PERIOD - spent, 2 * spent)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ended.wait(), pause)

    async def _painted(self) -> None:
        """Until the screen has painted what the last batch changed, or the segment is hurried."""
        painted = asyncio.get_running_loop().create_future()
        self.widget.call_after_refresh(lambda: None if painted.done() else painted.set_result(None))
        hurried = asyncio.ensure_future(self._hurried.wait())
        try:
            await asyncio.wait({painted, hurried}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            hurried.cancel()

    def _pace(self, characters: int, seconds: float) -> None:
        """Size the next batch to take about BATCH_SECONDS (DRAIN_SECONDS once the text is all here), judging by
        this one (a new kind of block, or the switch to drawn blocks, costs more than the rest: the size follows,
        both ways)."""
        budget = DRAIN_SECONDS if self._ended.is_set() else BATCH_SECONDS
        if characters < self._batch and seconds < budget:
            return  # a small batch says little about a full one
        low, high = BATCH_CHARACTERS
        wanted = characters * budget / max(seconds, 1e-3)
        self._batch = int(min(high, max(low, (self._batch + wanted) / 2)))

    async def close(self, reply_text: str) -> None:
        self.hurry()
        await self._task
        await self.widget.end_stream()
        # What is shown must be exactly what arrived (it is; a mismatch would be a bug, so render it whole).
        text = reply_text[self.start :]
        if self.widget.source != text:
            await self.widget.update(text)

    def cancel(self) -> None:
        self._task.cancel()


BATCH_PERIOD = 1 / 30  # streamed text goes to the Markdown at most this often: a batch per frame or two
# The time one batch should take at most, so that frames keep coming (a batch overshoots it now and then: a code
# block's lexer, a long block drawn again). Figures: docs/performance.md.
BATCH_SECONDS = 0.03
# Once the text is all here, a batch may take longer: no text waits behind it, and fewer, larger batches show the
# backlog sooner than many frames in between.
DRAIN_SECONDS = 0.08
BATCH_CHARACTERS = (400, 40_000)  # the smallest and largest batch (the first is the smallest)

_MARKS = {"interrupted": "cut_off"}  # how a reply's border shows its end (chat.tcss)


@dataclass(frozen=True)
class PanelAnswer:
    """What one reference said for this reply (or why it said nothing)."""

    label: str
    status: str
    text: str
    error: str | None


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


@dataclass(frozen=True)
class _Shown:
    """What a finished reply showed, to build it again after the log folded it away (chat_log.py)."""

    text: str
    # Its text runs, tool calls, thoughts and restarts after a cut-off, in order.
    parts: tuple[str | ToolCallEvent | Thought | CutVersion, ...]
    ended: tuple[str, str | None, float | None, int, str | None]  # as AssistantReply._end took it
    panel: tuple[PanelAnswer, ...]
    version: tuple[int, int]


class AssistantReply(Vertical):
    class PanelRequested(Message):
        def __init__(self, reply: AssistantReply) -> None:
            super().__init__()
            self.reply = reply

    class Ended(Message):
        """The reply has ended (its footer is on): the log may fold away what is far above it."""

    def __init__(self, preset_name: str, aggregator: str, references: int, *, seats: int | None = None) -> None:
        """`seats`: the panel's calls, one per sidebar card (a model asked `samples:` times has one per sample)."""
        super().__init__(classes="assistant-reply")
        self.preset_name, self.aggregator = preset_name, aggregator
        self.references = references
        self._waiting = WaitingStatus(references if seats is None else seats)
        self.panel: tuple[PanelAnswer, ...] = ()  # the references' answers this reply was written from
        self.version: tuple[int, int] = (1, 1)
        self._facts: list[str] = []
        self._saved: tuple[list[dict[str, Any]], StoredTurn | None] | None = None
        self._shown: _Shown | None = None  # set when built again from what it showed
        # Text runs (once closed), tool and thinking blocks, and notes of a restart after a cut-off, in order.
        self._parts: list[str | ToolBlock | ThinkingBlock | RestartNote] = []
        self._ended: tuple[str, str | None, float | None, int, str | None] | None = None
        self.text = ""
        self._segment: _Segment | None = None
        self._tools: dict[str, ToolBlock] = {}
        self.finished = False

    def render_lines(self, crop: Region) -> list[Strip]:
        return repeated_line(self, crop) or super().render_lines(crop)

    def compose(self) -> ComposeResult:
        if self._shown is not None:
            yield Static(self._header(None), classes="reply-header")
            yield from self._shown_widgets(self._shown)
            return
        if self._saved is not None:
            yield Static(self._header(None), classes="reply-header")
            yield from self._saved_widgets(*self._saved)
            return
        yield Static(self._header(consulting(self.references)), classes="reply-header")

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
        if self._segment is None:
            from .markdown import ReplyMarkdown

            thinking.settle(self)
            self.set_status(None)
            widget = ReplyMarkdown(classes="reply-markdown")
            await self.mount(widget)
            self._segment = _Segment(widget, len(self.text))
        self.text += text
        self._segment.write(text)

    async def think(self, text: str) -> None:
        """A reasoning model's thinking, shown folded above what it writes next (thinking.py)."""
        if (block := await thinking.feed(self, text)) is not None:
            self._parts.append(block)
            self.set_status(f"{self.aggregator} is thinking…")

    @property
    def settled(self) -> bool:
        """Whether all the text that arrived is in the Markdown (for benches and tests)."""
        return self._segment is None or self._segment.settled

    @property
    def behind(self) -> bool:
        """Whether more text waits to be shown than one batch holds (see `drain`)."""
        return self._segment is not None and self._segment.behind

    @property
    def draining(self) -> bool:
        """Whether the turn is over and the text that arrived is still being shown (see `drain`)."""
        return self._segment is not None and self._segment.draining

    def drain(self, then: Callable[[], object]) -> None:
        """No more text will come: call `then` once all of it is on screen, with frames painted meanwhile."""
        if self._segment is None:
            then()
        else:
            self._segment.drain(then)

    def hurry(self) -> None:
        """Show the rest of a drain at once."""
        if self._segment is not None:
            self._segment.hurry()

    def on_unmount(self) -> None:
        if self._segment is not None:  # removed mid-stream (the app quit, the log was cleared)
            self._segment.cancel()

    async def _close_segment(self) -> None:
        if self._segment is not None:
            await self._segment.close(self.text)
            self._parts.append(self.text[self._segment.start :])
            self._segment = None

    async def restart(self, reason: str) -> None:
        """The aggregator's stream was cut off after text arrived and it is asked again: the reply as it stood
        is kept as an earlier version (`earlier`), marked cut off; what the round that was cut wrote and thought
        goes, and what streams next is the fresh version, after a line that says why."""
        segment = self._segment
        if segment is None:
            return
        await self._close_segment()
        cut = CutVersion(self.text, reason)
        self.text = self.text[: segment.start]
        gone: list[Widget] = []
        while self._parts and isinstance(self._parts[-1], str | ThinkingBlock):
            part = self._parts.pop()
            gone.append(part if isinstance(part, ThinkingBlock) else segment.widget)
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
            await self._close_segment()
            thinking.settle(self)
            block = ToolBlock(event)
            self._tools[key] = block
            self._parts.append(block)
            self.set_status(None)
            await self.mount(block)
        else:
            block.update_from(event)

    async def finish(self, result: TurnResult, *, tokens: int) -> None:
        # The last text and the footer, shown in one frame: each await between them would otherwise let a layout
        # and a paint in (two frames before the reply looks done).
        from .markdown import batch_update

        with batch_update(self):
            await self._close_segment()
            self.text = result.text or self.text  # segments joined as the conversation keeps them
            self.panel = tuple(PanelAnswer(r.label, r.status, r.text, r.error) for r in result.references)
            await self._end(result.status, result.error, result.seconds, tokens, result.warning)

    async def _end(
        self, status: str, error: str | None, seconds: float | None, tokens: int, warning: str | None = None
    ) -> None:
        self.set_status(None)
        thinking.settle(self)
        self._ended = (status, error, seconds, tokens, warning)
        await self.mount_all(self._ending(status, error, seconds, tokens, warning))
        self._mark(_MARKS.get(status, status))
        self.post_message(self.Ended())

    def _ending(
        self, status: str, error: str | None, seconds: float | None, tokens: int, warning: str | None = None
    ) -> list[Widget]:
        """The line that says how the reply ended badly or early, if it did, and the footer."""
        self.finished = True
        widgets: list[Widget] = []
        if status == "failed":
            why = inert(error or "the turn failed")
            widgets.append(Static(Content.assemble(("✗ ", "bold"), why), classes="reply-error"))
        elif status in ("cut_off", "interrupted"):
            why = inert(error or "the reply never finished: moa-chat stopped while it streamed")
            widgets.append(Static(Content.assemble(("✂ ", "bold"), why), classes="reply-warning"))
        elif warning:
            widgets.append(Static(Content.assemble(("⚠ ", "bold"), inert(warning)), classes="reply-warning"))
        facts = [self.preset_name, self.aggregator]
        if seconds is not None:
            facts.append(f"{seconds:.1f}s")
        if tokens:
            facts.append(plural(tokens, "token"))
        if status in ("cancelled", "failed", "interrupted", "cut_off"):
            facts.insert(0, status.replace("_", " "))
        self._facts = facts
        widgets.append(ReplyMeta(*self._meta(), classes=f"reply-meta -{status}"))
        return widgets

    def _meta(self) -> tuple[Content, str]:
        """The footer's facts, and its version ("" for an exchange with one)."""
        which, count = self.version
        return Content(" · ".join(self._facts)), f"version {which}/{count}" if count > 1 else ""

    def show_version(self, which: int, count: int) -> None:
        self.version = (which, count)
        for meta in self.query(ReplyMeta):
            meta.show(*self._meta())

    def on_reply_meta_clicked(self, event: ReplyMeta.Clicked) -> None:
        event.stop()
        self.post_message(self.PanelRequested(self))

    @classmethod
    def saved(cls, exchange_reply: list[dict[str, Any]], turn: StoredTurn | None) -> AssistantReply:
        """A stored reply as it ended, built whole so that a page of history mounts in one pass."""
        preset = (turn.preset_json if turn else {}) or {}
        aggregator = preset.get("aggregator") or {}
        label = f"{aggregator.get('provider', '?')}:{aggregator.get('model', '?')}" if aggregator else "?"
        references = len([r for r in preset.get("reference_models") or [] if r.get("enabled", True)])
        reply = cls(turn.preset if turn else "", label, references)
        reply._saved = (exchange_reply, turn)  # and how to build it again (recipe)
        status = turn.status if turn else "ok"
        reply.add_class(f"-{_MARKS.get(status, status)}")
        return reply

    def recipe(self) -> Callable[[], AssistantReply] | None:
        """How to build this reply again as it is now (None while it is not finished)."""
        if not self.finished:
            return None
        if self._saved is not None:
            messages, turn = self._saved
            version = self.version

            def saved() -> AssistantReply:
                reply = AssistantReply.saved(messages, turn)
                reply.version = version
                return reply

            return saved
        if self._shown is not None:
            shown = dataclasses.replace(self._shown, version=self.version)
        elif self._ended is not None:
            parts = tuple(
                part.event if isinstance(part, ToolBlock | ThinkingBlock | RestartNote) else part
                for part in self._parts
            )
            shown = _Shown(self.text, parts, self._ended, self.panel, self.version)
        else:
            return None
        header = (self.preset_name, self.aggregator, self.references)
        classes = [name for name in self.classes if name.startswith("-")]

        def build() -> AssistantReply:
            reply = AssistantReply(*header)
            reply._shown = shown
            reply.add_class(*classes)
            return reply

        return build

    def _shown_widgets(self, shown: _Shown) -> list[Widget]:
        from .markdown import ReplyMarkdown

        self.text, self.panel, self.version = shown.text, shown.panel, shown.version
        widgets: list[Widget] = []
        for part in shown.parts:
            if isinstance(part, str):
                widgets.append(ReplyMarkdown(part, classes="reply-markdown"))
            elif isinstance(part, Thought):
                widgets.append(ThinkingBlock.folded(part))
            elif isinstance(part, CutVersion):
                widgets.append(RestartNote(part))
            else:
                block = ToolBlock(part)
                self._tools[f"{part.iteration}:{part.call_id}"] = block
                widgets.append(block)
        return [*widgets, *self._ending(*shown.ended)]

    def _saved_widgets(self, messages: list[dict[str, Any]], turn: StoredTurn | None) -> list[Widget]:
        from .markdown import ReplyMarkdown

        results = {m.get("tool_call_id"): str(m.get("content") or "") for m in messages if m.get("role") == "tool"}
        widgets: list[Widget] = []
        texts = []
        thoughts, rounds = thinking.stored(turn), 0
        for message in messages:
            if message.get("role") != "assistant":
                continue
            rounds += 1
            widgets += thinking.folded(thoughts.get(rounds))
            content = str(message.get("content") or "")
            if content:
                texts.append(content)
                widgets.append(ReplyMarkdown(inert(content), classes="reply-markdown"))
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                call_id = str(call.get("id", ""))
                result = results.get(call_id)
                event = ToolCallEvent(
                    call_id,
                    inert(str(function.get("name", ""))),
                    inert(str(function.get("arguments", ""))),
                    "done" if result is not None else "cancelled",
                    inert(result) if result is not None else None,
                )
                block = ToolBlock(event)
                self._tools[call_id] = block
                widgets.append(block)
        self.text = "\n\n".join(texts)
        if turn is not None:
            self.panel = tuple(
                PanelAnswer(c.record.label, c.record.status, c.text, c.record.error) for c in turn.references
            )
        tokens = sum(c.record.usage.total_tokens for c in turn.calls if c.record.usage) if turn else 0
        status = turn.status if turn else "ok"
        return [*widgets, *self._ending(status, turn.error if turn else None, turn.seconds if turn else None, tokens)]

    def _mark(self, status: str) -> None:
        self.add_class(f"-{status}")

    def last_code_block(self) -> str | None:
        blocks = CODE_BLOCK.findall(self.text)
        return blocks[-1] if blocks else None
