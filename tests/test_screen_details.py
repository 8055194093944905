"""What the screens show at their edges: the header of a local turn and of the demo, the welcome and the preset
picker at 60×20, an older reply's footer at 120 columns, and dialogs' footers listing only their working keys."""

from __future__ import annotations

import pytest
from conftest import write_config
from moa_chat.config import load_config
from moa_chat.providers.loopback_server import Reply
from moa_chat.tui.widgets.header import StatusHeader
from test_cli_edge_cases import LOCAL_ON_THE_TEST_SERVER
from tui_helpers import make_app, run_turn


async def test_a_local_turn_shows_tokens_n_a_and_0_dollars_in_the_header(home, llm_server):
    """llama.cpp's server reports no usage: the header says the tokens are unknown, not 0, and that a turn on
    this machine cost $0, where a paid model's turn shows what it cost."""
    config = load_config(write_config(home, LOCAL_ON_THE_TEST_SERVER.format(base_url=llm_server.base_url)))
    llm_server.script("smollm2", Reply(text="Hello from this machine.", usage_chunk=False))
    app = make_app(config, "mine")
    async with app.run_test(size=(120, 36)) as pilot:
        header = app.query_one(StatusHeader)
        assert header.render().plain.endswith("0 tokens")  # nothing asked yet: nothing used
        await run_turn(pilot, "hi")
        assert header.render().plain.endswith("tokens n/a · $0")


async def test_the_demo_header_shows_no_price_for_its_simulated_models(home):
    config = load_config(None)
    app = make_app(config, "demo")
    async with app.run_test(size=(120, 36)) as pilot:
        await run_turn(pilot, "hi")
        text = app.query_one(StatusHeader).render().plain
        assert text.rstrip().endswith("tokens") and "$" not in text


# --------------------------------------------------------------------------- the welcome at 60×20

KEYLESS = (
    "No API key found, so moa-chat starts on the offline demo preset (simulated models). To use real models: "
    "export OPENROUTER_API_KEY=... and run `moa-chat --preset frontier`."
)


async def test_the_welcome_is_whole_at_60_by_20_with_the_keyless_notice_under_it(home):
    from moa_chat.tui.widgets.chat_log import ChatLog, Welcome
    from tui_helpers import settle

    app = make_app(load_config(None), "demo", notice=KEYLESS)
    async with app.run_test(size=(60, 20)) as pilot:
        await settle(pilot)
        log, welcome = app.query_one(ChatLog), app.query_one(Welcome)
        assert log.scroll_y == 0 and log.max_scroll_y == 0  # nothing scrolled out of sight at the top
        text = welcome.render().plain
        assert welcome.region.y >= log.region.y
        preset = app.session.preset
        for must in (preset.name, *(slot.label for slot in preset.references), preset.aggregator.label):
            assert must in text
        assert "F2 presets" in text and "F1 help" in text
        assert len(text.splitlines()) <= welcome.size.height
    app = make_app(load_config(None), "demo", notice=KEYLESS)
    async with app.run_test(size=(120, 36)) as pilot:  # with room, every line
        await settle(pilot)
        assert "Ask anything." in app.query_one(Welcome).render().plain


# --------------------------------------------------------------------------- F2 at 60×20


def _drawn(widget) -> str:
    """What a widget draws, row by row."""
    from textual.geometry import Region

    width, height = widget.size
    return "\n".join(strip.text for strip in widget.render_lines(Region(0, 0, width, height)))


async def test_the_pickers_needs_are_whole_at_60_columns_and_beside_the_models_at_120(home):
    from moa_chat.tui.screens.preset_picker import PresetPicker
    from textual.widgets import OptionList
    from tui_helpers import wait_until

    for size, beside in (((60, 20), False), ((120, 36), True)):
        app = make_app(load_config(None), "demo")
        async with app.run_test(size=size) as pilot:
            await pilot.press("f2")
            await wait_until(pilot, lambda app=app: isinstance(app.screen, PresetPicker))
            await pilot.pause()
            options = app.screen.query_one(OptionList)
            frontier = options.get_option("frontier").prompt
            lines = frontier.plain.splitlines()
            assert any(line.strip() == "needs OPENROUTER_API_KEY" for line in lines) is not beside, lines
            assert all(len(line) <= options.scrollable_content_region.width for line in lines if "needs" in line)
            options.highlighted = options.get_option_index("frontier")
            await pilot.pause()
            assert "needs OPENROUTER_API_KEY" in _drawn(options)


@pytest.mark.parametrize("size", [(60, 20), (80, 24), (110, 32)])
async def test_the_pickers_hint_stays_in_its_panel_and_a_long_list_scrolls(home, size):
    from moa_chat.tui.screens.preset_picker import PresetPicker
    from textual.widgets import OptionList
    from tui_helpers import wait_until

    app = make_app(load_config(None), "demo")
    async with app.run_test(size=size) as pilot:
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, PresetPicker))
        await pilot.pause()
        await pilot.pause()
        panel, options = app.screen.query_one("#picker"), app.screen.query_one(OptionList)
        hint = app.screen.query_one(".modal-hint")
        assert "Enter switch · Esc close" in _drawn(hint)
        assert panel.content_region.contains_region(hint.region), (hint.region, panel.content_region)
        assert options.region.bottom <= hint.region.y
        if size[1] < 30:
            assert options.max_scroll_y > 0  # the rest of the list is a scroll away


