"""Keys and focus: the bytes terminals send, read as the keys pressed; keys acting in the order typed; focus
that is visible and never swallows typing; scrolling; honest copying; @path completion; the footer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from moa_chat.config import load_config
from moa_chat.providers.loopback_server import Reply
from moa_chat.store import SessionStore
from moa_chat.tui.keys import KeyParser, help_rows, key_texts, use_key_parser
from moa_chat.tui.screens.help import HelpScreen
from moa_chat.tui.screens.reference_detail import ReferenceDetail
from moa_chat.tui.widgets.chat_log import EarlierMessages
from moa_chat.tui.widgets.path_completion import PathCompletion, candidates, mention_at
from moa_chat.tui.widgets.prompt_input import PromptInput
from moa_chat.tui.widgets.reference_card import ReferenceCard
from moa_chat.tui.widgets.sidebar import ReferenceSidebar
from moa_chat.tui.widgets.tool_block import ToolHeader
from textual import events
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static
from textual_private import driver_input_parser, textual_input_parser
from tui_helpers import make_app, run_turn, send, stored_session, wait_until

FOOTER_KEY = "FooterKey"  # the footer's key widget, by its type's name (Textual does not export the class)

# ----------------------------------------------------------------------------------------- raw bytes → keys


def keys_from(data: str, parser_class: type = KeyParser) -> list[str]:
    parser = parser_class()
    # End of input flushes what waits for more (a lone ESC, ESC CR), as the driver's timeout would.
    parsed = [*parser.feed(data), *parser.feed("")]
    return [event.key if isinstance(event, events.Key) else type(event).__name__ for event in parsed]


@pytest.mark.parametrize(
    ("terminal", "data", "keys"),
    [
        ("any: Enter", "\r", ["enter"]),
        ("any: Ctrl+J is LF", "\n", ["ctrl+j"]),
        ("kitty protocol: Ctrl+J", "\x1b[106;5u", ["ctrl+j"]),
        ("xterm metaSendsEscape, GNOME Terminal, tmux: Alt+Enter", "\x1b\r", ["alt+enter"]),
        ("xterm 8-bit input: Alt+Enter", "\x8d", ["alt+enter"]),
        ("kitty protocol: Alt+Enter", "\x1b[13;3u", ["alt+enter"]),
        ("kitty protocol: Shift+Enter", "\x1b[13;2u", ["shift+enter"]),
        ("xterm modifyOtherKeys, tmux extended-keys: Shift+Enter", "\x1b[27;2;13~", ["shift+enter"]),
        ("xterm modifyOtherKeys: Ctrl+Enter", "\x1b[27;5;13~", ["ctrl+enter"]),
        ("xterm modifyOtherKeys: Ctrl+A", "\x1b[27;5;97~", ["ctrl+a"]),
        ("xterm, GNOME Terminal, tmux: Shift+F3", "\x1b[1;2R", ["shift+f3"]),
        ("xterm: Ctrl+F3", "\x1b[1;5R", ["ctrl+f3"]),
        ("kitty protocol: Shift+F3", "\x1b[13;2~", ["shift+f3"]),
        ("any: F3", "\x1bOR", ["f3"]),
        ("any: Esc alone", "\x1b", ["escape"]),
        ("xterm: End / Ctrl+End", "\x1b[F\x1b[1;5F", ["end", "ctrl+end"]),
        ("a burst", "a\nb\x1b\rc", ["a", "ctrl+j", "b", "alt+enter", "c"]),
        ("two Alt+Enters in a burst", "a\x1b\rb\x1b\rc", ["a", "alt+enter", "b", "alt+enter", "c"]),
    ],
)
def test_the_bytes_terminals_send_read_as_the_keys_pressed(terminal, data, keys):
    assert keys_from(data) == keys


def test_textual_alone_reads_alt_enter_as_enter_and_shift_f3_as_a_cursor_report():
    # Why KeyParser exists: with Textual's parser, Alt+Enter sends the prompt and Shift+F3 never arrives. When
    # this fails, Textual reads these itself now: KeyParser's part for them can go (tui/textual_internals.py).
    textual = textual_input_parser()
    assert keys_from("\x1b\r", textual) == ["enter"]
    assert keys_from("a\x1b\rb\x1b\rc", textual) == ["a", "circumflex_accent", "enter", "b", "enter", "c"]
    assert keys_from("\x1b[1;2R", textual) == ["CursorPosition"]
    assert keys_from("\x1b[27;2;13~", textual) == ["shift+\r"]


def test_the_app_reads_the_terminal_with_key_parser():
    use_key_parser()
    use_key_parser()  # idempotent
    assert driver_input_parser("textual.drivers.linux_driver") is KeyParser


async def post_bytes(pilot, data: str) -> None:
    """Deliver `data` to the app as the driver does: parsed, every key queued at once (a burst)."""
    app = pilot.app
    parser = KeyParser()
    for event in [*parser.feed(data), *parser.feed("")]:
        event.set_sender(app)
        app.post_message(event)
    await pilot.pause()


# ---------------------------------------------------------------------------------------------- new line


async def test_a_burst_of_keys_lands_in_the_prompt_in_order(home):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(100, 30)) as pilot:
        prompt = app.query_one(PromptInput)
        # Ctrl+J (LF) and Alt+Enter (ESC CR) among letters, then an edit: each acts where it was typed.
        await post_bytes(pilot, "one\ntwo\x1b\rthree\n\nfour")
        await wait_until(pilot, lambda: "four" in prompt.text, describe=lambda: repr(prompt.text))
        assert prompt.text == "one\ntwo\nthree\n\nfour"
        await post_bytes(pilot, "x\x7fy\x1b[Dz")  # x, Backspace, y, Left, z
        await wait_until(pilot, lambda: prompt.text.endswith("fourzy"), describe=lambda: repr(prompt.text))
        assert not app.query("UserPrompt")  # nothing was sent on the way


async def test_shift_enter_and_alt_enter_add_a_line_and_enter_sends(wire_config, llm_server):
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press(*"a", "shift+enter", *"b", "alt+enter", *"c", "ctrl+j", *"d", "enter")
        await wait_until(pilot, lambda: bool(llm_server.requests_for("agg")))
        assert llm_server.requests_for("agg")[0].messages[0]["content"] == "a\nb\nc\nd"


async def test_shift_f3_from_the_terminals_bytes_steps_back_a_preset(home):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(100, 30)) as pilot:
        start = app.session.preset.name
        await pilot.press("f3")
        await wait_until(pilot, lambda: app.session.preset.name != start)
        await post_bytes(pilot, "\x1b[1;2R")  # Shift+F3 as xterm and tmux send it
        await wait_until(pilot, lambda: app.session.preset.name == start)


async def test_help_names_the_keys_that_work(home):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        keys = key_texts(app.chat)
        assert keys["previous_preset"] == "Shift+F3"  # not "Shift+F3 / F15"
        assert keys["newline"].startswith("Ctrl+J")  # the hint and the welcome name the first
        rows = dict(help_rows(app.chat))
        assert "kitty" in rows["Ctrl+J / Alt+Enter / Shift+Enter"]
        assert rows["Tab"].startswith("after @")
        assert rows["Ctrl+End"].startswith("jump to the newest")  # End too, said there: the prompt keeps End
        # Everything the footer leaves out is still in the help.
        for binding_id in ("reask", "panel", "copy_code", "next_preset", "scroll_log_up", "next_version"):
            assert binding_id in keys


# ------------------------------------------------------------------------------------------------- focus


def working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder of its own (the test's MOA_CHAT_HOME is in tmp_path): the current one for the test."""
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


