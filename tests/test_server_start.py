"""A server moa-chat runs itself (the local model) shows its start: "Starting …", then "ready", or why not.

The `local` provider's factory is swapped for one whose start waits until the test lets it go, so every
stage can be looked at for as long as needed; the scripted server stands behind it and answers the calls.
The real llama.cpp server's start is tested in test_local.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from moa_chat.config import load_config
from moa_chat.providers import lifecycle
from moa_chat.providers.local import LocalProviderError
from moa_chat.tui.widgets.chat_log import NoticeLine
from moa_chat.tui.widgets.reply import AssistantReply
from moa_chat.tui.widgets.sidebar import ReferenceSidebar
from scripted_server import ScriptedServer
from tui_helpers import make_app, record_statuses, run_turn, send, wait_until

LOCAL = "local"


class HeldServer:
    """Starts when the test releases it (or fails, if told to); the scripted server answers for it."""

    def __init__(self, backend: ScriptedServer, release: threading.Event, fail: str | None) -> None:
        self.backend, self.release, self.fail = backend, release, fail
        self.stopped = False

    def start(self, announce: Callable[[str], None] | None = None) -> None:
        address = self.backend.base_url.removeprefix("http://").removesuffix("/v1")
        if announce is not None:
            announce(f"the test model (Tiny-1M) on {address}")
        assert self.release.wait(60), "the test never let the server start"
        if self.fail:
            raise LocalProviderError(self.fail)

    @property
    def base_url(self) -> str:
        return self.backend.base_url

    def stop(self) -> None:
        self.stopped = True


class Held:
    def __init__(self, backend: ScriptedServer) -> None:
        self.backend = backend
        self.release = threading.Event()
        self.fail: str | None = None
        self.made: list[HeldServer] = []

    def __call__(self) -> HeldServer:
        server = HeldServer(self.backend, self.release, self.fail)
        self.made.append(server)
        return server


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch, llm_server: ScriptedServer) -> Iterator[Held]:
    factory = Held(llm_server)
    monkeypatch.setitem(lifecycle.FACTORIES, LOCAL, factory)
    assert LOCAL not in lifecycle._running
    yield factory
    factory.release.set()
    lifecycle._running.pop(LOCAL, None)  # the process-wide table must not keep the test's server


def header(app) -> str:
    return app.query(AssistantReply).last().query_one(".reply-header").render().plain


async def test_the_chat_shows_the_server_starting_then_ready_above_the_reply(home, held, monkeypatch):
    app = make_app(load_config(), LOCAL)
    shown = record_statuses(monkeypatch)
    async with app.run_test(size=(120, 36)) as pilot:
        await send(pilot, "Name a primary colour.")
        starting = "Starting the test model (Tiny-1M) on 127.0.0.1:"
        # Held: the reply's header says what is starting, and the seconds go by, for as long as it takes.
        await wait_until(pilot, lambda: starting in header(app), describe=lambda: header(app))
        await wait_until(pilot, lambda: header(app).endswith("s"), describe=lambda: header(app))
        assert app.chat.turn_running
        assert not app.query(NoticeLine)
        assert [card.status for card in app.query_one(ReferenceSidebar).cards()] == ["queued"] * 3
        held.release.set()

        def finished() -> bool:
            reply = app.query(AssistantReply).last()
            return reply.finished and not app.chat.turn_running

        await wait_until(pilot, finished, timeout=30)
        reply = app.query(AssistantReply).last()
        assert reply.text == "ok from smollm2"
        notices = [n for n in app.query(NoticeLine) if "is ready" in n.message]
        assert len(notices) == 1
        assert notices[0].message.startswith("The test model (Tiny-1M) on 127.0.0.1:")
        assert "is ready (started in " in notices[0].message
        log = list(app.chat.chat_log.children)
        assert log.index(notices[0]) == log.index(reply) - 1  # between the prompt and the reply
        assert any(s.startswith(starting) for s in shown)
        # Started once for the whole turn: the references and the aggregator found it running.
        assert len(held.made) == 1
        assert len(held.backend.requests_for("smollm2")) == 4

        await run_turn(pilot, "And another?")  # already running: nothing starts, nothing is said
        assert len(held.made) == 1
        assert len([n for n in app.query(NoticeLine) if "is ready" in n.message]) == 1


async def test_a_server_that_cannot_start_ends_the_turn_at_once_naming_its_log(home, held):
    held.fail = "the local model server exited at start: bad magic (its log: /tmp/moa-chat-local-server-x.log)"
    held.release.set()
    app = make_app(load_config(), LOCAL)
    async with app.run_test(size=(120, 36)) as pilot:
        await run_turn(pilot, "hello", timeout=30)
        reply = app.query(AssistantReply).last()
        error = reply.query_one(".reply-error").render().plain
        assert "bad magic" in error and "/tmp/moa-chat-local-server-x.log" in error
        assert not held.backend.requests  # no call was made: not one failure per reference
        sidebar = app.query_one(ReferenceSidebar)
        assert [card.status for card in sidebar.cards()] == ["failed"] * 3
        assert not [n for n in app.query(NoticeLine) if "is ready" in n.message]
        held.fail = None
        await run_turn(pilot, "again", timeout=30)  # the next turn tries again, and now it starts
        assert len(held.made) == 2
        assert app.query(AssistantReply).last().text == "ok from smollm2"


async def test_escape_while_the_server_starts_cancels_the_turn_and_the_start_goes_on(home, held):
    app = make_app(load_config(), LOCAL)
    async with app.run_test(size=(120, 36)) as pilot:
        await send(pilot, "hello")
        await wait_until(pilot, lambda: "Starting the test model" in header(app), describe=lambda: header(app))
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.chat.turn_running, timeout=30)
        assert app.query(AssistantReply).last().finished
        assert not held.backend.requests
        held.release.set()  # it finishes starting for the next turn
        await run_turn(pilot, "hello again", timeout=30)
        assert len(held.made) == 1
        assert app.query(AssistantReply).last().text == "ok from smollm2"


def test_ask_prints_the_start_on_stderr(home, held, capsys):
    from moa_chat.cli import main

    held.release.set()
    assert main(["ask", "--preset", LOCAL, "--no-save", "hi"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == "ok from smollm2"
    lines = captured.err.splitlines()
    starting = next(n for n, line in enumerate(lines) if "▸ Starting the test model (Tiny-1M) on 127.0.0.1:" in line)
    ready = next(n for n, line in enumerate(lines) if "is ready (started in " in line)
    first_call = next(n for n, line in enumerate(lines) if "local:smollm2 #1" in line)
    assert starting < ready < first_call


def test_ask_says_why_a_server_did_not_start(home, held, capsys):
    from moa_chat.cli import main

    held.fail = "the local model server exited at start: bad magic (its log: /tmp/x.log)"
    held.release.set()
    assert main(["ask", "--preset", LOCAL, "--no-save", "hi"]) == 1
    err = capsys.readouterr().err
    assert "▸ Starting the test model" in err
    assert "moa-chat: error: the local model server exited at start: bad magic (its log: /tmp/x.log)" in err
    assert not held.backend.requests


async def test_listing_the_local_models_says_the_server_is_starting_meanwhile(home, held):
    from moa_chat.tui.screens.model_picker import ModelPicker

    held.backend.server.models = ["smollm2"]
    app = make_app(load_config(), "demo")
    async with app.run_test(size=(120, 36)) as pilot:
        app.chat.choose_model(LOCAL, as_aggregator=True)

        def status() -> str:
            found = app.screen.query("#model-status") if isinstance(app.screen, ModelPicker) else None
            return found.first().render().plain if found else ""

        await wait_until(pilot, lambda: status().startswith("Starting the test model (Tiny-1M)"), describe=status)
        held.release.set()
        await wait_until(pilot, lambda: isinstance(app.screen, ModelPicker) and app.screen.models == ["smollm2"])


def test_an_endpoint_is_resolved_through_start_server_alone(home, monkeypatch):
    """One place decides whether a server starts: resolve_endpoint asks start_server, never lifecycle."""
    from moa_chat.providers import endpoints as registry

    asked: list[str] = []

    def start_server(name: str, config, **kwargs) -> str | None:
        asked.append(name)
        return "http://127.0.0.1:9/v1/" if name == LOCAL else None

    def around(*args, **kwargs):
        raise AssertionError("resolve_endpoint decided on a start of its own")

    monkeypatch.setattr(registry, "start_server", start_server)
    monkeypatch.setattr(lifecycle, "start", around)
    config = load_config()
    assert registry.resolve_endpoint(LOCAL, config).base_url == "http://127.0.0.1:9/v1"
    # An address of its own is start_server's call too (it says None), and then the table's URL holds.
    assert registry.resolve_endpoint("ollama", config).base_url == "http://localhost:11434/v1"
    # An explicit base_url wins before any start is asked about.
    assert registry.resolve_endpoint(LOCAL, config, base_url="http://x/v1").base_url == "http://x/v1"
    assert asked == [LOCAL, "ollama"]


def test_resolving_a_managed_endpoint_starts_its_server_once_unless_it_has_an_address(home, held):
    from dataclasses import replace

    from moa_chat.providers import resolve_endpoint

    held.release.set()
    config = load_config()
    assert resolve_endpoint(LOCAL, config).base_url == held.backend.base_url.rstrip("/")
    assert resolve_endpoint(LOCAL, config).base_url == held.backend.base_url.rstrip("/")
    assert len(held.made) == 1
    lifecycle._running.pop(LOCAL, None)
    addressed = replace(config.providers[LOCAL], base_url="http://127.0.0.1:9/v1")
    config = replace(config, providers={**config.providers, LOCAL: addressed})  # load_config's is shared
    assert resolve_endpoint(LOCAL, config).base_url == "http://127.0.0.1:9/v1"
    assert len(held.made) == 1  # given an address, nothing starts
