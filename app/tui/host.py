"""What a screen needs of the app around it, as protocols: the screens are handed the app (or anything else that
does these things) and never import it, so the app can import them."""

from __future__ import annotations

from typing import Protocol

from ..config import Config


class Copier(Protocol):
    def copy_text(self, text: str, what: str) -> None:
        """Copy `text` to the clipboard, then say what became of it (`what` names the text)."""
        ...


class ChatHost(Copier, Protocol):
    """The chat screen's app: the clipboard, the config it started with (its presets are the palette's), and
    what a local Ollama has (None until it answers, or when it does not run)."""

    @property
    def config(self) -> Config: ...

    @property
    def ollama_models(self) -> tuple[str, ...] | None: ...

    def recheck_ollama(self) -> object:
        """Ask Ollama again, off the UI's thread (a preset list is about to be shown): its answer comes back to
        whatever shows which presets can run."""
        ...