async def test_the_prompt_has_focus_from_the_first_frame(home, monkeypatch):
    # Textual's default gave it to the first focusable widget, a reference card, and the prompt took it a frame
    # later: in a terminal the card's focus showed, then moved.
    given: list[str] = []
    set_focus = Screen.set_focus

    def recording(self: Screen, widget: Widget | None, *args: object, **kwargs: object) -> None:
        if widget is not None:
            given.append(type(widget).__name__)
        set_focus(self, widget, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Screen, "set_focus", recording)
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert isinstance(app.focused, PromptInput)
    assert given and set(given) == {"PromptInput"}, given


async def test_closing_a_references_answer_gives_the_keys_back_to_the_prompt(home):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 40)) as pilot:
        await run_turn(pilot, "How do I test a command-line tool?")
        await pilot.press("tab")
        assert isinstance(app.focused, ReferenceCard)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ReferenceDetail))
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, ReferenceDetail))
        assert isinstance(app.focused, PromptInput)
        await pilot.press(*"next")
        assert app.query_one(PromptInput).text == "next"


async def test_letters_typed_on_a_card_go_to_the_prompt_and_bound_keys_still_act(home, tmp_path, monkeypatch):
    tmp_path = working_folder(tmp_path, monkeypatch)
    (tmp_path / "README.md").write_text("# Readme\n")
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 40)) as pilot:
        prompt = app.query_one(PromptInput)
        await run_turn(pilot, "What files are in this folder and what does README.md say?")
        card = app.query_one(ReferenceSidebar).card(0)
        app.chat.set_focus(card)
        await post_bytes(pilot, "why so?")  # a burst: the first letter moves focus, the rest follow in order
        await wait_until(pilot, lambda: prompt.text == "why so?", describe=lambda: repr(prompt.text))
        assert app.focused is prompt
        # A tool call's header takes Space (it opens the call): that key is not the prompt's.
        header = app.query(ToolHeader).first()
        app.chat.set_focus(header)
        await pilot.press("space")
        assert app.focused is header and prompt.text == "why so?"
        # Nothing focused at all: typing still lands in the prompt.
        app.chat.set_focus(None)
        await pilot.press("!")
        assert prompt.text == "why so?!"


