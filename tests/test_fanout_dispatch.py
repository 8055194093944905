"""The fan-out's requests leave together: the engine says when they have (ReferencesSent), the chat's UI
thread stands aside until then, and cards lay the screen out again only when their height changes.

How long any of it takes is bench/fanout.py's to measure; these check the order of things."""

from __future__ import annotations

from moa_chat.engine import (
    AggregatorStarted,
    MoAEngine,
    ReferenceFinished,
    ReferenceProgress,
    ReferenceQueued,
    ReferencesSent,
    ReferenceStarted,
    TurnEnv,
    TurnPlan,
)
from moa_chat.llm import ChatRequest, call_llm, sending
from moa_chat.moa import MoAChatCompletions
from moa_chat.providers.loopback_server import Reply
from moa_chat.tui.bridge import CoreEvent, TurnBridge
from moa_chat.tui.widgets.reference_card import ReferenceCard
from moa_chat.tui.widgets.sidebar import ReferenceSidebar
from tui_helpers import make_app, run_turn

QUESTION = [{"role": "user", "content": "How do I reverse a list in Python?"}]


def test_a_request_is_reported_sent_while_it_waits_for_its_answer(wire_config, llm_server):
    config = wire_config()
    llm_server.script("ref-a", Reply(text="a late answer", delay=0.3))
    seen: list[str] = []
    with sending(lambda: seen.append("sent")):
        stream = call_llm(provider="wire", model="ref-a", messages=QUESTION, stream=True, config=config)
        seen.append("answered")  # the response's headers: after the server's delay
    list(stream)
    assert seen == ["sent", "answered"]
    # The messages go on the wire as given (beside the SDK's transform, not through it).
    assert llm_server.requests_for("ref-a")[0].body["messages"] == QUESTION


def test_the_fanout_says_once_when_all_its_requests_have_left(wire_config, llm_server):
    config = wire_config()
    for model in ("ref-a", "ref-b", "ref-c"):
        llm_server.script(model, Reply(text=f"answer from {model}", delay=0.2))
    events: list[object] = []
    MoAChatCompletions("wire", config=config).create(messages=QUESTION, observer=events.append)
    sent = [e for e in events if isinstance(e, ReferencesSent)]
    assert sent == [ReferencesSent(layer=1, count=3)]
    before = events[: events.index(sent[0])]
    assert sum(isinstance(e, ReferenceStarted) for e in before) == 3
    assert not any(isinstance(e, ReferenceProgress | ReferenceFinished) for e in before)


def test_a_substituted_call_counts_as_sent_when_it_returns(wire_config):
    config = wire_config()

    def answer(request: ChatRequest) -> dict[str, object]:
        text = "the aggregator" if request.model == "agg" else "a reference"
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}

    events: list[object] = []
    env = TurnEnv(config, call=answer, observer=events.append)
    MoAEngine(env, TurnPlan(config.preset("wire"))).run_references(QUESTION)
    assert [e for e in events if isinstance(e, ReferencesSent)] == [ReferencesSent(layer=1, count=3)]


def test_the_bridge_lets_the_ui_go_once_the_requests_have_left():
    posted: list[object] = []
    bridge = TurnBridge(posted.append)
    bridge(ReferenceQueued(0, "wire:ref-a"))
    bridge(ReferenceStarted(0, "wire:ref-a"))
    assert not bridge.wait_dispatched(0)  # started, not sent yet
    bridge(ReferencesSent(layer=1, count=1))
    assert bridge.wait_dispatched(0)
    shown = [m.event for m in posted if isinstance(m, CoreEvent)]
    assert [type(e) for e in shown] == [ReferenceQueued, ReferenceStarted]  # nothing for the screen to show


def test_a_turn_without_references_lets_the_ui_go_at_the_aggregator():
    bridge = TurnBridge(lambda message: None)
    bridge(AggregatorStarted("wire:agg", 1, 0, 0))
    assert bridge.wait_dispatched(0)


async def test_cards_lay_the_screen_out_again_only_when_their_height_changes(wire_config, llm_server):
    config = wire_config()
    app = make_app(config, "wire")
    async with app.run_test(size=(120, 40)) as pilot:
        await run_turn(pilot, "warm up")
        card = app.query_one(ReferenceSidebar).cards()[0]
        layouts: list[bool] = []
        refresh = card.refresh

        def spy(*regions: object, layout: bool = False, **options: object) -> object:
            layouts.append(layout)
            return refresh(*regions, layout=layout, **options)

        card.refresh = spy  # type: ignore[method-assign]
        card.apply(ReferenceQueued(0, card.label))
        card.apply(ReferenceStarted(0, card.label))  # "queued" becomes "running": the same lines
        assert layouts and not any(layouts)
        card.apply(ReferenceProgress(0, card.label, 3, 0.1, 0.05, text="Reverse it with"))
        assert layouts[-1] is True  # a line of its text appears under it
        assert isinstance(card, ReferenceCard)


def test_a_held_bridge_posts_nothing_until_released_then_all_in_order():
    posted: list[object] = []
    bridge = TurnBridge(posted.append, held=True)
    bridge(ReferenceQueued(0, "wire:ref-a"))
    bridge(ReferencesSent(layer=1, count=1))
    assert bridge.wait_dispatched(0)  # the UI can stop waiting while the messages are still held
    bridge(ReferenceStarted(0, "wire:ref-a"))
    assert posted == []
    bridge.release()
    bridge(AggregatorStarted("wire:agg", 1, 1, 1))
    shown = [m.event for m in posted if isinstance(m, CoreEvent)]
    assert [type(e) for e in shown] == [ReferenceQueued, ReferenceStarted, AggregatorStarted]
