"""What a new user meets in the chat after the demo: the help's last lines, Tab with the panel hidden, a solo
turn's cards, the hints for presets that cannot run, and the copy toast on a small screen."""

from __future__ import annotations

import pytest
from conftest import write_config
from moa_chat.config import load_config
from moa_chat.providers import lifecycle, readiness
from moa_chat.providers.local import INSTALL_HINT as HINT
from moa_chat.tui.app import MoAChatApp
from moa_chat.tui.commands import PresetCommands
from moa_chat.tui.screens.preset_picker import PresetPicker
from moa_chat.tui.widgets.header import StatusHeader
from moa_chat.tui.widgets.markdown import ReplyMarkdown
from test_ollama_picker import FakeOllama
from textual.widgets import OptionList
from tui_helpers import make_app, run_turn, wait_until

# --------------------------------------------------------------------------------------------- F1 help


@pytest.mark.parametrize("size", [(120, 36), (60, 20)])
@pytest.mark.parametrize("keys", [["end"], ["pagedown"] * 8, ["down"] * 80])
async def test_the_help_scrolls_to_its_last_line(home, size, keys):
    """End, PgDn and ↓ reach the footnote's last line ("complete_path."): the scrolling part is never taller
    than the frame's inside, where its last line would sit under the frame."""
    from moa_chat.tui.screens.help import HelpScreen

    app = make_app(load_config(), "demo")
    async with app.run_test(size=size) as pilot:
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
        await pilot.pause()
        panel = app.screen.query_one("#help")
        footnote = app.screen.query_one(ReplyMarkdown)
        assert footnote.source.rstrip().endswith("`complete_path`.")
        inside = panel.content_region
        # The footnote's last line is on screen, inside the frame.
        assert footnote.region.bottom <= inside.bottom, (footnote.region, inside)
        assert footnote.region.bottom > inside.y


# --------------------------------------------------------------------------------------------- presets that cannot run


@pytest.fixture
def ollama_down(home):
    """The ollama provider pointed at a server that is there but not Ollama-ready (503): as good as not running,
    until the test sets `up`."""
    server = FakeOllama()
    server.up = False
    write_config(home, f"providers:\n  ollama:\n    base_url: {server.base_url}\n")
    yield server
    server.stop()


def toast_texts(app) -> list[str]:
    """What the toasts on screen show, as plain text."""
    return [" ".join(str(toast.render().plain).split()) for toast in app.screen.query("Toast")]


def notices_of(app, monkeypatch) -> list[str]:
    notices: list[str] = []
    original = app.chat.notify

    def notify(message, **kwargs):
        notices.append(str(message))
        return original(message, **kwargs)

    monkeypatch.setattr(app.chat, "notify", notify)
    return notices


async def test_f3_from_the_demo_skips_an_ollama_that_is_not_running_and_finds_it_once_it_runs(ollama_down, monkeypatch):
    """F3 skips a preset that cannot run, saying why in the words `moa-chat presets` uses; once Ollama answers
    (asked again every few seconds), F3 stops on it and the notice says what it skips now."""
    config = load_config()
    app = make_app(config, "demo")
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_until(pilot, lambda: app.ollama_checked)
        notices = notices_of(app, monkeypatch)
        seen = []
        for _ in range(len(config.presets)):
            await pilot.press("f3")
            seen.append(app.session.preset.name)
        assert "ollama" not in seen
        reason = f"needs Ollama running at {ollama_down.base_url.removesuffix('/v1')} (start it with `ollama serve`)"
        assert readiness(config, config.preset("ollama")).reason == reason
        [skips] = [n for n in notices if n.startswith("F3 skips")]
        assert f"ollama ({reason})" in skips
        # The local extra's hint keeps its [local]: notices are not read as markup.
        lacking = f"needs the local extra (llama-cpp-python): {HINT}"
        monkeypatch.setitem(lifecycle.PREREQUISITES, "local", lambda: lacking)
        ollama_down.up = True
        app.recheck_ollama()
        await wait_until(pilot, lambda: app.ollama_models is not None)
        app.chat.presets.switch("local")
        await pilot.pause()
        notices.clear()
        seen = []
        for _ in range(len(config.presets)):
            await pilot.press("f3")
            seen.append(app.session.preset.name)
        assert "ollama" in seen and "local" not in seen
        [skips] = [n for n in notices if n.startswith("F3 skips")]
        assert f"local (needs the local extra (llama-cpp-python): {HINT})" in skips and "ollama (" not in skips
        await pilot.pause()
        assert any(f"{HINT})" in text for text in toast_texts(app)), toast_texts(app)


