"""The TUI's behaviour, driven with Pilot against the demo provider and the loopback test server."""

from __future__ import annotations

from moa_chat.config import load_config
from moa_chat.config.settings import load_settings
from moa_chat.providers.loopback_server import Reply
from moa_chat.tui.app import MoAChatApp
from moa_chat.tui.screens.preset_picker import PresetPicker
from moa_chat.tui.screens.reference_detail import ReferenceDetail
from moa_chat.tui.widgets.chat_log import NoticeLine, UserPrompt
from moa_chat.tui.widgets.prompt_input import PromptInput
from moa_chat.tui.widgets.reference_card import ReferenceCard
from moa_chat.tui.widgets.reply import AssistantReply
from moa_chat.tui.widgets.sidebar import ReferenceSidebar
from textual.command import CommandList, CommandPalette
from tui_helpers import make_app, run_turn, send, wait_until

SECOND_PRESET = """
    wire2:
      reference_models:
        - {provider: wire, model: ref-x}
      aggregator: {provider: wire, model: agg2}
"""


def _two_presets(wire_config):
    config = wire_config()
    path = config.path
    path.write_text(path.read_text() + SECOND_PRESET)
    return load_config(path)


async def test_a_demo_turn_streams_into_the_log_and_fills_the_sidebar(home):
    config = load_config()
    app = make_app(config, "demo")
    async with app.run_test(size=(120, 40)) as pilot:
        await run_turn(pilot, "How do I profile Python?")
        reply = app.query_one(AssistantReply)
        assert reply.text.startswith("*Simulated reply")
        markdown = reply.query_one(".reply-markdown")
        assert markdown.source == reply.text  # the final render is exactly the full text
        cards = app.query_one(ReferenceSidebar).cards()
        assert [c.status for c in cards] == ["ok", "ok", "ok"]
        assert app.query_one(ReferenceSidebar).aggregator_card.status == "ok"
        assert app.session.messages[-1] == {"role": "assistant", "content": reply.text}
        assert app.session.ledger.usage().total_tokens > 0


async def test_several_turns_keep_the_whole_conversation(wire_config, llm_server):
    config = wire_config()
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        await run_turn(pilot, "first question")
        await run_turn(pilot, "second question")
        sent = llm_server.requests_for("agg")[-1].messages
        assert [m["role"] for m in sent] == ["user", "assistant", "user", "user"]  # + guidance
        assert sent[0]["content"] == "first question" and sent[1]["content"] == "ok from agg"
        assert len(app.query(UserPrompt)) == 2 and len(app.query(AssistantReply)) == 2


async def test_f3_changes_the_preset_the_next_request_uses(wire_config, llm_server):
    config = _two_presets(wire_config)
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("f3")
        assert app.session.preset.name == "wire2"
        await pilot.pause()
        assert [c.label for c in app.query_one(ReferenceSidebar).cards()] == ["wire:ref-x"]
        await run_turn(pilot, "which preset?")
        assert llm_server.requests_for("agg2") and not llm_server.requests_for("agg")
        await pilot.press("shift+f3")
        assert app.session.preset.name == "wire"


async def test_preset_picker_switches_with_enter(wire_config, llm_server):
    config = _two_presets(wire_config)
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("f2")
        await pilot.pause()
        assert isinstance(app.screen, PresetPicker)
        await pilot.press("down", "enter")
        await pilot.pause()
        assert not isinstance(app.screen, PresetPicker)
        assert app.session.preset.name == "wire2"


