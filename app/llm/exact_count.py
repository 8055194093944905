"""A model's own tokenizer, asked over the wire where its server offers one.

llama-cpp-python's server (what the `local` provider runs) counts text at `POST /extras/tokenize/count`
(`{"input": TEXT, "model": ALIAS}` → `{"count": N}`); llama.cpp's server tokenizes at `POST /tokenize`
(`{"content": TEXT}` → `{"tokens": [...]}`). Both sit beside `/v1`, at the server's root. Each text is asked
once (the counts are kept by the text's digest), with a short time limit; a server that cannot count
(gone, or an older build without the endpoint) is not asked again, and the estimate takes over.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import openai

TokenizerKind = Literal["llama-cpp-python", "llama.cpp"]
COUNT_TIMEOUT = 5.0  # a local server counts a long text in milliseconds; one that takes longer is busy answering
KEPT_COUNTS = 4096  # the texts whose counts are kept (a long conversation's messages, asked every turn)


def server_root(base_url: str) -> str:
    """`http://host:port/v1` → `http://host:port`: where a server's own endpoints sit."""
    return base_url.rstrip("/").removesuffix("/v1")


class ServerTokenizer:
    """Counts text with the tokenizer of the model a llama.cpp or llama-cpp-python server runs."""

    def __init__(self, client: openai.OpenAI, base_url: str, kind: TokenizerKind, model: str) -> None:
        self._client = client.with_options(timeout=COUNT_TIMEOUT, max_retries=0)
        self._root = server_root(base_url)
        self.kind, self.model = kind, model
        self._counts: OrderedDict[bytes, int] = OrderedDict()
        self._lock = threading.Lock()
        self.failure: str | None = None  # why it stopped asking, once it has
        # llama-cpp-python counts a BOS token in front of every text for models that start with one: its count
        # of no text at all, taken off each count.
        self._baseline: int | None = None if kind == "llama-cpp-python" else 0

    def count(self, text: str) -> int | None:
        """The tokens of `text` in the model's own tokenizer, or None when the server cannot say."""
        if not text:
            return 0
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        with self._lock:
            if key in self._counts:
                self._counts.move_to_end(key)
                return self._counts[key]
            if self.failure is not None:
                return None
        if self._baseline is None:
            self._baseline = self._ask("")
            if self._baseline is None:
                return None
        counted = self._ask(text)
        if counted is None:
            return None
        counted = max(0, counted - self._baseline)
        with self._lock:
            self._counts[key] = counted
            while len(self._counts) > KEPT_COUNTS:
                self._counts.popitem(last=False)
        return counted

    def _ask(self, text: str) -> int | None:
        import openai

        try:
            if self.kind == "llama-cpp-python":
                answer = self._client.post(
                    f"{self._root}/extras/tokenize/count", body={"input": text, "model": self.model}, cast_to=object
                )
                counted = answer.get("count") if isinstance(answer, dict) else None
            else:
                answer = self._client.post(
                    f"{self._root}/tokenize", body={"content": text, "add_special": False}, cast_to=object
                )
                tokens = answer.get("tokens") if isinstance(answer, dict) else None
                counted = len(tokens) if isinstance(tokens, list) else None
        except openai.OpenAIError as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
            return None
        if not isinstance(counted, int) or isinstance(counted, bool) or counted < 0:
            self.failure = f"the server's answer holds no count: {str(answer)[:200]}"
            return None
        return counted
