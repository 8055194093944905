"""The chat asks the aggregator once more when its reply is cut off after text arrived: the cut-off text stays as
the earlier version of the reply, marked cut off, and the fresh reply streams in as the version shown. The store
keeps both as versions of the exchange, so a reopened session shows both (F9). A reference retried after a
cut-off drops the stale preview from its card. Against the loopback server, through the real openai SDK."""

from __future__ import annotations

import threading

from conftest import WIRE_CONFIG, write_config
from moa_chat.config import load_config
from moa_chat.providers.loopback_server import Reply
from moa_chat.store import SessionStore
from moa_chat.tui.app import MoAChatApp
from moa_chat.tui.widgets.markdown import ReplyMarkdown
from moa_chat.tui.widgets.reply import AssistantReply, ReplyMeta
from moa_chat.tui.widgets.reply_versions import RestartNote
from moa_chat.tui.widgets.sidebar import ReferenceSidebar
from moa_chat.tui.widgets.thinking import ThinkingBlock
from textual.widgets import Static
from tui_helpers import run_turn, send, stored_session, wait_until

FORTY_FIVE_WORDS = " ".join(f"w{n}" for n in range(45))
CUT = Reply(text=FORTY_FIVE_WORDS, end_after=4)  # "w0 w1 w2 w3", then the stream ends with no finish reason
WHOLE = Reply(text="the whole reply")


def retrying_config(home, llm_server):
    """The wire preset with retries on (the shared wire config switches them off)."""
    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="").replace("max_retries: 0", "max_retries: 2")
    return load_config(write_config(home, text))


def chat(config, store: SessionStore, session_id: str | None = None) -> MoAChatApp:
    """The chat as `moa-chat` builds it: its session saved in `store` (continuing `session_id`)."""
    app = MoAChatApp(
        config,
        config.preset("wire"),
        session=stored_session(config, store, session_id),
        theme="textual-dark",
        remember_theme=False,
    )
    app.animation_level = "none"
    return app


def last_reply(app: MoAChatApp) -> AssistantReply:
    return app.query(AssistantReply).last()


def shown(reply: AssistantReply) -> dict[str, object]:
    """What a reply shows: its text, its Markdown, the lines about how it ended, its footer."""
    return {
        "text": reply.text,
        "markdown": [widget.source for widget in reply.query(ReplyMarkdown)],
        "warnings": [str(widget.render()) for widget in reply.query(".reply-warning").results(Static)],
        "meta": footer(reply.query_one(ReplyMeta)),
    }


def footer(meta: ReplyMeta) -> str:
    """The footer's line whole, as a column wide enough shows it."""
    return " · ".join(filter(None, [meta.facts.plain, meta.version]))


async def test_a_cut_off_reply_is_asked_again_and_kept_as_the_earlier_version(home, llm_server):
    config = retrying_config(home, llm_server)
    llm_server.script("agg", [CUT, WHOLE])
    store = SessionStore(home / "sessions.db")
    app = chat(config, store)
    async with app.run_test(size=(120, 40)) as pilot:
        await run_turn(pilot, "q")
        reply = last_reply(app)
        now = shown(reply)
        # The fresh reply is the one shown, where the cut-off text was; a line says what happened to that.
        assert now["text"] == "the whole reply" and now["markdown"] == ["the whole reply"]
        (note,) = now["warnings"]
        assert note.startswith("↻ cut off: the stream ended without a finish reason after 11 characters")
        assert "asked again" in note
        kinds = [type(child) for child in reply.children]
        assert kinds.index(RestartNote) < kinds.index(ReplyMarkdown)  # in place of the text that was cut
        assert "version 2/2" in str(now["meta"]) and "cut off" not in str(now["meta"])
        # The cut-off text is kept, marked, as the earlier version.
        (earlier,) = reply.earlier
        assert earlier.text == "w0 w1 w2 w3" and earlier.reason.startswith("cut off: the stream ended")
        assert len(llm_server.requests_for("agg")) == 2

        await pilot.press("f9")  # the previous version: the cut-off reply, marked
        await wait_until(pilot, lambda: last_reply(app) is not reply and last_reply(app).finished)
        before = shown(last_reply(app))
        assert before["text"] == "w0 w1 w2 w3" and before["markdown"] == ["w0 w1 w2 w3"]
        assert before["warnings"] == [
            "✂ the reply from wire:agg was cut off: the stream ended without a finish reason after 11 characters"
        ]
        assert str(before["meta"]).startswith("cut off · ") and "version 1/2" in str(before["meta"])
        assert last_reply(app).has_class("-cut_off")

        await pilot.press("f10")
        await wait_until(pilot, lambda: last_reply(app).text == "the whole reply" and last_reply(app).finished)
        assert "version 2/2" in str(shown(last_reply(app))["meta"])

        # Folded away and built again (a long chat keeps only what is near the screen), it still says so.
        build = reply.recipe()
        assert build is not None
        rebuilt = build()
        await app.chat.chat_log.mount(rebuilt)
        assert [note.cut for note in rebuilt.query(RestartNote)] == [earlier]
        assert shown(rebuilt) == now


