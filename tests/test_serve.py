"""`moa-chat serve`: the chat in a real browser (headless Chromium over the DevTools protocol), the command
each browser tab runs, and the checks that keep other web pages from driving it."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from moa_chat.cli import main
from moa_chat.cli.serve import allowed_hosts, warning_for, websocket_refusal
from textual_serve.server import Server
from waiting import seconds_until, wait_until

DEADLINE = 60.0  # seconds; a loaded 2-core machine starts Chromium and the app slowly, so poll, generously
APP_ARGV = [sys.executable, "-m", "moa_chat", "--preset", "demo"]


def _chromium() -> str | None:
    names = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
    return next((path for name in names if (path := shutil.which(name))), None)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _group(pgid: int) -> dict[int, list[str]]:
    """Live processes of a process group, with their command lines (zombies are gone already)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                found[int(entry.name)] = (entry / "cmdline").read_bytes().decode().split("\0")[:-1]
        except (OSError, ValueError):
            continue  # it ended while we looked
    return found


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the whole group (the server and every app it started), SIGKILL to what outlives 20 s."""
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        if seconds_until(lambda: _reaped_with_its_group(proc), wait, interval=0.1) is not None:
            return


def _reaped_with_its_group(proc: subprocess.Popen[bytes]) -> bool:
    proc.poll()  # reaps it once it has exited
    return not _group(proc.pid)


@dataclass
class Served:
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def apps(self) -> list[list[str]]:
        """The chats the server started, one per browser tab: everything in its group but itself."""
        return [argv for pid, argv in _group(self.proc.pid).items() if pid != self.proc.pid]


@pytest.fixture
def served(home: Path, tmp_path: Path) -> Iterator[Served]:
    """`moa-chat --preset demo serve` in its own process group, answering HTTP; stopped, group and all."""
    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*APP_ARGV, "serve", "--port", str(port)],
            cwd=home,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Served(port, proc, log)
    try:

        def page() -> str:
            assert proc.poll() is None, f"moa-chat serve exited {proc.returncode}:\n{log.read_text()}"
            with contextlib.suppress(OSError), urllib.request.urlopen(server.url, timeout=5) as answer:
                return answer.read().decode()
            return ""

        html = wait_until(page, "moa-chat serve to answer", timeout=DEADLINE, interval=0.2, show=log.read_text)
        assert f'data-session-websocket-url="ws://127.0.0.1:{port}/ws"' in html
        yield server
    finally:
        _stop_group(proc)
        left = _group(proc.pid)
        assert not left, f"still running after the test: {left}"


# Captures xterm.js's Terminal as textual-serve's page creates it (`this.terminal = new Terminal(...)`,
# kept in a closure): a setter on Object.prototype sees that assignment. The buffer then gives the screen
# as text, whichever renderer (WebGL, canvas) draws it.
CAPTURE_TERMINAL = """
Object.defineProperty(Object.prototype, "terminal", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "terminal", {value, writable: true, configurable: true, enumerable: true});
    if (value && value.buffer && !window.__moaTerminal) window.__moaTerminal = value;
  },
});
"""
READ_SCREEN = """(() => {
  const terminal = window.__moaTerminal;
  if (!terminal) return null;
  const buffer = terminal.buffer.active, lines = [];
  for (let i = 0; i < buffer.length; i++) lines.push(buffer.getLine(i).translateToString(true));
  return lines.join("\\n");
})()"""


class Page:
    """One Chromium tab over the DevTools protocol: commands in, results out, events skipped."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self.ids)
        await self.ws.send_json({"id": call_id, "method": method, "params": params})
        async for message in self.ws:
            reply = json.loads(message.data)
            if reply.get("id") == call_id:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return dict(reply["result"])
        raise AssertionError("Chromium closed the DevTools connection")

    async def screen(self) -> str:
        result = await self.call("Runtime.evaluate", expression=READ_SCREEN, returnByValue=True)
        return str(result["result"].get("value") or "")

    async def wait_for(self, *texts: str) -> str:
        deadline = time.monotonic() + DEADLINE
        screen = ""
        while time.monotonic() < deadline:
            screen = await self.screen()
            if all(text in screen for text in texts):
                return screen
            await asyncio.sleep(0.3)
        raise AssertionError(f"{texts!r} never all appeared in the browser's terminal:\n{screen}")