async def test_the_log_is_no_tab_stop_and_every_tab_stop_shows_its_focus(home, tmp_path, monkeypatch):
    tmp_path = working_folder(tmp_path, monkeypatch)
    (tmp_path / "README.md").write_text("# Readme\n")
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 40)) as pilot:
        await run_turn(pilot, "What files are in this folder and what does README.md say?")
        marker = EarlierMessages()
        await app.chat.chat_log.mount(marker, before=0)
        marker.show_count(3)
        # Tab from the prompt goes to the panel; the log's stops are on the way back (Shift+Tab).
        stops = []
        for key in ("tab", "shift+tab"):
            app.chat.focus_prompt()
            await pilot.press(key)
            while app.focused is not None and app.focused not in stops:
                stops.append(app.focused)
                await pilot.press(key)
        kinds = {type(w).__name__ for w in stops}
        assert "ChatLog" not in kinds
        assert {"PromptInput", "ReferenceCard", "ToolHeader", "EarlierMessages"} <= kinds

        def look(widget) -> tuple:
            s = widget.styles
            return (s.background, s.border_left, s.border_top, s.text_style, s.tint, s.outline_left)

        for widget in stops:
            app.chat.set_focus(widget)
            await pilot.pause()
            focused = look(widget)
            app.chat.set_focus(None)
            await pilot.pause()
            assert look(widget) != focused, f"{type(widget).__name__} looks the same focused and not"


# --------------------------------------------------------------------------------------------- scrolling


def at_bottom(log) -> bool:
    return log.max_scroll_y > 0 and log.scroll_y == log.max_scroll_y


async def turn_at_bottom(pilot, text: str) -> None:
    """Run a turn, then wait for the log to be laid out taller and scrolled to its end."""
    log = pilot.app.chat.chat_log
    before = log.max_scroll_y
    await run_turn(pilot, text)
    await wait_until(pilot, lambda: log.max_scroll_y > before, describe="the log to grow")
    await wait_until(pilot, lambda: at_bottom(log), describe=lambda: f"{log.scroll_y} of {log.max_scroll_y}")


async def test_page_down_at_the_bottom_keeps_following(home):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.chat.chat_log
        await turn_at_bottom(pilot, "How do I test a command-line tool?")
        await pilot.press("pagedown")  # at the bottom already: Textual let go of the anchor, moving nothing
        grown = log.max_scroll_y + 20
        await log.mount(Static("\n".join(["more text of a reply"] * 40)))  # the reply grows on
        await wait_until(pilot, lambda: log.max_scroll_y > grown)
        await wait_until(pilot, lambda: at_bottom(log), describe=lambda: f"{log.scroll_y} of {log.max_scroll_y}")


