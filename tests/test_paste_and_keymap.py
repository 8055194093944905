"""A 1 MB paste leaves the TUI responsive and is sent whole; a `keymap:` typo is reported at start."""

from __future__ import annotations

import pytest
from moa_chat.tui.keys import check_keymap, key_is_valid, keymap_notice, known_binding_ids, suggest_key
from moa_chat.tui.screens.help import HelpScreen
from moa_chat.tui.widgets.chat_log import UserPrompt, shown_prompt
from moa_chat.tui.widgets.prompt_input import PromptInput
from moa_chat.tui.widgets.reply import AssistantReply
from moa_chat.tui.widgets.sidebar import ReferenceSidebar
from textual import events
from tui_helpers import make_app, send, wait_until

LINE = "2024-05-01 12:00:00 INFO GET /api/v1/items?page=3 200 in 12 ms from 10.0.0.7 ok\n"  # 80 characters
MEGABYTE = LINE * 12_500  # 1,000,000 characters on 12,500 lines


def screen_line(widget, y: int = 0) -> str:
    """What the widget paints on its line `y` now."""
    return widget.render_line(y).text


# --------------------------------------------------------------------------------------------- the 1 MB paste


async def test_a_megabyte_paste_keeps_the_prompt_responsive_and_is_sent_whole(wire_config, llm_server):
    assert len(LINE) == 80 and len(MEGABYTE) == 1_000_000
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        prompt = app.query_one(PromptInput)
        prompt.focus()
        prompt.post_message(events.Paste(MEGABYTE))
        await pilot.pause()
        # One line stands for it in the box, and it is there once (not inserted again on the way back).
        assert prompt.document.line_count == 1
        assert prompt.text == "[pasted text #1 · 12,500 lines · 1,000,000 characters]"
        assert prompt.full_text == MEGABYTE

        # Keys after the paste are handled and painted.
        await pilot.press("home", *"Summarise: ")
        await pilot.pause()
        assert prompt.text.startswith("Summarise: [pasted text #1")
        assert screen_line(prompt).startswith("Summarise: [pasted text #1")

        await pilot.press("enter")
        await wait_until(pilot, lambda: bool(llm_server.requests_for("agg")))
        sent = llm_server.requests_for("agg")[0].messages[0]["content"]
        assert sent == "Summarise: " + MEGABYTE.rstrip("\n")  # whole; the prompt is stripped, as any
        for model in ("ref-a", "ref-b", "ref-c"):  # each reference read all of it too
            assert [m["content"] for m in llm_server.requests_for(model)[0].messages if m["role"] == "user"] == [sent]

        # The log shows its beginning and what is not shown, not 12,500 lines above the reply.
        message = app.query_one(UserPrompt)
        assert message.text == sent
        shown = message.render().plain
        assert shown.startswith("Summarise: 2024-05-01") and len(shown) < 5_000
        assert "… 12,460 more lines not shown here · 1,000,010 characters in all" in shown
        await wait_until(pilot, lambda: app.query_one(AssistantReply).finished and not app.chat.turn_running)
        assert app.query_one(AssistantReply).text == "ok from agg"

        # ↑ brings it back as a placeholder again, and it would be sent whole again.
        assert prompt.text == ""
        await pilot.press("up")
        assert prompt.text == "[pasted text #1 · 12,500 lines · 1,000,010 characters]"
        assert prompt.full_text == sent
        await pilot.press("down")
        assert prompt.text == ""


async def test_a_placeholder_is_deleted_whole_and_short_pastes_stay_inline(wire_config, llm_server):
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        prompt = app.query_one(PromptInput)
        prompt.focus()
        await pilot.press(*"see ")
        app.post_message(events.Paste("x" * 20_000))  # the way the driver delivers a bracketed paste
        await pilot.pause()
        assert prompt.text == "see [pasted text #1 · 20,000 characters]"
        await pilot.press("backspace")
        assert prompt.text == "see "
        assert prompt.full_text == "see "

        app.post_message(events.Paste("one\r\ntwo\rthree"))
        await pilot.pause()
        assert prompt.text == "see one\ntwo\nthree"  # inline, editable, newlines as the box keeps them

        # A long paste's newlines are the box's too: what is sent does not depend on its length.
        prompt.load_text("")
        app.post_message(events.Paste("a\r\n" * 300))
        await pilot.pause()
        assert prompt.full_text == "a\n" * 300

        # Ctrl+V pastes what moa-chat copied (a long reply, say) the same way.
        prompt.load_text("")
        app.copy_to_clipboard("z" * 30_000)
        await pilot.press("ctrl+v")
        assert prompt.text == "[pasted text #3 · 30,000 characters]"  # numbered on until the prompt is sent
        assert prompt.full_text == "z" * 30_000


async def test_empty_and_whitespace_only_prompts_are_not_sent(wire_config, llm_server):
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        prompt = app.query_one(PromptInput)
        await send(pilot, "")
        await send(pilot, "  \n\t \n ")
        prompt.load_text("")
        app.post_message(events.Paste(" \n" * 20_000))  # a placeholder for nothing but whitespace
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert not app.query(UserPrompt) and not llm_server.requests
        await send(pilot, "  a real question  ")
        await wait_until(pilot, lambda: bool(llm_server.requests_for("agg")))
        assert llm_server.requests_for("agg")[0].messages[0]["content"] == "a real question"


