"""Streaming and long conversations: a streamed reply looks exactly like the same text rendered in one go,
at any width and in any theme, and a long conversation keeps a bounded number of widgets mounted."""

from __future__ import annotations

import asyncio
import random

import pytest
from moa_chat.providers.loopback_server import Reply
from moa_chat.session.reply_parts import ReplyEnding
from moa_chat.tui import reply_pacer
from moa_chat.tui.app import stylesheet_paths
from moa_chat.tui.pacing import PromptlyPainted
from moa_chat.tui.turn_runner import TurnPhase
from moa_chat.tui.widgets.chat_log import ChatLog, EarlierMessages, UserPrompt
from moa_chat.tui.widgets.markdown import ReplyMarkdown, learn_reply_styles
from moa_chat.tui.widgets.prompt_input import PromptInput
from moa_chat.tui.widgets.reply import AssistantReply, ReplyMeta
from textual.app import App, ComposeResult
from textual.strip import Strip
from textual_private import in_batch_update, on_frame
from tui_helpers import make_app, send, wait_until

# Every kind of block a model writes, some twice in a row and nested: headings, emphasis, links, lists (nested,
# of several paragraphs, holding code), code blocks (empty, named, bare, a line too long for the reply), a quote,
# a rule and a table.
CORPUS = """# A heading

An opening paragraph with **bold**, *emphasis*, `inline code`, ~~struck~~ text and
[a link](https://example.com/x), long enough to wrap across more than one line of the reply at this width.

## Second level

- a bullet
- another, with `code`
  - nested bullet
  - nested again
- last bullet

1. first
2. second
3. third

- an item of two paragraphs, drawn from its parts

  its second paragraph, long enough to wrap across more than one line of the reply at this width of screen
- an item that holds a code block, so that the list is laid out by Textual rather than by the list drawer:

  ```python
  print("in a list")
  ```

```
```

```python
def handler(event):
    return {"ok": True, "event": event}
```

> A quoted remark, with *emphasis*, that is long enough to wrap onto a second line at this width of screen.

---

### Third level

| rate | tokens |
| --- | --- |
| 200 | 400 |
| 2000 | 4000 |

Plain paragraph after the table.

```
a bare fence whose only line is far too long to fit in the frame of the reply at this width, so it scrolls sideways
```

#### Fourth level

8. eight
9. nine
10. ten

Closing words.
"""


class LogApp(App[None]):
    CSS_PATH = stylesheet_paths()

    def compose(self) -> ComposeResult:
        yield ChatLog(id="chat-log")


class PacedScreen(PromptlyPainted[None]):
    """A screen that paints as the chat's does while a reply drains (tui/pacing.py): at once, uncapped."""

    def compose(self) -> ComposeResult:
        yield ChatLog(id="chat-log")

    def paints_uncapped(self) -> bool:
        return True


class PacedLogApp(App[None]):
    CSS_PATH = stylesheet_paths()

    def get_default_screen(self) -> PacedScreen:
        return PacedScreen()


def cells(strips: list[Strip]) -> list[list[tuple[str, object]]]:
    """What each cell shows: its character, colours and attributes, and the action a click on it runs."""
    rows = []
    for strip in strips:
        row = []
        for text, style, _ in strip:
            key = None
            if style is not None:
                key = (
                    style.color,
                    style.bgcolor,
                    style.bold,
                    style.italic,
                    style.underline,
                    style.strike,
                    style.dim,
                    style.reverse,
                    style.meta.get("@click"),
                )
            row.extend((char, key) for char in text)
        rows.append(row)
    return rows


def shown(widget: ReplyMarkdown) -> list[list[tuple[str, object]]]:
    """The cells of the Markdown's lines, as it gives them to the screen."""
    return cells([widget.render_line(y) for y in range(widget.size.height)])


async def render(
    text: str, *, pieces: list[str] | None, size: tuple[int, int], theme: str | None = None
) -> list[list[tuple[str, object]]]:
    """The cells of the reply's Markdown, given whole or streamed in `pieces`."""
    app = LogApp()
    async with app.run_test(size=size) as pilot:
        if theme is not None:
            app.theme = theme
        reply = AssistantReply("preset", "wire:agg", 1)
        await app.query_one(ChatLog).mount(reply)
        if pieces is None:
            await reply.mount(ReplyMarkdown(text, classes="reply-markdown"))
        else:
            for piece in pieces:
                await reply.append_text(piece)
                await asyncio.sleep(0)
            await reply.finish(ReplyEnding("ok"))
        await pilot.pause()
        await pilot.pause()
        markdown = reply.query_one(ReplyMarkdown)
        assert markdown.source == text
        return shown(markdown)