async def test_the_picker_the_palette_and_the_header_say_why_ollama_cannot_run(ollama_down, monkeypatch):
    config = load_config()
    reason = readiness(config, config.preset("ollama")).reason
    app = make_app(config, "ollama")
    async with app.run_test(size=(160, 36)) as pilot:
        await wait_until(pilot, lambda: app.ollama_checked)
        await pilot.pause()
        reason = readiness(config, config.preset("ollama")).reason
        assert reason is not None and reason.startswith("needs Ollama running at http://127.0.0.1:")
        assert reason.removeprefix("needs ") in app.query_one(StatusHeader).render().plain
        # The palette: the panel counted as the picker counts it, and the same reason.
        entries = {command: text for command, text, _ in PresetCommands(app.screen)._entries()}
        assert "3 references → local:smollm2" in entries["Switch preset: local"]
        assert entries["Switch preset: ollama"].endswith(f"— {reason}")
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, PresetPicker))
        row = app.screen.query_one(OptionList).get_option("ollama").prompt.plain
        assert " ".join(reason.split()) in " ".join(row.split())
        # Ollama starts while the picker is open: the picker asked again as it opened; asked once more, the row
        # no longer says it cannot run, and the header follows.
        ollama_down.up = True
        app.recheck_ollama()
        await wait_until(pilot, lambda: app.ollama_models is not None)
        await pilot.pause()
        row = app.screen.query_one(OptionList).get_option("ollama").prompt.plain
        assert "needs Ollama" not in row
        assert "needs" not in app.query_one(StatusHeader).render().plain


async def test_the_chat_asks_ollama_again_on_its_own(ollama_down, monkeypatch):
    monkeypatch.setattr(MoAChatApp, "OLLAMA_RECHECK", 0.05)
    config = load_config()
    app = make_app(config, "demo")
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.ollama_checked)
        assert not readiness(config, config.preset("ollama")).runnable
        ollama_down.up = True
        await wait_until(pilot, lambda: readiness(config, config.preset("ollama")).runnable)
        assert app.ollama_models == ("llama3.2", "qwen2.5:7b")


# --------------------------------------------------------------------------------------------- a solo turn


async def test_a_solo_turn_shows_the_references_as_not_asked_not_failed(home):
    from moa_chat.tui.screens.reference_detail import ReferenceDetail
    from moa_chat.tui.widgets.prompt_input import PromptInput
    from moa_chat.tui.widgets.reply import AssistantReply
    from moa_chat.tui.widgets.sidebar import ReferenceSidebar

    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 36)) as pilot:
        await run_turn(pilot, "a full turn first")
        sidebar = app.query_one(ReferenceSidebar)
        assert [card.status for card in sidebar.cards()] == ["ok"] * 3
        app.query_one(PromptInput).load_text("Quick: HTTP 418?")
        await pilot.press("ctrl+t")

        def solo_done() -> bool:
            replies = app.query(AssistantReply)
            return len(replies) == 2 and replies.last().finished and not app.chat.turn_running

        await wait_until(pilot, solo_done)
        assert [card.status for card in sidebar.cards()] == ["unasked"] * 3
        assert sidebar.aggregator_card.status == "ok"
        text = sidebar.card(0).render().plain
        assert "not asked this turn" in text and "failed" not in text
        sidebar.card(0).focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ReferenceDetail))
        await pilot.pause()
        empty = str(app.screen.query_one("#detail-empty").render())
        assert empty.startswith("Not asked: this turn went to the aggregator alone")
        await pilot.press("escape")
        # The next full turn asks them again.
        await run_turn(pilot, "and a full one again")
        assert [card.status for card in sidebar.cards()] == ["ok"] * 3


# --------------------------------------------------------------------------------------------- Tab


async def four_exchanges_with_tools(pilot, tmp_path, monkeypatch) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "README.md").write_text("# Readme\n\nA small project.\n")
    monkeypatch.chdir(folder)
    for n in range(4):
        await run_turn(pilot, f"question {n}: what files are in this folder?")
    await pilot.pause()