async def test_sending_jumps_to_the_bottom_and_end_keys_jump_there_too(home):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.chat.chat_log
        prompt = app.query_one(PromptInput)
        await run_turn(pilot, "How do I test a command-line tool?")
        await run_turn(pilot, "And a second question?")
        await pilot.press("pageup", "pageup")
        assert not at_bottom(log)
        await turn_at_bottom(pilot, "A third one?")

        await pilot.press("pageup")
        assert not at_bottom(log)
        await pilot.press("ctrl+end")  # from the prompt
        await wait_until(pilot, lambda: at_bottom(log))

        await pilot.press("pageup")
        prompt.load_text("some words")
        prompt.move_cursor((0, 0))
        await pilot.press("end")  # in the prompt, End is the end of the line
        assert prompt.cursor_location == (0, 10) and not at_bottom(log)
        app.chat.set_focus(app.query_one(ReferenceSidebar).card(0))
        await pilot.press("end")  # elsewhere, the bottom of the conversation
        await wait_until(pilot, lambda: at_bottom(log))


@pytest.mark.parametrize("modal", ["help", "reference"])
async def test_page_keys_in_a_modal_scroll_the_modal_not_the_log(wire_config, llm_server, modal):
    long = "\n\n".join(f"Paragraph {i} of a long answer." for i in range(60))
    llm_server.script("ref-a", Reply(text=long))
    llm_server.script("agg", Reply(text=long))
    app = make_app(wire_config(), "wire")
    async with app.run_test(size=(90, 24)) as pilot:
        log = app.chat.chat_log
        await run_turn(pilot, "q")
        await wait_until(pilot, lambda: at_bottom(log))
        if modal == "help":
            await pilot.press("f1")
            await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        else:
            app.chat.set_focus(app.query_one(ReferenceSidebar).card(0))
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, ReferenceDetail))
        await pilot.pause()
        body = app.focused
        assert body is not None and body.max_scroll_y > 0, "the modal's text should be taller than the modal"
        await pilot.press("pagedown")
        await wait_until(pilot, lambda: body.scroll_y > 0)
        await pilot.press("pageup")
        await wait_until(pilot, lambda: body.scroll_y == 0)
        assert at_bottom(log)  # the log behind did not move
        await pilot.press("escape")
        await turn_at_bottom(pilot, "again")


# ------------------------------------------------------------------------------------------------- copy


def fake_tool(folder: Path, name: str, body: str) -> None:
    script = folder / name
    script.write_text(f"#!/bin/sh\nPATH=/usr/bin:/bin\n{body}\n")
    script.chmod(0o755)


async def toasts(pilot) -> list[str]:
    return [str(t.render()) for t in pilot.app.screen.query("Toast")]


async def test_f5_copies_with_the_system_tool_and_says_so(home, tmp_path, monkeypatch):
    tools = tmp_path / "bin"
    tools.mkdir()
    fake_tool(tools, "xclip", f'cat > "{tmp_path}/clipboard"')
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await run_turn(pilot, "Give me a helper function")
        await pilot.press("f5")
        await wait_until(
            pilot, lambda: any("with xclip" in t for t in [str(x.render()) for x in app.screen.query("Toast")])
        )
        reply = app.chat.last_reply
        assert reply is not None
        assert (tmp_path / "clipboard").read_text() == reply.text == app.clipboard
        assert any(t.startswith("Copied the last reply (") for t in await toasts(pilot))


async def test_f6_under_tmux_without_a_tool_says_what_tmux_needs(home, tmp_path, monkeypatch):
    tools = tmp_path / "bin"
    tools.mkdir()
    fake_tool(tools, "tmux", "echo external")
    monkeypatch.setenv("PATH", str(tools))
    monkeypatch.setenv("TMUX", "/tmp/tmux-0/default,1,0")
    for variable in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(variable, raising=False)
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await run_turn(pilot, "Give me a helper function")
        await pilot.press("f6")
        await wait_until(pilot, lambda: any("set-clipboard" in str(t.render()) for t in app.screen.query("Toast")))
        text = " ".join(await toasts(pilot))
        assert "Sent the last code block" in text and "OSC 52" in text
        assert "set -g set-clipboard on" in text and "'external'" in text
        assert "Copied" not in text
        assert app.clipboard.startswith("def ")  # Ctrl+V in the prompt pastes it either way


# ------------------------------------------------------------------------------------------ @path completion


