"""`layers: auto` in the sidebar: the layers that did not run leave the panel, and one line says how many
ran and why (with what the agreement checks cost). Snapshots as in test_tui_snapshots.py: a frozen clock,
scripted servers; update only after looking at the changed SVG."""

from __future__ import annotations

from typing import Any

from moa_chat.config import load_config
from moa_chat.providers.loopback_server import Reply
from moa_chat.tui.widgets.sidebar import ReferenceSidebar
from textual.widgets import Static
from tui_helpers import make_app, run_turn, settle

SIZE = (120, 44)
PRICING = "pricing:\n  wire:agg: {input: 100.0, output: 100.0}\n"


def judged(verdicts: list[str]) -> Any:
    """The aggregator: its non-streamed calls (the agreement checks) answer `verdicts` in turn."""
    asked: list[int] = []

    def respond(body: dict[str, Any]) -> Reply:
        if body.get("stream"):
            return Reply(text="Use reversed().")
        asked.append(1)
        return Reply(
            text=verdicts[min(len(asked), len(verdicts)) - 1], usage={"prompt_tokens": 40, "completion_tokens": 1}
        )

    return respond


def shown_titles(sidebar: ReferenceSidebar) -> list[str]:
    return [str(s.render()) for s in sidebar.query(Static) if s.has_class("sidebar-title") and s.display]


def layers_line(sidebar: ReferenceSidebar) -> str:
    return str(sidebar.query_one(".sidebar-layers", Static).render())


async def test_layers_that_did_not_run_leave_the_sidebar_and_a_line_says_why(wire_config, llm_server):
    config = wire_config("layers: auto\nmax_layers: 3")
    config.path.write_text(config.path.read_text() + PRICING, encoding="utf-8")
    config = load_config(config.path)
    llm_server.script("agg", judged(["DISAGREE", "AGREE", "AGREE"]))
    app = make_app(config, "wire")
    async with app.run_test(size=SIZE) as pilot:
        sidebar = app.query_one(ReferenceSidebar)
        assert layers_line(sidebar) == "Layers: auto, up to 3"
        assert len(shown_titles(sidebar)) == 4  # three layers and the aggregator
        await run_turn(pilot, "How do I reverse a list?")
        await settle(pilot)
        assert shown_titles(sidebar) == ["Layer 1 · 3 references", "Layer 2 · 3 references", "Aggregator"]
        assert layers_line(sidebar) == "2 of 3 layers: references agreed · checks $0.0082"
        cards = sidebar.cards()
        assert [c.status for c in cards[:6]] == ["ok"] * 6
        assert all(not c.display and c.status == "idle" for c in cards[6:])
        assert sidebar.aggregator_card.status == "ok"
        # The next turn may need every layer again: they are back, queued, until it decides.
        await run_turn(pilot, "And a tuple?")
        await settle(pilot)
        assert shown_titles(sidebar) == ["Layer 1 · 3 references", "Aggregator"]
        assert layers_line(sidebar).startswith("1 of 3 layers: references agreed · checks $")


async def test_a_fixed_preset_has_no_layers_line(wire_config, llm_server):
    app = make_app(wire_config("layers: 2"), "wire")
    async with app.run_test(size=SIZE) as pilot:
        await run_turn(pilot, "hello")
        sidebar = app.query_one(ReferenceSidebar)
        assert not sidebar.query(".sidebar-layers")
        assert len(shown_titles(sidebar)) == 3


def test_an_auto_layer_sidebar(snap_compare, wire_config, llm_server, frozen_clock):
    llm_server.script("agg", judged(["AGREE"]))

    async def run_before(pilot):
        await run_turn(pilot, "How do I reverse a list in Python?")
        await settle(pilot)

    app = make_app(wire_config("layers: auto\nmax_layers: 2"), "wire")
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