async def test_escape_cancels_a_slow_stream_promptly_and_keeps_the_partial_text(wire_config, llm_server):
    config = wire_config()
    llm_server.script(
        "agg", [Reply(text=" ".join(f"word{i}" for i in range(300)), piece_delay=0.1), Reply(text="the next turn")]
    )
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, "write a lot")
        reply = None

        def some_text() -> bool:
            nonlocal reply
            replies = app.query(AssistantReply)
            reply = replies.last() if replies else None
            return bool(reply and reply.text.count("word") >= 3)

        await wait_until(pilot, some_text)
        await pilot.press("escape")
        # Prompt means long before the 30 s stream would end, on any machine: no wall-clock window here (a
        # loaded CI machine missed a 0.5 s one); the stream must be closed, not read to its end.
        await wait_until(pilot, lambda: not app.chat.turn_running, timeout=10)
        assert reply.text.count("word") < 300
        await wait_until(pilot, lambda: llm_server.requests_for("agg")[0].disconnected, timeout=10)
        assert reply.has_class("-cancelled")
        assert reply.text.startswith("word0 word1 word2")
        assert app.session.messages[-1] == {"role": "assistant", "content": reply.text}
        assert app.query_one(ReferenceSidebar).aggregator_card.status == "cancelled"
        await wait_until(pilot, lambda: llm_server.requests_for("agg")[0].finished_at is not None, timeout=3)
        assert llm_server.requests_for("agg")[0].disconnected
        # The input is ready: the next turn runs.
        await run_turn(pilot, "again")
        assert len(llm_server.requests_for("agg")) == 2


async def test_prompt_history_with_up_and_down(wire_config, llm_server):
    config = wire_config()
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        await run_turn(pilot, "first prompt")
        await run_turn(pilot, "second prompt")
        prompt = app.query_one(PromptInput)
        prompt.focus()
        await pilot.press(*"draft")
        await pilot.press("up")
        assert prompt.text == "second prompt"
        await pilot.press("up")
        assert prompt.text == "first prompt"
        await pilot.press("down")
        assert prompt.text == "second prompt"
        await pilot.press("down")
        assert prompt.text == "draft"


async def test_ctrl_j_inserts_a_newline_and_enter_sends_both_lines(wire_config, llm_server):
    config = wire_config()
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        app.query_one(PromptInput).focus()
        await pilot.press(*"line one", "ctrl+j", *"line two", "enter")
        await wait_until(pilot, lambda: bool(llm_server.requests_for("agg")))
        assert llm_server.requests_for("agg")[0].messages[0]["content"] == "line one\nline two"


async def test_copy_reply_and_code_block(home):
    config = load_config()
    app = make_app(config, "demo")
    async with app.run_test(size=(120, 40)) as pilot:
        await run_turn(pilot, "Give me a helper function")
        await pilot.press("f5")
        reply = app.query_one(AssistantReply)
        assert app.clipboard == reply.text
        await pilot.press("f6")
        assert app.clipboard.startswith("def ") and "```" not in app.clipboard


async def test_selecting_a_card_opens_the_full_answer(wire_config, llm_server):
    config = wire_config()
    llm_server.script("ref-b", Reply(text="## Full answer\n\nWith *markdown*."))
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        await run_turn(pilot, "q")
        card = app.query_one(ReferenceSidebar).card(1)
        card.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ReferenceDetail)
        assert app.screen.text == "## Full answer\n\nWith *markdown*."
        await pilot.press("escape")
        await pilot.pause()
        await pilot.click(ReferenceCard)
        await pilot.pause()
        assert isinstance(app.screen, ReferenceDetail)


async def test_failed_reference_shows_on_its_card_and_the_turn_goes_on(wire_config, llm_server):
    config = wire_config()
    llm_server.script("ref-a", Reply(status=401, error="bad key for ref-a"))
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        await run_turn(pilot, "q")
        card = app.query_one(ReferenceSidebar).card(0)
        assert card.status == "failed" and "HTTP 401: bad key for ref-a" in card.error
        assert app.query_one(AssistantReply).text == "ok from agg"


async def test_aggregator_failure_is_an_error_block_and_the_conversation_survives(wire_config, llm_server):
    config = wire_config()
    llm_server.script("agg", [Reply(status=500, error="the model crashed"), Reply(text="recovered")])
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        await run_turn(pilot, "q")
        reply = app.query_one(AssistantReply)
        assert reply.has_class("-failed")
        error = reply.query_one(".reply-error").render()
        assert "wire:agg failed: HTTP 500: the model crashed" in str(error)
        await run_turn(pilot, "try again")
        assert app.query(AssistantReply).last().text == "recovered"


