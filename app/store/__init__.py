"""The session store: every conversation in one SQLite database, versioned and private."""

from .database import StoreError, default_path
from .records import SessionSummary, StoredCall, StoredMessage, StoredTurn
from .session_store import SessionStore, make_title

__all__ = [
    "SessionStore",
    "SessionSummary",
    "StoreError",
    "StoredCall",
    "StoredMessage",
    "StoredTurn",
    "default_path",
    "make_title",
]