async def reply_markdown(app: App[None], pilot, text: str | None = None) -> ReplyMarkdown:
    """A reply's Markdown in the log, laid out: empty, or showing `text` whole."""
    reply = AssistantReply("preset", "wire:agg", 1)
    await app.query_one(ChatLog).mount(reply)
    markdown = ReplyMarkdown(text, classes="reply-markdown")
    await reply.mount(markdown)
    await pilot.pause()
    return markdown


async def shown_once_ended(pilot, markdown: ReplyMarkdown) -> list[list[tuple[str, object]]]:
    """The cells of `markdown` once its stream has ended (laid out)."""
    await markdown.end_stream()
    await pilot.pause()
    await pilot.pause()
    return shown(markdown)


def split(text: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    pieces, at = [], 0
    while at < len(text):
        step = rng.choice([1, 2, 3, 5, 8, 13, 40])
        pieces.append(text[at : at + step])
        at += step
    return pieces


@pytest.mark.parametrize(("seed", "theme"), [(1, None), (2, None), (3, "textual-light")])
async def test_a_streamed_reply_is_drawn_exactly_as_the_text_rendered_in_one_go(seed, theme):
    size = (100, 200)
    whole = await render(CORPUS, pieces=None, size=size, theme=theme)
    streamed = await render(CORPUS, pieces=split(CORPUS, seed), size=size, theme=theme)
    assert len(streamed) == len(whole) > 60
    for number, (got, want) in enumerate(zip(streamed, whole, strict=True)):
        assert got == want, f"line {number}: {''.join(c for c, _ in got)!r} != {''.join(c for c, _ in want)!r}"


async def test_the_end_of_a_stream_mounts_nothing():
    """Ending the stream adds nothing to the turn's last frame: the Markdown is one widget, before and after."""
    app = LogApp()
    async with app.run_test(size=(100, 60)) as pilot:
        markdown = await reply_markdown(app, pilot)
        for number in range(8):
            await markdown.stream(f"Paragraph {number}.\n\n")
        await markdown.stream("The last one.")
        await pilot.pause()
        before = shown(markdown)
        await markdown.end_stream()
        await pilot.pause()
        assert not markdown.children and shown(markdown) == before
        assert "The last one." in markdown.render_line(markdown.size.height - 1).text


async def test_a_growing_line_of_the_live_block_is_repainted_without_a_layout():
    """Text that lengthens the growing block's last line keeps the height: the screen repaints those lines alone
    (no layout of the whole screen), and shows the new text."""
    app = LogApp()
    async with app.run_test(size=(100, 60)) as pilot:
        markdown = ReplyMarkdown(classes="reply-markdown")
        await app.query_one(ChatLog).mount(markdown)
        await pilot.pause()
        for number in range(8):
            await markdown.stream(f"Paragraph {number}.\n\n")
        await markdown.stream("The growing one")
        await pilot.pause()
        height = markdown.size.height
        layouts = []
        app.screen.screen_layout_refresh_signal.subscribe(app, layouts.append, immediate=True)
        await markdown.stream(" grows")
        await pilot.pause()
        await pilot.pause()
        assert layouts == []
        assert "The growing one grows" in markdown.render_line(height - 1).text
        await markdown.stream(" and grows " + "longer " * 20)  # now it wraps: a new height, laid out
        await pilot.pause()
        await pilot.pause()
        assert layouts and markdown.size.height == height + 1


async def test_lists_that_grow_item_by_item_are_drawn_as_in_one_go():
    text = "".join(f"Paragraph {n}.\n\n" for n in range(7))
    text += "- one\n- two\n- three\n\nBetween.\n\n- four\n- five\n\n1. six\n2. seven\n\nThe end.\n"
    app = LogApp()
    async with app.run_test(size=(100, 60)) as pilot:
        markdown = await reply_markdown(app, pilot)
        for line in text.splitlines(keepends=True):
            await markdown.stream(line)
        streamed = await shown_once_ended(pilot, markdown)
    whole = await render(text, pieces=None, size=(100, 60))
    assert streamed == whole


async def test_more_text_after_the_end_of_a_stream_grows_the_last_block():
    app = LogApp()
    async with app.run_test(size=(100, 60)) as pilot:
        markdown = await reply_markdown(app, pilot)
        await markdown.stream("A paragraph.\n\n- one\n")
        await markdown.end_stream()
        await markdown.stream("- two\n\nThe end.\n")
        streamed = await shown_once_ended(pilot, markdown)
    whole = await render("A paragraph.\n\n- one\n- two\n\nThe end.\n", pieces=None, size=(100, 60))
    assert streamed == whole


async def test_a_reply_finds_the_styles_learned_ahead_and_adds_none():
    """learn_reply_styles gives the stylesheet the reply's styles, so that its first mount makes Textual parse
    nothing again."""
    app = LogApp()
    async with app.run_test(size=(100, 200)) as pilot:
        reply = AssistantReply("preset", "wire:agg", 1)
        await app.query_one(ChatLog).mount(reply)
        await pilot.pause()
        learn_reply_styles(app)
        learned = dict(app.stylesheet.source)
        for piece in split(CORPUS, 8):
            await reply.append_text(piece)
            await asyncio.sleep(0)
        shown_all = asyncio.Event()
        reply.drain(shown_all.set)  # the text only: the footer is another widget, with styles of its own
        await wait_until(pilot, shown_all.is_set)
        assert reply.query_one(ReplyMarkdown).source == CORPUS
        assert dict(app.stylesheet.source) == learned


async def test_a_stretched_reply_is_drawn_again_at_the_new_width():
    app = LogApp()
    async with app.run_test(size=(100, 200)) as pilot:
        reply = AssistantReply("preset", "wire:agg", 1)
        await app.query_one(ChatLog).mount(reply)
        for piece in split(CORPUS, 5):
            await reply.append_text(piece)
            await asyncio.sleep(0)
        await reply.finish(ReplyEnding("ok"))
        await pilot.pause()
        wide = shown(reply.query_one(ReplyMarkdown))
        await pilot.resize_terminal(80, 200)
        for _ in range(5):
            await pilot.pause()
        narrow = shown(reply.query_one(ReplyMarkdown))
    whole = await render(CORPUS, pieces=None, size=(80, 200))
    assert narrow == whole and narrow != wide


async def test_a_theme_chosen_while_a_reply_streams_recolours_what_was_drawn_before():
    app = LogApp()
    pieces = split(CORPUS, 6)
    async with app.run_test(size=(100, 200)) as pilot:
        markdown = await reply_markdown(app, pilot)
        for number, piece in enumerate(pieces):
            if number == len(pieces) * 3 // 4:
                await pilot.pause()
                app.theme = "textual-light"  # its styles apply a moment later (App.refresh_css, call_next)
            await markdown.stream(piece)
        await markdown.end_stream()
        for _ in range(5):
            await pilot.pause()
        recoloured = shown(markdown)
    whole = await render(CORPUS, pieces=None, size=(100, 200), theme="textual-light")
    assert recoloured == whole


async def _backlog(app: App[None], text: str) -> tuple[AssistantReply, list[str]]:
    """A reply that was sent `text` faster than it could show it (all of it arrived before the first batch), and
    a log of what follows: each batch given to its Markdown, each frame painted."""
    events: list[str] = []
    on_frame(app, lambda renderable: events.append("frame"))
    reply = AssistantReply("preset", "wire:agg", 1)
    await app.query_one(ChatLog).mount(reply)
    pieces = split(text, 7)
    await reply.append_text(pieces[0])  # mounts the Markdown; the rest waits behind it, unshown
    for piece in pieces[1:]:
        await reply.append_text(piece)
    markdown = reply.query_one(ReplyMarkdown)
    stream = markdown.stream

    async def batch(fragment: str) -> None:
        events.append("batch")
        await stream(fragment)

    markdown.stream = batch  # type: ignore[method-assign]
    return reply, events


@pytest.mark.parametrize("app_class", [LogApp, PacedLogApp])
async def test_a_reply_whose_text_is_all_here_is_shown_batch_by_batch_and_then_the_turn_ends(app_class):
    """The backlog a fast stream leaves behind goes on in batches, a frame painted after each (one batch held the
    screen still for over a second), the turn's end comes after the frame that shows the last of it, and what is
    shown is the text rendered in one go."""
    text = CORPUS * 3
    app = app_class()
    async with app.run_test(size=(100, 200)) as pilot:
        reply, events = await _backlog(app, text)
        assert reply.behind  # what the chat checks before it drains rather than ends the turn at once
        reply.drain(lambda: events.append("done"))
        assert reply.draining
        await wait_until(pilot, lambda: "done" in events, timeout=20)
        assert not reply.draining and reply.settled
        assert events.count("batch") >= 2, events  # the first batch is the smallest: 400 characters
        batches = [n for n, event in enumerate(events) if event == "batch"]
        for this, following in zip(batches, [*batches[1:], events.index("done")], strict=True):
            assert "frame" in events[this:following], f"no frame after the batch at {this}: {events}"
        await reply.finish(ReplyEnding("ok"))
        await pilot.pause()
        await pilot.pause()
        streamed = shown(reply.query_one(ReplyMarkdown))
    whole = await render(text, pieces=None, size=(100, 200))
    assert streamed == whole


async def test_a_hurried_reply_shows_the_rest_at_once():
    """Esc while the backlog is still being shown: the rest in one batch, no frame waited for."""
    app = LogApp()
    async with app.run_test(size=(100, 200)) as pilot:
        reply, events = await _backlog(app, CORPUS * 3)
        reply.drain(lambda: events.append("done"))
        reply.hurry()
        await wait_until(pilot, lambda: "done" in events, timeout=20)
        assert events[: events.index("done")].count("batch") == 1, events
        assert reply.query_one(ReplyMarkdown).source == CORPUS * 3


async def test_a_drained_turn_ends_in_one_frame_with_the_prompt_ready(wire_config, llm_server, monkeypatch):
    """A reply that outran the screen is drained, and it is all on screen before the turn ends: the turn's end
    then needs no frame of its own first, and the prompt loses its busy style in the frame that shows the end
    (a reply that was not drained shows its end first, and the busy style goes a frame later)."""
    # A screen that shows the smallest batch a frame: the text, all here at once, needs about a hundred frames,
    # so the turn's end arrives while most of it waits (a fast renderer's batches would otherwise catch up).
    monkeypatch.setattr(reply_pacer, "BATCH_CHARACTERS", (400, 400))
    text = CORPUS * 40
    llm_server.script("agg", lambda body: Reply(text=text))  # all at once: far more than the first batch
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(100, 40)) as pilot:
        frames: list[tuple[TurnPhase, bool]] = []  # (the turn's phase, the prompt looks busy) at each frame

        def painted(renderable) -> None:
            if renderable is not None and not in_batch_update(app):
                frames.append((app.chat.runner.phase, app.query_one(PromptInput).has_class("-busy")))

        on_frame(app, painted)
        await _turn(pilot, "question 1")
        idle = TurnPhase.IDLE
        ended = next(n for n, (phase, _) in enumerate(frames) if n and frames[n - 1][0] is not idle and phase is idle)
        assert frames[ended - 1][0] is TurnPhase.DRAINING, "the reply should have been drained"
        assert frames[ended] == (idle, False), frames[ended - 2 : ended + 2]


