"""What the bench scripts share (each runs as `python bench/NAME.py`, so this folder is on the path)."""

from __future__ import annotations

import atexit
import inspect
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

# A typical short reply: a paragraph, a list and a small code block.
REPLY = (
    "Here is what the panel makes of it:\n\n"
    "1. **Measure first** — profile before changing anything; the slow part is rarely where you think.\n"
    "2. **Cache what repeats** — a TTL cache keyed by the request keeps the common case fast.\n\n"
    "```python\ndef cached(key, fetch, ttl=300):\n    hit = store.get(key)\n    return hit if hit else fetch()\n```\n\n"
    "Run it on one real example, then ask a follow-up."
)


def scratch_home(prefix: str = "moa-bench-") -> str:
    """A MOA_CHAT_HOME of the bench's own (config, session store), removed when this process exits: a bench
    run leaves nothing in /tmp (each row's process makes one, so 500 were left after a day of runs)."""
    home = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    return home


def as_run_app(app_class: type) -> dict[str, Any]:
    """The options run_app starts the app with that a test leaves off (freeze_heap: the process is the app's
    alone), where this copy of the package has them (a --tree copy from before may not)."""
    return {"freeze_heap": True} if "freeze_heap" in inspect.signature(app_class).parameters else {}


def time_turn_results(screen_class: Any, record: Callable[[], None]) -> None:
    """Call `record` each time a turn's result reaches the chat's UI thread, before the chat handles it: on the
    handler this copy of the package has (`on_turn_finished`; `on_turn_done` in a --tree copy from before it)."""
    name = "on_turn_finished" if hasattr(screen_class, "on_turn_finished") else "on_turn_done"
    handler = getattr(screen_class, name)

    async def timed(self: Any, message: Any) -> None:
        record()
        await handler(self, message)

    setattr(screen_class, name, timed)


def config_text(base_url: str, references: int | None = None) -> str:
    """A config whose `bench` preset has one reference `ref` (or `references` of them: ref0, ref1, …) and the
    aggregator `agg`, all on the bench server."""
    names = ["ref"] if references is None else [f"ref{i}" for i in range(references)]
    refs = ", ".join(f"{{provider: bench, model: {name}}}" for name in names)
    return (
        "providers:\n"
        f'  bench: {{base_url: "{base_url}", max_retries: 0}}\n'
        "moa:\n  presets:\n    bench:\n"
        f"      reference_models: [{refs}]\n"
        "      aggregator: {provider: bench, model: agg}\n"
        "      tools: none\n"
    )


def write_config(base_url: str, references: int | None = None) -> Path:
    """The bench config, written into this process's MOA_CHAT_HOME."""
    path = Path(os.environ["MOA_CHAT_HOME"]) / "config.yaml"
    path.write_text(config_text(base_url, references))
    return path


class SessionProcess:
    """A chat session in a process of its own, with a home of its own, spoken to a line at a time: a command
    on its stdin, a JSON object back on its stdout."""

    def __init__(self, argv: list[str], turns: int, env: dict[str, str]) -> None:
        self.turns = turns
        home = scratch_home()
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**env, "MOA_CHAT_HOME": home}
        )

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.turns}-turn session ended (exit {self.process.wait()})")
        return dict(json.loads(line))

    def send(self, command: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.read()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("quit\n")
        self.process.stdin.close()
        self.process.wait(timeout=60)