@pytest.mark.parametrize(
    ("text", "shown_whole"),
    [("short", True), ("line\n" * 60, True), ("x" * 6_000, True), ("line\n" * 61, False), ("x" * 6_001, False)],
    ids=["short", "60 lines", "6000 characters", "61 lines", "6001 characters"],
)
def test_the_log_shows_a_long_prompt_cut(text, shown_whole):
    shown = shown_prompt(text).plain
    assert (shown == text) is shown_whole
    if not shown_whole:
        more = "21 more lines" if "\n" in text else "2,001 more characters"
        assert shown.endswith(f"\n… {more} not shown here · {len(text):,} characters in all")


def test_a_megabyte_on_one_line_is_cut_by_characters():
    shown = shown_prompt("y" * 1_000_000).plain
    assert shown == "y" * 4_000 + "\n… 996,000 more characters not shown here · 1,000,000 characters in all"


# --------------------------------------------------------------------------------------------- keymap checks


@pytest.mark.parametrize(
    "key",
    [
        "f1",
        "f24",
        "f25",  # kitty keyboard protocol
        "ctrl+q",
        "ctrl+shift+up",
        "shift+enter",
        "alt+enter",
        "ctrl+@",
        "ctrl+space",
        "ctrl+question_mark",
        "ctrl+minus",
        "escape",
        "pageup",
        "shift+tab",
        "?",
        "A",
        "ctrl+π",
        "super+x",
        "alt+shift+x",
    ],
)
def test_keys_textual_reports_are_valid(key):
    assert key_is_valid(key)


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("ctrl+shft+x", "ctrl+shift+x"),
        ("shift+ctrl+x", "ctrl+shift+x"),  # Textual orders modifiers: this one would never fire
        ("F2", "f2"),
        ("Ctrl+Q", "ctrl+q"),
        ("ctrl+A", "ctrl+a"),
        ("ctrl+?", "ctrl+question_mark"),
        ("ctrl+hyphen_minus", "ctrl+minus"),
        ("esc", "escape"),
        ("pgdn", "pagedown"),
        ("ctrl-x", "ctrl+x"),
        ("f99", None),
        ("ctrl+", None),
        ("ctrl+ctrl+x", "ctrl+x"),
        ("hyper+nothing_at_all", None),
    ],
)
def test_keys_textual_never_reports_are_invalid_with_a_suggestion(key, suggestion):
    assert not key_is_valid(key)
    assert suggest_key(key) == suggestion


def test_known_binding_ids_cover_the_app_its_screens_and_widgets():
    import moa_chat.tui.app  # noqa: F401  (imports every screen and widget)

    ids = known_binding_ids()
    assert {"help", "quit", "next_preset", "newline", "approve_once", "close_sessions", "copy_reference"} <= set(ids)
    assert ids == sorted(set(ids))


def test_check_keymap_keeps_what_works_and_says_what_does_not():
    known = ["help", "next_preset", "quit", "toggle_sidebar"]
    keymap = {"next_prest": "f8", "help": "f99", "quit": "ctrl+q, F2", "toggle_sidebar": "f4,ctrl+b", "zzz": "f1"}
    usable, problems = check_keymap(keymap, known)
    assert usable == {"quit": "ctrl+q", "toggle_sidebar": "f4,ctrl+b"}  # help keeps its default: no valid key
    assert problems == [
        "'next_prest' is not a binding id — did you mean 'next_preset'?",
        "help: 'f99' is not a key Textual can bind",
        "quit: 'F2' is not a key Textual can bind — did you mean 'f2'?",
        "'zzz' is not a binding id",
    ]
    notice = keymap_notice("/home/u/.config/moa-chat/config.yaml", problems, "F1")
    assert notice.startswith("/home/u/.config/moa-chat/config.yaml, keymap:\n• 'next_prest'")
    assert notice.endswith("Help (F1) lists the binding ids.")
    assert check_keymap({"help": "f2"}, known) == ({"help": "f2"}, [])


async def test_a_bad_keymap_is_reported_at_start_and_the_defaults_stay(wire_config, llm_server):
    config = wire_config()
    config.keymap = {"next_prest": "f8", "help": "f99", "toggle_sidebar": "ctrl+shft+x"}
    app = make_app(config, "wire")
    async with app.run_test(size=(120, 40), notifications=True) as pilot:  # toasts are off in tests by default
        await wait_until(pilot, lambda: bool(app.screen.query("Toast")))
        toast = str(app.screen.query("Toast").first().render())
        assert "Keymap problems" in toast
        assert f"{config.path}, keymap:" in toast
        assert "'next_prest' is not a binding id — did you mean 'next_preset'?" in toast
        assert "help: 'f99' is not a key Textual can bind" in toast
        assert "toggle_sidebar: 'ctrl+shft+x' is not a key Textual can bind — did you mean 'ctrl+shift+x'?" in toast
        assert "Help (F1) lists the binding ids." in toast
        # The bad entries left their bindings alone; the good one applies.
        await pilot.press("f4")
        assert not app.query_one(ReferenceSidebar).display
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)


async def test_a_good_keymap_raises_no_notice(wire_config, llm_server):
    config = wire_config()
    config.keymap = {"next_preset": "f8", "newline": "ctrl+j,shift+enter"}
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await pilot.pause()
        await pilot.pause()
        assert not app.screen.query("Toast")
