"""The chat's turn runner and the session it runs turns of: a typed request names the session call, the
session is built with the app's approver, and the sidebar takes the panel's events itself."""

from __future__ import annotations

from moa_chat.engine import CancelToken, ReferenceStarted
from moa_chat.session import ChatSession, TurnResult
from moa_chat.store import SessionStore
from moa_chat.tools import Approver
from moa_chat.tui.approver import DialogApprover
from moa_chat.tui.turn_runner import Edit, Rerun, Send, run_request
from moa_chat.tui.widgets.sidebar import ReferenceSidebar
from tui_helpers import make_app, run_turn, stored_session

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