@pytest.mark.parametrize(("size", "hide"), [((60, 20), False), ((120, 36), True)])
async def test_tab_never_moves_the_logs_view(home, tmp_path, monkeypatch, size, hide):
    """With the panel hidden (on its own at 60×20, by F4 at 120×36), Tab shows it over the log and focuses its
    first card; Shift+Tab mirrors it (the last card, when no stop of the log is in view). The log's view, its
    width and what it shows stay as they were, and the panel hides again when the focus goes back."""
    from moa_chat.tui.widgets.prompt_input import PromptInput
    from moa_chat.tui.widgets.sidebar import ReferenceSidebar

    app = make_app(load_config(), "demo")
    async with app.run_test(size=size) as pilot:
        await four_exchanges_with_tools(pilot, tmp_path, monkeypatch)
        sidebar, log, prompt = app.query_one(ReferenceSidebar), app.chat.chat_log, app.query_one(PromptInput)
        if hide:
            await pilot.press("f4")
            await pilot.pause()
        assert not sidebar.display and app.focused is prompt
        assert any(log in w.ancestors for w in app.screen.walk_children() if w.can_focus), "the log has stops"
        view = (log.scroll_y, log.size)
        await pilot.press("tab")
        await wait_until(pilot, lambda: app.focused is sidebar.card(0))
        assert sidebar.display and (log.scroll_y, log.size) == view
        await pilot.press("tab", "tab", "tab")  # the other cards, then the aggregator's
        assert app.focused is sidebar.aggregator_card and (log.scroll_y, log.size) == view
        await pilot.press("tab")  # back to the prompt: the panel hides again
        await wait_until(pilot, lambda: app.focused is prompt and not sidebar.display)
        assert (log.scroll_y, log.size) == view
        # Shift+Tab: the log's newest stop in view, else the panel's last card; the view stays.
        await pilot.press("shift+tab")
        await pilot.pause()
        focused = app.focused
        assert focused is sidebar.aggregator_card or (
            log in focused.ancestors and log.scrollable_content_region.overlaps(focused.region)
        ), focused
        assert log.scroll_y == view[0]
        for _ in range(12):  # round the whole ring, backwards
            await pilot.press("shift+tab")
            await pilot.pause()
            assert log.scroll_y == view[0], app.focused
        # From the first card, Shift+Tab goes back to the prompt, and the panel hides.
        app.chat.set_focus(prompt)
        await pilot.press("tab")
        await wait_until(pilot, lambda: app.focused is sidebar.card(0))
        await pilot.press("shift+tab")
        await wait_until(pilot, lambda: app.focused is prompt and not sidebar.display)


async def test_f4_keeps_a_panel_tab_showed(home):
    from moa_chat.tui.widgets.prompt_input import PromptInput
    from moa_chat.tui.widgets.sidebar import ReferenceSidebar

    app = make_app(load_config(), "demo")
    async with app.run_test(size=(60, 20)) as pilot:
        sidebar = app.query_one(ReferenceSidebar)
        await pilot.press("tab")
        await wait_until(pilot, lambda: app.focused is sidebar.card(0))
        await pilot.press("f4")
        app.chat.set_focus(app.query_one(PromptInput))
        await pilot.pause()
        assert sidebar.display  # kept, as F4 shows it at this width: over the log
        await pilot.press("f4")
        await pilot.pause()
        assert not sidebar.display


# --------------------------------------------------------------------------------------------- the copy toast


@pytest.mark.parametrize("view", ["ctrl+b", "f7"])
async def test_the_copy_toast_does_not_cover_the_answers_side_by_side(home, view):
    from moa_chat.tui.screens.panel import PanelAnswers
    from moa_chat.tui.screens.side_by_side import SideBySide

    app = make_app(load_config(), "demo")
    async with app.run_test(size=(60, 20), notifications=True) as pilot:
        await run_turn(pilot, "How do I reverse a list?")
        await pilot.press("f5")
        await wait_until(pilot, lambda: any("Copied" in t or "Sent" in t for t in toast_texts(app)))
        await pilot.press(view)
        await wait_until(pilot, lambda: isinstance(app.screen, SideBySide | PanelAnswers))
        await pilot.pause()
        assert toast_texts(app) == []