async def test_a_connection_closed_mid_reply_keeps_the_text_and_says_so(wire_config, llm_server):
    config = wire_config()
    llm_server.script("agg", [Reply(text="half an answer and then", drop_after=3), Reply(text="recovered")])
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        await run_turn(pilot, "q")
        reply = app.query_one(AssistantReply)
        assert reply.has_class("-cut_off")
        assert reply.text == "half an answer"
        warning = str(reply.query_one(".reply-warning").render())
        assert "the connection was closed mid-reply after 14 characters" in warning.replace("\n", " ")
        await run_turn(pilot, "try again")
        assert app.query(AssistantReply).last().text == "recovered"


async def test_sidebar_toggles_and_new_conversation_clears(wire_config, llm_server):
    config = wire_config()
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("f4")
        assert not app.query_one(ReferenceSidebar).display
        await pilot.press("f4")
        assert app.query_one(ReferenceSidebar).display
        await run_turn(pilot, "q")
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert app.session.messages == [] and not app.query(AssistantReply)


async def test_keymap_in_config_remaps_bindings(wire_config, llm_server):
    config = _two_presets(wire_config)
    config.keymap = {"next_preset": "f8"}
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("f3")
        assert app.session.preset.name == "wire"
        await pilot.press("f8")
        assert app.session.preset.name == "wire2"


async def test_palette_has_a_switch_entry_per_preset(wire_config, llm_server):
    config = _two_presets(wire_config)
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Switch preset: wire2")

        def wire2_highlighted() -> bool:
            """The palette has searched and shows the entry first: Enter runs the highlighted one."""
            if not isinstance(app.screen, CommandPalette):
                return False
            option = app.screen.query_one(CommandList).highlighted_option
            return option is not None and "Switch preset: wire2" in str(option.prompt)

        await wait_until(pilot, wire2_highlighted)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.session.preset.name == "wire2", timeout=3)


async def test_theme_choice_is_remembered(home):
    config = load_config()
    app = MoAChatApp(config, config.preset("demo"))
    async with app.run_test(size=(100, 30)) as pilot:
        app.theme = "nord"
        await pilot.pause()
    assert load_settings()["theme"] == "nord"
    again = MoAChatApp(config, config.preset("demo"))
    assert again.theme == "nord"


async def test_no_key_start_says_demo_in_the_log(home):
    config = load_config()
    app = MoAChatApp(config, config.preset("demo"), notice="starting on the offline demo preset")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        notices = [str(n.render()) for n in app.query(NoticeLine)]
        assert any("offline demo" in n for n in notices)


async def test_the_log_follows_a_streaming_reply_until_the_user_scrolls_up(wire_config, llm_server):
    config = wire_config()
    # 80 s of text at 10 lines a second: it outlasts the test, which cancels at the end.
    paragraphs = [f"Paragraph {i} of a long answer that keeps coming.\n\n" for i in range(400)]
    llm_server.script("agg", Reply(pieces=paragraphs, text="".join(paragraphs), piece_delay=0.2))
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.chat.chat_log
        await send(pilot, "write a lot")
        await wait_until(pilot, lambda: log.max_scroll_y > 10, describe=lambda: f"max_scroll_y={log.max_scroll_y}")
        await wait_until(pilot, lambda: log.scroll_y == log.max_scroll_y > 10)  # following the newest text

        await pilot.press("pageup")  # from the prompt, which keeps focus
        assert isinstance(app.focused, PromptInput)
        held = log.scroll_y
        assert held < log.max_scroll_y
        grown = log.max_scroll_y + 10
        await wait_until(pilot, lambda: log.max_scroll_y > grown)
        assert log.scroll_y == held  # the reader's place is kept while the reply grows

        while log.scroll_y < log.max_scroll_y:
            await pilot.press("pagedown")
        grown = log.max_scroll_y + 10
        await wait_until(pilot, lambda: log.max_scroll_y > grown)
        await wait_until(pilot, lambda: log.scroll_y == log.max_scroll_y)  # following again
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.chat.turn_running)
