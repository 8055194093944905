"""The key footer: Textual's Footer, without the leak that made a long chat slower turn by turn.

Textual's Footer binds each FooterKey's `compact` to its own (`data_bind`), which registers the key as a
watcher of the Footer. A recompose replaces the keys, but the watcher list keeps the old ones (Textual prunes it
only when `compact` changes, which it never does here). The chat recomposes the footer a few times a turn, as
its bindings follow the turn's state, so every turn left about a dozen dead keys alive, each with its styles
and caches: at turn 40 that was 435 keys and 41,000 caches, and the garbage collector's passes grew with them
(bench/long_session.py).
"""

from __future__ import annotations

from textual.widgets import Footer

WATCHERS = "__watchers"  # where textual.reactive keeps an object's watchers (Textual is pinned: pyproject.toml)


class KeyFooter(Footer):
    async def recompose(self) -> None:
        await super().recompose()
        watchers = getattr(self, WATCHERS, {})
        for bound in watchers.values():
            bound[:] = [(node, callback) for node, callback in bound if node is self or node.is_attached]