async def _devtools_port(user_data: Path, browser: subprocess.Popen[bytes], log: Path) -> int:
    port_file = user_data / "DevToolsActivePort"  # Chromium writes it once --remote-debugging-port=0 is open
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        assert browser.poll() is None, f"Chromium exited {browser.returncode}:\n{log.read_text()[-3000:]}"
        if port_file.exists() and (first := port_file.read_text().split("\n")[0].strip()):
            return int(first)
        await asyncio.sleep(0.2)
    raise AssertionError(f"Chromium never opened its DevTools port:\n{log.read_text()[-3000:]}")


@pytest.fixture
def chromium() -> str:
    path = _chromium()
    if path is None:
        pytest.skip("chromium not installed: apt-get install chromium")
    return path


# chromium before served: without a browser, skip before starting the server.
async def test_the_chat_runs_in_a_real_browser(chromium: str, served: Served, tmp_path: Path) -> None:
    user_data, log = tmp_path / "chromium", tmp_path / "chromium.log"
    with log.open("wb") as out:
        browser = subprocess.Popen(
            [
                chromium,
                "--headless",
                "--no-sandbox",  # containers and root: the sandbox cannot start there; the page is our own
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-port=0",
                f"--user-data-dir={user_data}",
                "--window-size=1280,800",
                # The page links a web font: fail that lookup at once instead of waiting on a network.
                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        started = time.monotonic()
        devtools = await _devtools_port(user_data, browser, log)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{devtools}/json/list") as response:
                target = next(t for t in await response.json() if t["type"] == "page")
            async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                page = Page(ws)
                await page.call("Page.enable")
                await page.call("Page.addScriptToEvaluateOnNewDocument", source=CAPTURE_TERMINAL)
                await page.call("Page.navigate", url=served.url)

                screen = await page.wait_for("Ask the panel")
                print(f"first screen in the browser after {time.monotonic() - started:.1f}s")
                header = screen.splitlines()[0]
                assert "moa-chat" in header and "preset demo" in header
                assert "demo:simulated-analyst" in screen  # the reference sidebar
                # The tab's chat is this moa-chat with the options serve was given, and nothing else.
                assert served.apps() == [APP_ARGV]

                # Keys typed in the page reach the app, and its reply comes back.
                await page.call("Runtime.evaluate", expression="window.__moaTerminal.focus()")
                await page.call("Input.insertText", text="How do I test a command-line tool?")
                await page.wait_for("How do I test a command-line tool?")
                enter = {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13}
                await page.call("Input.dispatchKeyEvent", type="keyDown", text="\r", **enter)
                await page.call("Input.dispatchKeyEvent", type="keyUp", **enter)
                await page.wait_for("demo · demo:simulated-synthesizer ·")
                print(f"a whole turn in the browser after {time.monotonic() - started:.1f}s")
    finally:
        _stop_group(browser)
    # The tab is gone: its chat goes with it, and the server stays up for the next.
    wait_until(lambda: served.apps() == [], "the tab's chat to end", timeout=DEADLINE, interval=0.2)
    assert served.proc.poll() is None


async def test_other_web_pages_cannot_open_the_websocket(served: Served) -> None:
    ws_url = f"ws://127.0.0.1:{served.port}/ws"
    async with aiohttp.ClientSession() as http:
        # Cross-site websocket hijacking: any page the user visits could dial the loopback port.
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(ws_url, origin="https://evil.example")
        assert refused.value.status == 403
        # DNS rebinding: a page whose own name now points at 127.0.0.1 is same-origin with itself.
        rebound = f"rebound.example:{served.port}"
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(ws_url, headers={"Host": rebound}, origin=f"http://{rebound}")
        assert refused.value.status == 403
        assert served.apps() == []  # a refused socket starts no chat
        # The page's own origin is let in, and the app starts and draws.
        async with http.ws_connect(ws_url, origin=f"http://127.0.0.1:{served.port}") as ws:
            message = await ws.receive(timeout=DEADLINE)
            assert message.type == aiohttp.WSMsgType.BINARY and message.data
    # The start line is printed half a second after the server answers (serve._announce): on a busy machine
    # the sockets above can all be done before that, so wait for it rather than race it.
    announced = f"moa-chat: serving the chat on http://127.0.0.1:{served.port} (Ctrl+C stops)"
    log = wait_until(
        lambda: text if announced in (text := served.log.read_text()) else "", "the start line", timeout=DEADLINE
    )
    assert "refused a websocket: cross-site Origin 'https://evil.example'" in log


def test_a_taken_port_is_an_error_not_an_announcement(home: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [*APP_ARGV, "serve", "--port", str(port)], capture_output=True, text=True, timeout=DEADLINE
        )
    assert result.returncode == 2
    assert f"moa-chat: error: cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "serving" not in result.stdout


class Listened(Exception):
    pass


@pytest.fixture
def no_listening(monkeypatch: pytest.MonkeyPatch) -> list[Server]:
    """Server.serve records the server it was asked to run and stops there, instead of listening."""
    seen: list[Server] = []

    def serve(self: Server, debug: bool = False) -> None:
        seen.append(self)
        raise Listened

    monkeypatch.setattr(Server, "serve", serve)
    return seen


def test_each_tab_runs_moa_chat_with_the_same_options_and_no_key(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_listening: list[Server]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-on-a-command-line")
    config = tmp_path / "it's a dir" / "config.yaml"
    config.parent.mkdir()
    config.write_text("moa:\n  default_preset: demo\n")
    with pytest.raises(Listened):
        main(["--config", str(config), "serve", "--preset", "demo", "--port", "8123"])
    (server,) = no_listening
    config_args = ["--config", str(config), "--preset", "demo"]
    assert shlex.split(server.command) == ["exec", sys.executable, "-m", "moa_chat", *config_args]
    assert "sk-never" not in server.command
    assert (server.host, server.port, server.public_url) == ("127.0.0.1", 8123, "http://127.0.0.1:8123")


def test_a_session_is_checked_before_serving(
    home: Path, capsys: pytest.CaptureFixture[str], no_listening: list[Server]
) -> None:
    assert main(["--session", "nope", "serve"]) == 2
    assert main(["--resume", "serve"]) == 2
    err = capsys.readouterr().err
    assert "moa-chat: error:" in err and "no stored session to resume" in err
    assert no_listening == []


def test_a_non_loopback_address_is_warned_about(
    home: Path, capsys: pytest.CaptureFixture[str], no_listening: list[Server]
) -> None:
    with pytest.raises(Listened):
        main(["serve", "--host", "0.0.0.0", "--port", "8124"])
    err = capsys.readouterr().err
    assert "warning: serving on every network interface" in err and "your API keys" in err
    assert no_listening[0].public_url == "http://127.0.0.1:8124"  # a page cannot dial 0.0.0.0 back
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        assert warning_for(host) is None, host
    for host in ("0.0.0.0", "::", "192.168.1.5", "my-laptop.lan"):
        assert warning_for(host), host


def test_websocket_checks() -> None:
    allowed = allowed_hosts("127.0.0.1", 8000, "http://127.0.0.1:8000")
    assert websocket_refusal({"Host": "127.0.0.1:8000", "Origin": "http://127.0.0.1:8000"}, allowed) is None
    assert websocket_refusal({"Host": "localhost:8000", "Origin": "http://localhost:8000"}, allowed) is None
    assert websocket_refusal({"Host": "127.0.0.1:8000"}, allowed) is None  # not a browser
    assert websocket_refusal({"Host": "127.0.0.1:8000", "Origin": "null"}, allowed)
    assert websocket_refusal({"Host": "127.0.0.1:8000", "Origin": "http://localhost:9000"}, allowed)
    assert websocket_refusal({"Host": "127.0.0.1:8000", "Origin": "file://"}, allowed)
    assert websocket_refusal({"Host": "evil.example:8000", "Origin": "http://evil.example:8000"}, allowed)
    behind_proxy = allowed_hosts("127.0.0.1", 8000, "https://chat.example.org")
    assert websocket_refusal({"Host": "chat.example.org", "Origin": "https://chat.example.org"}, behind_proxy) is None
    # A proxy that passes its upstream as Host (nginx does by default) is still let in.
    assert websocket_refusal({"Host": "127.0.0.1:8000", "Origin": "https://chat.example.org"}, behind_proxy) is None
    assert websocket_refusal({"Host": "127.0.0.1:8000", "Origin": "https://evil.example"}, behind_proxy)
