"""The chat's turn runner and the session it runs turns of: a typed request names the session call, the
session is built with the app's approver, the sidebar takes the panel's events itself, and the end of a turn
comes in the frames the architecture promises."""

from __future__ import annotations

from moa_chat.engine import CancelToken, ReferenceStarted
from moa_chat.providers.loopback_server import Reply
from moa_chat.session import ChatSession, TurnResult
from moa_chat.store import SessionStore
from moa_chat.tools import Approver
from moa_chat.tui import reply_pacer
from moa_chat.tui.approver import DialogApprover
from moa_chat.tui.turn_runner import Edit, Rerun, Send, TurnPhase, run_request
from moa_chat.tui.widgets.markdown import ReplyMarkdown
from moa_chat.tui.widgets.prompt_input import PromptInput
from moa_chat.tui.widgets.reply import AssistantReply, ReplyMeta
from moa_chat.tui.widgets.sidebar import ReferenceSidebar
from textual_private import in_batch_update, on_frame
from tui_helpers import make_app, run_turn, send, stored_session, wait_until

ENDED = TurnResult(status="ok", text="", error=None, seconds=0.0, references=())


class Recording:
    """Stands in for a ChatSession: which call a request became, with what."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def send(self, text: str, *, observer: object, cancel: CancelToken, solo: bool = False) -> TurnResult:
        self.calls.append(("send", text, solo))
        return ENDED

    def edit(self, text: str, *, observer: object, cancel: CancelToken) -> TurnResult:
        self.calls.append(("edit", text))
        return ENDED

    def rerun(self, *, aggregator_only: bool, observer: object, cancel: CancelToken) -> TurnResult:
        self.calls.append(("rerun", aggregator_only))
        return ENDED


def test_each_request_is_the_session_call_it_names():
    session = Recording()
    for request in (Send("hello"), Send("quick", solo=True), Edit("hello again"), Rerun(True), Rerun(False)):
        assert run_request(session, request, lambda event: None, CancelToken()) is ENDED  # type: ignore[arg-type]
    assert session.calls == [
        ("send", "hello", False),
        ("send", "quick", True),
        ("edit", "hello again"),
        ("rerun", True),
        ("rerun", False),
    ]


async def test_the_session_is_built_with_the_apps_approver(home, wire_config):
    config = wire_config()
    app = make_app(config, "wire")
    assert isinstance(app.approver, DialogApprover)
    assert app.session.approval.approver is app.approver
    seen: list[tuple[Approver, bool]] = []

    def build(approver: Approver, *, restart_cut_reply: bool) -> ChatSession:
        seen.append((approver, restart_cut_reply))
        return ChatSession(config, config.preset("wire"), approver=approver, store=SessionStore(home / "s.db"))

    stored = make_app(config, "wire", session=build)
    # The chat can show a fresh reply after a cut-off one: the factory is told so, with the approver.
    assert seen == [(stored.approver, True)] and stored.session.approval.approver is stored.approver
    assert stored.session.store is not None


async def test_the_sidebar_applies_the_panels_events_and_the_reply_says_how_many_answered(
    home, wire_config, llm_server
):
    config = wire_config()
    app = make_app(config, "wire", session=stored_session(config, SessionStore(home / "sessions.db")))
    async with app.run_test(size=(120, 36)) as pilot:
        await run_turn(pilot, "a question")
        sidebar = app.chat.query_one(ReferenceSidebar)
        cards = sidebar.cards()
        assert cards and all(card.status == "ok" for card in cards)
        assert sidebar.finished() == len(cards)
        # A new turn's events, applied by hand: the card they name changes, no other.
        sidebar.start_turn()
        sidebar.apply(ReferenceStarted(0, cards[0].label))
        assert [card.status for card in cards] == ["running", *["queued"] * (len(cards) - 1)]
        assert sidebar.finished() == 0


def _frames(app) -> list[tuple[TurnPhase, bool, bool]]:
    """At each frame the app paints (outside a batch update): the turn's phase, whether the prompt looks busy,
    and whether the last reply shows its footer."""
    frames: list[tuple[TurnPhase, bool, bool]] = []

    def painted(renderable) -> None:
        if renderable is not None and not in_batch_update(app):
            replies = app.query(AssistantReply)
            footer = bool(replies) and bool(replies.last().query(ReplyMeta))
            frames.append((app.chat.runner.phase, app.query_one(PromptInput).has_class("-busy"), footer))

    on_frame(app, painted)
    return frames


async def test_a_reply_that_kept_up_shows_its_end_first_and_the_prompt_ready_a_frame_later(wire_config, llm_server):
    """No backlog, no drain: the frame that shows the reply's footer is the turn's end (the phase is idle), with
    the prompt still dimmed; the prompt and the keys are restyled in a later frame."""
    llm_server.script("agg", Reply(text="A short answer."))
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        frames = _frames(app)
        await run_turn(pilot, "question")
        await wait_until(pilot, lambda: not app.query_one(PromptInput).has_class("-busy"))
        await pilot.pause()
        assert TurnPhase.DRAINING not in [phase for phase, _, _ in frames]
        # The first frame to show the footer (a short turn may be over before the first frame after Enter).
        ended = next(n for n, (_, _, footer) in enumerate(frames) if footer)
        assert frames[ended] == (TurnPhase.IDLE, True, True), frames[ended - 1 : ended + 2]
        assert (TurnPhase.IDLE, False, True) in frames[ended + 1 :]


async def test_escape_while_a_reply_drains_shows_the_rest_at_once_and_ends_the_turn(
    wire_config, llm_server, monkeypatch
):
    """The turn's thread is done and the reply's backlog is being shown batch by batch: Esc shows the rest in one
    batch, and the turn ends as it finished (not cancelled), with the whole text."""
    # A character a batch: whatever the machine's speed, the screen falls behind the stream and the turn ends with
    # a backlog (at 400 a batch, an app that drew fast enough kept up, and there was nothing to drain).
    monkeypatch.setattr(reply_pacer, "BATCH_CHARACTERS", (1, 1))
    text = "".join(
        f"Paragraph {n} of an answer that arrives all at once, far faster than a screen shows it.\n\n"
        for n in range(500)
    )
    llm_server.script("agg", Reply(text=text))
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        frames = _frames(app)
        await send(pilot, "question")
        await wait_until(pilot, lambda: app.chat.runner.phase is TurnPhase.DRAINING, timeout=20)
        await pilot.press("escape")
        pressed = len(frames)
        await wait_until(pilot, lambda: not app.chat.turn_running, timeout=20)
        reply = app.query(AssistantReply).last()
        assert reply.ending is not None and reply.ending.status == "ok"
        assert reply.text == text and reply.query_one(ReplyMarkdown).source == text
        drained_after = [phase for phase, _, _ in frames[pressed:]].count(TurnPhase.DRAINING)
        assert drained_after <= 3, frames[pressed:]  # a drain left alone takes over a hundred frames here


async def test_the_prompt_looks_busy_in_every_frame_of_a_turn(wire_config, llm_server):
    """From the frame that shows the prompt sent to the turn's end, the prompt is dimmed: the runner's phase is
    shown before the UI thread stands aside for the requests, not after the prompt is in the log."""
    llm_server.script("agg", Reply(text="A short answer, in a few pieces.", piece_delay=0.02))
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        frames = _frames(app)
        for number in range(5):
            await run_turn(pilot, f"question {number}")
        on = [frame for frame in frames if frame[0] is not TurnPhase.IDLE]
        assert on and all(busy for _, busy, _ in on), frames