async def test_both_versions_are_stored_and_a_reopened_session_shows_them(home, llm_server):
    config = retrying_config(home, llm_server)
    llm_server.script("agg", [CUT, WHOLE])
    store = SessionStore(home / "sessions.db")
    app = chat(config, store)
    async with app.run_test(size=(120, 40)) as pilot:
        await run_turn(pilot, "q")
        session_id = app.session.id
    assert session_id is not None

    # The prompt has two replies, the cut-off one first; the conversation goes on from the whole one.
    turns = store.turns(session_id)
    assert [(t.status, t.kind) for t in turns] == [("cut_off", "ask"), ("ok", "regenerate")]
    assert "was cut off: the stream ended without a finish reason" in (turns[0].error or "")
    prompt = next(m for m in store.path(session_id) if m.role == "user")
    replies = store.children(prompt.id, session_id)
    assert [(m.content, m.turn_id, m.partial) for m in replies] == [
        ("w0 w1 w2 w3", turns[0].id, False),
        ("the whole reply", turns[1].id, False),
    ]
    assert store.path(session_id)[-1].content == "the whole reply"
    assert store.session(session_id).turns == 1  # one exchange, in two versions
    # Each version keeps the panel it was written from; the answers' usage is counted once.
    assert [len(t.references) for t in turns] == [3, 3]
    assert all(c.record.usage is not None for c in turns[0].references)
    assert all(c.record.usage is None for c in turns[1].references)
    assert [c.record.role for c in turns[1].calls if c.record.role == "aggregator"] == ["aggregator"]

    again = chat(config, store, session_id)
    async with again.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        latest = shown(last_reply(again))
        assert latest["text"] == "the whole reply" and "version 2/2" in str(latest["meta"])
        await pilot.press("f9")
        await wait_until(pilot, lambda: last_reply(again).text == "w0 w1 w2 w3" and last_reply(again).finished)
        earlier = shown(last_reply(again))
        assert earlier["warnings"] == [
            "✂ the reply from wire:agg was cut off: the stream ended without a finish reason after 11 characters"
        ]
        assert "version 1/2" in str(earlier["meta"]) and str(earlier["meta"]).startswith("cut off")


async def test_a_reply_cut_off_again_after_the_retry_ends_cut_off_as_without_it(home, llm_server):
    """The engine asks once more, not again and again: a second cut ends the turn with the text it has, marked
    cut off (never a half answer passed off as whole)."""
    config = retrying_config(home, llm_server)
    llm_server.script("agg", [CUT, CUT, WHOLE])
    store = SessionStore(home / "sessions.db")
    app = chat(config, store)
    async with app.run_test(size=(120, 40)) as pilot:
        await run_turn(pilot, "q")
        reply = last_reply(app)
        now = shown(reply)
        assert len(llm_server.requests_for("agg")) == 2
        assert now["text"] == "w0 w1 w2 w3" and len(reply.earlier) == 1
        assert now["warnings"][-1] == (
            "✂ the reply from wire:agg was cut off: the stream ended without a finish reason after 11 characters"
        )
        assert str(now["meta"]).startswith("cut off · ") and "version 2/2" in str(now["meta"])
        assert reply.has_class("-cut_off")
        session_id = app.session.id
    assert [t.status for t in store.turns(session_id or "")] == ["cut_off", "cut_off"]


async def test_a_reference_retried_after_a_cut_off_drops_its_stale_preview(home, llm_server):
    config = retrying_config(home, llm_server)
    asked_again = threading.Event()
    answer_now = threading.Event()
    answers = iter([Reply(text="fragmentary words that never end", end_after=2), Reply(text="whole b")])

    def ref_b(_body: object) -> Reply:
        reply = next(answers)
        if reply.text == "whole b":
            asked_again.set()
            answer_now.wait(20)  # the server's own thread: the retry answers once the card has been looked at
        return reply

    llm_server.script("ref-b", ref_b)
    app = chat(config, SessionStore(home / "sessions.db"))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            card = app.query_one(ReferenceSidebar).cards()[1]
            seen: list[str] = []
            original = card.apply

            def apply(event: object) -> None:
                original(event)
                seen.append(card.text)

            card.apply = apply  # type: ignore[method-assign]
            await send(pilot, "q")
            await wait_until(pilot, lambda: card.retry is not None and asked_again.is_set(), timeout=15)
            assert "fragmentary" in seen  # the cut-off attempt was previewed
            assert card.status == "running" and card.text == "" and card.tail == ""
            assert "fragmentary" not in card.render().plain and "↻ retry 1/2" in card.render().plain
            answer_now.set()
            await wait_until(pilot, lambda: card.status == "ok" and not app.chat.turn_running, timeout=15)
            assert card.text == "whole b"
    finally:
        answer_now.set()


async def test_a_reply_that_thought_before_it_was_cut_off_thinks_afresh_below_the_note(home, llm_server):
    """What the cut-off attempt thought goes with its text; the fresh attempt's thought is shown above the fresh
    reply, after the line that says the first was cut off."""
    config = retrying_config(home, llm_server)
    first = Reply(text=FORTY_FIVE_WORDS, end_after=4, reasoning="first thoughts about it")
    llm_server.script("agg", [first, Reply(text="the whole reply", reasoning="second thoughts")])
    app = chat(config, SessionStore(home / "sessions.db"))
    async with app.run_test(size=(120, 40)) as pilot:
        await run_turn(pilot, "q")
        reply = last_reply(app)
        assert reply.text == "the whole reply"
        (block,) = reply.query(ThinkingBlock)
        assert block.thought == "second thoughts"
        kinds = [type(child) for child in reply.children]
        assert kinds.index(RestartNote) < kinds.index(ThinkingBlock) < kinds.index(ReplyMarkdown)