# --------------------------------------------------------------------------- a reply's version at 120 columns

LONG_AGGREGATOR = "an-aggregator-whose-model-name-runs-on-and-on-like-a-router-id-does"


async def test_an_older_replys_footer_keeps_its_version_whole_at_120_columns(home, wire_config, llm_server):
    from moa_chat.store import SessionStore
    from moa_chat.tui.app import MoAChatApp
    from moa_chat.tui.widgets.reply import AssistantReply, ReplyMeta
    from tui_helpers import stored_session, wait_until

    config = wire_config(f"aggregator: {{provider: wire, model: {LONG_AGGREGATOR}}}")
    session = stored_session(config, SessionStore(home / "sessions.db"))
    app = MoAChatApp(config, config.preset("wire"), session=session, theme="textual-dark", remember_theme=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await run_turn(pilot, "first")
        await pilot.press("ctrl+g")  # a second version of the first exchange
        await wait_until(pilot, lambda: not app.chat.turn_running and app.query(AssistantReply).last().finished)
        await run_turn(pilot, "second")
        older = app.query(AssistantReply).first().query_one(ReplyMeta)
        drawn = _drawn(older)
        assert drawn.rstrip().endswith("· version 2/2"), drawn
        assert "…" in drawn  # the line is longer than the column: the facts gave way, not the version


# --------------------------------------------------------------------------- a dialog's footer


def _dialogs(app, store):
    """Every dialog the chat opens, built as the chat builds it."""
    from moa_chat.tools.approval import ApprovalRequest
    from moa_chat.tui.keys import help_rows
    from moa_chat.tui.screens.approval import ApprovalScreen
    from moa_chat.tui.screens.confirm import ConfirmScreen
    from moa_chat.tui.screens.help import HelpScreen
    from moa_chat.tui.screens.model_picker import ModelPicker
    from moa_chat.tui.screens.panel import PanelAnswers
    from moa_chat.tui.screens.preset_picker import PresetPicker
    from moa_chat.tui.screens.reference_detail import ReferenceDetail
    from moa_chat.tui.screens.session_browser import ConfirmDelete, RenameSession, SessionsScreen
    from moa_chat.tui.screens.side_by_side import SideBySide
    from moa_chat.tui.screens.trace import TraceScreen
    from moa_chat.tui.widgets.reply import PanelAnswer
    from moa_chat.tui.widgets.sidebar import ReferenceSidebar

    answers = (PanelAnswer("wire:ref-a", "done", "alpha", None), PanelAnswer("wire:ref-b", "done", "beta", None))
    sid = store.create_session("wire", "a stored session")
    card = app.query_one(ReferenceSidebar).cards()[0]
    return {
        "approval": lambda: ApprovalScreen(ApprovalRequest("c1", "write_file", {"path": "x"})),
        "confirm": lambda: ConfirmScreen("Over the limit", "Send anyway?"),
        "help": lambda: HelpScreen(help_rows(app.chat), []),
        "model picker": lambda: ModelPicker(app.config, "wire", as_aggregator=True),
        "panel": lambda: PanelAnswers(answers, "wire:agg"),
        "preset picker": lambda: PresetPicker(app.config, "wire"),
        "reference detail": lambda: ReferenceDetail(card, app),
        "sessions": lambda: SessionsScreen(store),
        "rename": lambda: RenameSession("a stored session"),
        "delete": lambda: ConfirmDelete(store.session(sid)),
        "side by side": lambda: SideBySide(answers, "wire:agg"),
        "trace": lambda: TraceScreen(store, sid, traces_on=False),
    }


async def test_a_dialogs_footer_lists_only_the_keys_that_work_in_it(home, wire_config, llm_server):
    from moa_chat.store import SessionStore
    from textual.widgets import Footer
    from textual.widgets._footer import FooterKey
    from tui_helpers import wait_until

    app = make_app(wire_config(), "wire")
    store = SessionStore(home / "sessions.db")
    async with app.run_test(size=(120, 36)) as pilot:
        await run_turn(pilot, "hello")
        for name, build in _dialogs(app, store).items():
            dialog = build()
            app.push_screen(dialog)
            await wait_until(pilot, lambda dialog=dialog: app.screen is dialog and bool(dialog.query(FooterKey)))
            await pilot.pause()
            footer = dialog.query_one(Footer)
            assert footer.region.y == app.size.height - 1, name  # the bottom row: the chat's footer is covered
            shown = {key.key for key in footer.query(FooterKey)}
            working = {key for key, active in dialog.active_bindings.items() if active.enabled}
            assert shown and shown <= working, (name, shown - working)
            # Each one the dialog's own (or a widget's in it), none of the chat's or the app's behind it.
            owners = {key: dialog.active_bindings[key].node for key in shown}
            assert all(node is dialog or dialog in node.ancestors for node in owners.values()), (name, owners)
            dialog.dismiss(None)
            await wait_until(pilot, lambda dialog=dialog: app.screen is not dialog)
