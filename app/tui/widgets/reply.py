"""An assistant reply: streamed Markdown, tool blocks where they happened, and a quiet footer."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from ...session import ToolCallEvent, TurnResult
from ...store import StoredTurn
from ...terminal import inert
from .markdown import ReplyMarkdown
from .tool_block import ToolBlock

CODE_BLOCK = re.compile(r"```[^\n]*\n(.*?)```", re.S)


class _Segment:
    """One run of streamed text between tool blocks: the reply's text from `start` on."""

    def __init__(self, widget: Markdown, start: int) -> None:
        self.widget = widget
        self.start = start
        self.stream: MarkdownStream = Markdown.get_stream(widget)

    async def close(self, reply_text: str) -> None:
        await self.stream.stop()
        # The stream batches fragments; make sure what is shown is exactly what arrived.
        text = reply_text[self.start :]
        if self.widget.source != text:
            await self.widget.update(text)


_MARKS = {"interrupted": "cut_off"}  # how a reply's border shows its end (chat.tcss)


@dataclass(frozen=True)
class PanelAnswer:
    """What one reference said for this reply (or why it said nothing)."""

    label: str
    status: str
    text: str
    error: str | None


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


class ReplyMeta(Static):
    """The reply's footer: preset, aggregator, time, tokens, version. A click shows the panel's answers."""

    class Clicked(Message):
        pass

    def on_click(self) -> None:
        self.post_message(self.Clicked())


class AssistantReply(Vertical):
    class PanelRequested(Message):
        def __init__(self, reply: AssistantReply) -> None:
            super().__init__()
            self.reply = reply

    def __init__(self, preset_name: str, aggregator: str, references: int) -> None:
        super().__init__(classes="assistant-reply")
        self.preset_name, self.aggregator = preset_name, aggregator
        self.references = references
        self.panel: tuple[PanelAnswer, ...] = ()  # the references' answers this reply was written from
        self.version: tuple[int, int] = (1, 1)
        self._facts: list[str] = []
        self._saved: tuple[list[dict[str, Any]], StoredTurn | None] | None = None
        self.text = ""
        self._segment: _Segment | None = None
        self._tools: dict[str, ToolBlock] = {}
        self.finished = False

    def compose(self) -> ComposeResult:
        if self._saved is not None:
            yield Static(self._header(None), classes="reply-header")
            yield from self._saved_widgets(*self._saved)
            return
        yield Static(self._header(f"consulting {plural(self.references, 'reference')}…"), classes="reply-header")

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

    async def append_text(self, text: str) -> None:
        if not text:
            return
        if self._segment is None:
            self.set_status(None)
            widget = ReplyMarkdown(classes="reply-markdown")
            await self.mount(widget)
            self._segment = _Segment(widget, len(self.text))
        self.text += text
        await self._segment.stream.write(text)

    async def _close_segment(self) -> None:
        if self._segment is not None:
            await self._segment.close(self.text)
            self._segment = None

    async def tool_event(self, event: ToolCallEvent) -> None:
        # Ids made up for servers that send none (call_0, ...) repeat in each round of the tool loop.
        key = f"{event.iteration}:{event.call_id}"
        block = self._tools.get(key)
        if block is None:
            await self._close_segment()
            block = ToolBlock(event)
            self._tools[key] = block
            self.set_status(None)
            await self.mount(block)
        else:
            block.update_from(event)

    async def finish(self, result: TurnResult, *, tokens: int) -> None:
        await self._close_segment()
        self.text = result.text or self.text  # segments joined as the conversation keeps them
        self.panel = tuple(PanelAnswer(r.label, r.status, r.text, r.error) for r in result.references)
        await self._end(result.status, result.error, result.seconds, tokens, result.warning)

    async def _end(
        self, status: str, error: str | None, seconds: float | None, tokens: int, warning: str | None = None
    ) -> None:
        self.set_status(None)
        await self.mount_all(self._ending(status, error, seconds, tokens, warning))
        self._mark(_MARKS.get(status, status))

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
        widgets.append(ReplyMeta(self._meta(), classes=f"reply-meta -{status}"))
        return widgets

    def _meta(self) -> Content:
        which, count = self.version
        facts = [*self._facts, f"version {which}/{count}"] if count > 1 else self._facts
        return Content(" · ".join(facts))

    def show_version(self, which: int, count: int) -> None:
        self.version = (which, count)
        for meta in self.query(ReplyMeta):
            meta.update(self._meta())

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
        reply._saved = (exchange_reply, turn)
        status = turn.status if turn else "ok"
        reply.add_class(f"-{_MARKS.get(status, status)}")
        return reply

    def _saved_widgets(self, messages: list[dict[str, Any]], turn: StoredTurn | None) -> list[Widget]:
        results = {m.get("tool_call_id"): str(m.get("content") or "") for m in messages if m.get("role") == "tool"}
        widgets: list[Widget] = []
        texts = []
        for message in messages:
            if message.get("role") != "assistant":
                continue
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
        # add_class restyles every descendant, and a long reply has hundreds of Markdown blocks (over a
        # second for 4,000 tokens: bench/stream_render.py). Only the reply's own border depends on the
        # status class, so restyle just this node.
        self.add_class(f"-{status}", update=False)
        self.app.stylesheet.apply(self)
        self.refresh(layout=True)

    def last_code_block(self) -> str | None:
        blocks = CODE_BLOCK.findall(self.text)
        return blocks[-1] if blocks else None
