"""Tool calls in the TUI: blocks in the log, the approval modal, and the demo's offline tool use."""

from __future__ import annotations

import pytest
from moa_chat.config import load_config
from moa_chat.providers.demo import DEMO_NOTE
from moa_chat.tui.screens.approval import ApprovalScreen
from moa_chat.tui.widgets.reply import AssistantReply
from moa_chat.tui.widgets.tool_block import ToolBlock, ToolHeader
from tui_helpers import make_app, run_turn, send, settle, wait_until


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text("# Sample project\n\nA small thing that does one job well.\n")
    (root / "main.py").write_text("print('hello')\n")
    (root / "docs").mkdir()
    monkeypatch.chdir(root)
    return root


async def test_the_demo_lists_the_folder_and_reads_the_readme(home, project):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(110, 40)) as pilot:
        await run_turn(pilot, "What files are in this folder and what does README.md say?")
        blocks = list(app.query(ToolBlock))
        assert [(b.event.name, b.event.status) for b in blocks] == [("list_directory", "done"), ("read_file", "done")]
        reply = app.query_one(AssistantReply)
        assert "`README.md`" in reply.text and "Sample project" in reply.text
        assert [m["role"] for m in app.session.messages] == ["user", "assistant", "tool", "tool", "assistant"]


async def test_a_tool_block_expands_to_show_arguments_and_result(home, project):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(110, 40)) as pilot:
        await run_turn(pilot, "What does README.md in this folder say?")
        block = app.query(ToolBlock).last()
        body = block.query_one(".tool-body")
        assert not body.display or not block.has_class("-expanded")
        block.query_one(ToolHeader).focus()
        await pilot.press("enter")
        assert block.has_class("-expanded")
        result = str(block.query_one(".tool-result").render())
        assert "A small thing that does one job well." in result
        assert '"path": "README.md"' in str(block.query_one(".tool-arguments").render())
        await pilot.press("enter")
        assert not block.has_class("-expanded")


async def test_a_changing_tool_waits_for_approval_then_runs(home, project):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(110, 40)) as pilot:
        await send(pilot, "Please write a note file about caching")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen.armed)
        block = app.query_one(ToolBlock)
        assert block.event.status == "awaiting_approval"
        assert not (project / DEMO_NOTE).exists()
        await pilot.press("y")
        await wait_until(pilot, lambda: not app.chat.turn_running and app.query(AssistantReply).last().finished)
        assert (project / DEMO_NOTE).read_text().startswith("# Notes")
        assert block.event.status == "done"


async def answer_write_request(pilot, key: str) -> None:
    """Ask the demo to write a note, answer the approval modal with `key`, wait for the turn to end."""
    app = pilot.app
    await send(pilot, "Please write a note file about caching")
    await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen.armed)
    await pilot.press(key)
    await wait_until(pilot, lambda: not app.chat.turn_running and app.query(AssistantReply).last().finished)


async def test_denying_tells_the_model_and_changes_nothing(home, project):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(110, 40)) as pilot:
        await answer_write_request(pilot, "n")
        assert not (project / DEMO_NOTE).exists()
        assert app.query_one(ToolBlock).event.status == "denied"
        assert {
            "role": "tool",
            "tool_call_id": app.session.messages[1]["tool_calls"][0]["id"],
            "content": "denied by the user",
        } in app.session.messages


async def test_allow_for_the_session_is_remembered(home, project):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(110, 40)) as pilot:
        await answer_write_request(pilot, "a")
        (project / DEMO_NOTE).unlink()
        await run_turn(pilot, "Now write another note file please")
        assert (project / DEMO_NOTE).exists()  # no second question


async def test_escape_during_approval_cancels_the_turn(home, project):
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(110, 40)) as pilot:
        await send(pilot, "Please write a note file about caching")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        await pilot.press("escape")  # denies in the modal ...
        await wait_until(pilot, lambda: not isinstance(app.screen, ApprovalScreen))
        await wait_until(pilot, lambda: not app.chat.turn_running)
        assert not (project / DEMO_NOTE).exists()


# ---------------------------------------------------------------------------- snapshots


@pytest.fixture
def _frozen(frozen_clock):
    return frozen_clock


def test_snapshot_tool_blocks_collapsed(snap_compare, home, project, _frozen):
    async def run_before(pilot):
        await run_turn(pilot, "What files are in this folder and what does README.md say?")
        await settle(pilot)

    assert snap_compare(make_app(load_config(), "demo"), terminal_size=(110, 36), run_before=run_before)


def test_snapshot_tool_block_expanded(snap_compare, home, project, _frozen):
    async def run_before(pilot):
        await run_turn(pilot, "What files are in this folder and what does README.md say?")
        pilot.app.query(ToolHeader).last().focus()
        await pilot.press("enter")
        await settle(pilot)

    assert snap_compare(make_app(load_config(), "demo"), terminal_size=(110, 44), run_before=run_before)


def test_snapshot_approval_modal(snap_compare, home, project, _frozen):
    async def run_before(pilot):
        await send(pilot, "Please write a note file about caching")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ApprovalScreen))
        await settle(pilot)

    assert snap_compare(make_app(load_config(), "demo"), terminal_size=(110, 36), run_before=run_before)


class ManualClock:
    """The approval modal's clock, moved by the test alone: a loaded machine cannot arm the modal early."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_typing_when_the_approval_pops_up_decides_nothing(home, project):
    """The user is typing the next prompt when the modal opens: "and also" must not allow anything."""
    clock = ManualClock()
    app = make_app(load_config(), "demo", approval_clock=clock)
    async with app.run_test(size=(110, 40)) as pilot:
        await send(pilot, "Please write a note file about caching")
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalScreen))
        for key in "and also yes":
            clock.now += 0.05  # typing speed
            await pilot.press("space" if key == " " else key)
        await pilot.pause()
        assert isinstance(app.screen, ApprovalScreen) and not app.screen.armed
        clock.now += ApprovalScreen.QUIET_SECONDS - 0.1  # not quite quiet long enough: "y" is still typing
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(app.screen, ApprovalScreen) and not app.screen.armed
        clock.now += ApprovalScreen.QUIET_SECONDS + 0.01  # a quiet keyboard: now a key is a decision
        assert app.screen.armed
        await pilot.press("n")
        await wait_until(pilot, lambda: not app.chat.turn_running)
        assert app.query_one(ToolBlock).event.status == "denied"
        assert not (project / DEMO_NOTE).exists()
