"""Who may use the endpoint: the token always (as a bearer token, or `x-api-key`), and browser pages from one
named origin at most.

The endpoint spends the user's provider keys, so every request carries the token. It is
`MOA_CHAT_API_KEY` when set, else one generated on the first start and kept in the data folder, readable by
the user alone (0600), so clients configured once keep working across restarts. It is compared in constant
time. A browser page from another site is refused outright (Origin set and not the one `--cors` names):
with the token a page could spend the keys, and without it a page could still probe the port.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from ..config.paths import data_home

TOKEN_ENV = "MOA_CHAT_API_KEY"
TOKEN_FILE = "api-token"
TOKEN_PREFIX = "moa-"


@dataclass(frozen=True)
class Token:
    value: str
    source: str  # where it came from, for the start-up lines: the variable, or the file
    generated: bool = False  # made just now: printed once, at this start


def load_token(folder: Path | None = None) -> Token:
    """MOA_CHAT_API_KEY, else the token kept in the data folder, else a new one kept there (0600)."""
    given = os.environ.get(TOKEN_ENV, "").strip()
    if given:
        return Token(given, f"${TOKEN_ENV}")
    folder = folder or data_home()
    path = folder / TOKEN_FILE
    with contextlib.suppress(FileNotFoundError):
        kept = path.read_text(encoding="utf-8").strip()
        if kept:
            _restrict(path)
            return Token(kept, str(path))
    folder.mkdir(parents=True, exist_ok=True)
    value = TOKEN_PREFIX + secrets.token_urlsafe(32)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(value + "\n")
    _restrict(path)
    return Token(value, str(path), generated=True)


def _restrict(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.chmod(0o600)


def authorized(header: str | None, token: str, *, api_key: str | None = None) -> bool:
    """Whether an Authorization header (Bearer) or an x-api-key header (`api_key`, as Anthropic's clients send
    it) carries the token, compared without leaking timing."""
    if api_key is not None and hmac.compare_digest(api_key.strip().encode(), token.encode()):
        return True
    if not header:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


def origin_refusal(origin: str | None, allowed: str | None) -> str | None:
    """Why a request from a browser page must be refused, or None. Programs send no Origin."""
    if origin is None:
        return None
    if allowed is not None and origin.rstrip("/") == allowed.rstrip("/"):
        return None
    return f"cross-origin requests are refused (Origin {origin!r}); start the server with --cors ORIGIN to allow one"