def _reply(body: dict) -> Reply:
    """The aggregator's answer names the question it answers (the last one the user asked)."""
    asked = [m["content"] for m in body["messages"] if m["role"] == "user" and m["content"].startswith("question")]
    question = asked[-1]
    return Reply(text=f"Answer to *{question.split(chr(10))[0]}*:\n\n- a point\n- another\n\nAnd a closing line.")


async def _turn(pilot, text: str) -> None:
    app = pilot.app
    replies = app.query(AssistantReply)
    last = replies.last() if replies else None  # by identity: the log folds earlier replies away as it goes
    await send(pilot, text)

    def answered() -> bool:
        found = app.query(AssistantReply)
        return bool(found) and found.last() is not last and found.last().finished and not app.chat.turn_running

    await wait_until(pilot, answered, timeout=20)
    await pilot.pause()


async def test_a_long_live_conversation_keeps_a_bounded_number_of_widgets_and_brings_back_the_rest(
    wire_config, llm_server
):
    llm_server.script("agg", _reply)
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(90, 24)) as pilot:
        counts = []
        for n in range(30):
            await _turn(pilot, f"question {n}")
            if n in (14, 29):
                await pilot.pause()
                counts.append(len(list(app.screen.walk_children())))
        log = app.query_one(ChatLog)
        shown = [m.text for m in app.query(UserPrompt)]
        assert len(shown) < 15 and shown[-1] == "question 29"
        assert counts[1] <= counts[0] + 5, counts  # as many widgets at turn 30 as at turn 15
        marker = app.query_one(EarlierMessages)
        assert f"{30 - len(shown)} earlier exchanges" in str(marker.render())
        # Scrolled to the top, the folded exchanges come back, in order, replies and their footers included.
        while app.query(EarlierMessages):
            log.scroll_home(animate=False)
            await pilot.pause()
            await pilot.pause()
        assert [m.text for m in app.query(UserPrompt)] == [f"question {n}" for n in range(30)]
        replies = app.query(AssistantReply)
        assert [r.text.split(":")[0] for r in replies] == [f"Answer to *question {n}*" for n in range(30)]
        assert all(r.finished and r.query(ReplyMeta) for r in replies)
        assert replies.first().query_one(ReplyMarkdown).source == replies.first().text
