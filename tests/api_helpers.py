"""`moa-chat api` as a real process on a free port, for tests/test_api*.py.

The server picks its own port (--port 0) and prints its base URL once it listens; the helper reads that line
from the process's stdout (no polling, no sleeps), then keeps reading the request log into a queue.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import openai
from conftest import WIRE_CONFIG, write_config
from scripted_server import ScriptedServer

TOKEN = "moa-test-token-0123456789"
QUESTION = [{"role": "user", "content": "How do I reverse a list?"}]
WAIT = 60.0  # seconds: a loaded 2-core machine starts the process and imports the SDK slowly


# The `wire` preset, and beside it one that asks its reference again at every tool round.
WIRE_EACH = """
    wire-each:
      description: One reference, asked again at every tool round
      fanout: per_iteration
      reference_models:
        - provider: wire
          model: each-ref
      aggregator:
        provider: wire
        model: each-agg
"""


@dataclass
class ApiProcess:
    proc: subprocess.Popen[str]
    base_url: str
    banner: list[str]
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    token: str = TOKEN

    def log_line(self, containing: str, timeout: float = WAIT) -> str:
        """The next request-log line that contains `containing` (the server prints it as the request ends)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if containing in line:
                return line
        raise AssertionError(f"no log line with {containing!r} within {timeout} s")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=10)

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/v1")


def start_api(home: Path, *args: str, env: dict[str, str] | None = None, token: str | None = TOKEN) -> ApiProcess:
    environment = dict(os.environ)
    if token is not None:
        environment["MOA_CHAT_API_KEY"] = token
    else:
        environment.pop("MOA_CHAT_API_KEY", None)
    environment.update(env or {})
    proc = subprocess.Popen(
        [sys.executable, "-m", "moa_chat", "api", "--port", "0", *args],
        cwd=home,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environment,
    )
    assert proc.stdout is not None
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put("<eof>")

    threading.Thread(target=read, daemon=True).start()
    banner: list[str] = []
    deadline = time.monotonic() + WAIT
    while True:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            proc.kill()
            raise AssertionError("moa-chat api printed no base URL:\n" + "\n".join(banner)) from None
        if line == "<eof>":
            raise AssertionError(f"moa-chat api exited {proc.wait()}:\n" + "\n".join(banner))
        banner.append(line)
        if match := re.search(r"serving on (http://\S+/v1)", line):
            break
    return ApiProcess(proc, match.group(1), banner, lines, token or "")


def wire_presets(base_url: str, more: str = "") -> str:
    """The config of the `wire` and `wire-each` presets on the server at `base_url`; `more`: more presets (each
    indented as a preset under `presets:`)."""
    return WIRE_CONFIG.format(base_url=base_url, extra=WIRE_EACH.strip("\n") + more.rstrip("\n"))


def configure(home: Path, llm_server: ScriptedServer, extra: str = "") -> None:
    """The `wire` and `wire-each` presets on `llm_server`; `extra`: more of the config, at its top level."""
    write_config(home, wire_presets(llm_server.base_url) + textwrap.dedent(extra))


def client(api: ApiProcess, **kwargs: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=api.base_url, api_key=api.token, max_retries=0, **kwargs)  # type: ignore[arg-type]