def test_mentions_and_candidates(tmp_path):
    tmp_path = tmp_path / "work"  # beside the test's MOA_CHAT_HOME, not around it
    tmp_path.mkdir()
    for name in ("README.md", "requirements.txt", "setup.py", ".env", "my notes.txt", "a@b"):
        (tmp_path / name).write_text("x")
    for folder in ("src", "src/pkg", ".git", "node_modules", ".venv", "__pycache__", "docs"):
        (tmp_path / folder).mkdir()
    (tmp_path / "src" / "main.py").write_text("x")
    (tmp_path / "src" / "mainline.py").write_text("x")

    assert mention_at("see @RE", 7).typed == "RE"
    assert mention_at("see @src/ma and more", 11).typed == "src/ma"
    assert mention_at("mail a@b", 8) is None  # not at the start of a word
    assert mention_at("see @", 5).typed == ""

    every = candidates("", tmp_path)
    assert every.names == ("docs/", "README.md", "requirements.txt", "setup.py", "src/")  # no .git, no spaces
    assert candidates(".", tmp_path).names == (".env",)  # hidden names once a dot is typed; never .git/.venv
    assert candidates("re", tmp_path).names == ("requirements.txt",)  # the case typed first
    assert candidates("rea", tmp_path).names == ("README.md",)  # any case when nothing matches it
    main = candidates("src/m", tmp_path)
    assert main.folder == "src/" and main.names == ("main.py", "mainline.py") and main.common == "main"
    assert candidates("src/pkg/", tmp_path).names == ()
    assert candidates("../", tmp_path) is None and candidates("/etc/", tmp_path) is None


async def test_tab_completes_an_at_path_and_lists_the_choices(home, tmp_path, monkeypatch):
    tmp_path = working_folder(tmp_path, monkeypatch)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("print('hi')\n")
    (tmp_path / "src" / "mainline.py").write_text("x = 1\n")
    (tmp_path / "README.md").write_text("# Readme\n")
    (tmp_path / "node_modules").mkdir()
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(100, 30)) as pilot:
        prompt = app.query_one(PromptInput)
        dropdown = app.query_one(PathCompletion)
        await pilot.press(*"read @R", "tab")  # one match: taken whole, and a space to go on typing
        assert prompt.text == "read @README.md " and not dropdown.display

        await pilot.press(*"and @s", "tab")  # one folder: taken, and what is in it listed
        assert prompt.text.endswith("@src/")
        await wait_until(pilot, lambda: dropdown.is_open)
        assert [str(o.prompt) for o in dropdown.options] == ["src/main.py", "src/mainline.py"]
        await pilot.press("m", "tab")  # the list follows the typing; Tab completes what the names share
        assert prompt.text.endswith("@src/main")
        assert dropdown.is_open and dropdown.option_count == 2
        await pilot.press("down", "enter")  # ↓ chooses, Enter takes (and does not send)
        assert prompt.text == "read @README.md and @src/mainline.py "
        assert not dropdown.display and not app.query("UserPrompt")

        await pilot.press(*"@", "tab")
        await wait_until(pilot, lambda: dropdown.is_open)
        assert "node_modules/" not in [str(o.prompt) for o in dropdown.options]
        await pilot.press("escape")  # closes the list, nothing else
        assert not dropdown.display and prompt.text.endswith("@")
        await pilot.press("backspace", "tab")  # no @ at the cursor: Tab moves the focus as ever
        assert not isinstance(app.focused, PromptInput)

        app.chat.set_focus(prompt)
        await pilot.press("enter")  # sent, with both files attached
        await wait_until(pilot, lambda: bool(app.query("UserPrompt")))
        message = app.query_one("UserPrompt")
        assert [chip.path for chip in message.attachments] == ["README.md", "src/mainline.py"]


async def test_a_click_on_a_listed_name_takes_it(home, tmp_path, monkeypatch):
    tmp_path = working_folder(tmp_path, monkeypatch)
    for name in ("alpha.txt", "beta.txt"):
        (tmp_path / name).write_text("x")
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(100, 30)) as pilot:
        prompt = app.query_one(PromptInput)
        dropdown = app.query_one(PathCompletion)
        await pilot.press("@", "tab")
        await wait_until(pilot, lambda: dropdown.is_open)
        # Over the prompt's line (no room under it), lined up with the @.
        assert dropdown.region.bottom <= prompt.cursor_screen_offset.y
        await pilot.click(dropdown, offset=(3, 2))  # the second name (inside the border)
        await wait_until(pilot, lambda: prompt.text == "@beta.txt ", describe=lambda: repr(prompt.text))
        assert app.focused is prompt and not dropdown.display


# ------------------------------------------------------------------------------------------------ footer


def footer_keys(app) -> list[str]:
    return [f"{key.key} {key.description}".strip() for key in app.screen.query(FOOTER_KEY)]


async def test_the_footer_shows_what_can_be_done_now(home, wire_config, llm_server):
    llm_server.script("agg", Reply(pieces=["slow "] * 30, text="slow " * 30, piece_delay=0.1))
    config = wire_config()
    app = make_app(config, "wire", session=stored_session(config, SessionStore(home / "sessions.db")))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        idle = footer_keys(app)
        assert idle[:3] == ["f1 Help", "f2 Presets", "ctrl+o Sessions"]
        assert "ctrl+n New chat" in idle and "ctrl+q Quit" in idle
        assert not any(k.startswith(("escape", "f5", "f8", "ctrl+g", "f4")) for k in idle)

        await send(pilot, "q")
        await wait_until(pilot, lambda: footer_keys(app)[:1] == ["escape Cancel"], describe=lambda: footer_keys(app))
        assert not any(k.startswith(("f5", "f8", "ctrl+g")) for k in footer_keys(app))  # not while it runs

        await wait_until(pilot, lambda: not app.chat.turn_running, timeout=15)
        await wait_until(pilot, lambda: "f8 Edit" in footer_keys(app), describe=lambda: footer_keys(app))
        after = footer_keys(app)
        assert after[:5] == ["f1 Help", "f5 Copy", "f8 Edit", "ctrl+g Regenerate", "f2 Presets"]
        assert not any(k.startswith("escape") for k in after)

        await pilot.press("f8")  # editing: Esc stops the edit, and the footer says so
        await wait_until(pilot, lambda: "escape Stop editing" in footer_keys(app), describe=lambda: footer_keys(app))
        await pilot.press("escape")

        await pilot.press("ctrl+g")  # a second version: the version keys show
        await wait_until(pilot, lambda: "f9" in " ".join(footer_keys(app)), timeout=15)


async def test_a_narrow_footer_offers_the_hidden_sidebar(home):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(80, 30)) as pilot:
        await wait_until(pilot, lambda: "f4 Sidebar" in footer_keys(app), describe=lambda: footer_keys(app))
        await pilot.resize_terminal(120, 30)  # wide enough for the sidebar to show: no need to offer it
        await wait_until(pilot, lambda: "f4 Sidebar" not in footer_keys(app), describe=lambda: footer_keys(app))
        await pilot.resize_terminal(80, 30)
        await wait_until(pilot, lambda: "f4 Sidebar" in footer_keys(app), describe=lambda: footer_keys(app))
        await run_turn(pilot, "How do I test a command-line tool?")
        # More keys than 80 columns hold: the least needed give way, and none runs under the palette's.
        await wait_until(pilot, lambda: "f5 Copy" in footer_keys(app), describe=lambda: footer_keys(app))
        keys = list(app.screen.query(FOOTER_KEY))
        palette = next(k for k in keys if k.has_class("-command-palette"))
        assert all(k.region.right <= palette.region.x for k in keys if k is not palette)
        assert {"f1 Help", "ctrl+q Quit", "f4 Sidebar"} <= set(footer_keys(app))


async def test_tab_from_the_prompt_reaches_the_first_card_however_long_the_chat(home, tmp_path, monkeypatch):
    """With four exchanges, Tab from the prompt landed on an earlier message in the log (7 tries in 8): the view
    jumped back and Enter did nothing there. It goes to the first reference card, and Shift+Tab comes back."""
    tmp_path = working_folder(tmp_path, monkeypatch)
    (tmp_path / "README.md").write_text("# Readme\n")
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 40)) as pilot:
        for n in range(4):
            await run_turn(pilot, f"question {n}: what files are in this folder?")
        prompt = app.query_one(PromptInput)
        assert app.focused is prompt
        assert any(app.chat.chat_log in w.ancestors for w in app.screen.focus_chain), "the log has tab stops"
        await pilot.press("tab")
        first = app.query_one(ReferenceSidebar).card(0)
        assert app.focused is first
        await pilot.press("shift+tab")
        assert app.focused is prompt
