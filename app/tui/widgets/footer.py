"""The key footer: Textual's Footer, recomposed only when the keys it shows change, and without its leak.

Textual's Footer recomposes after every change to the screen's bindings: each focus change, each
`refresh_bindings`. Most change nothing it shows, yet each recompose mounts a fresh key per binding and
restyles it; at start-up the chat screen asked for 23 of them before its first frame, about a fifth of the
time to the first screen (bench/startup.py). This footer coalesces the requests into one per refresh and
skips it when the keys it would show are the ones it shows.

Textual's Footer also binds each FooterKey's `compact` to its own (`data_bind`), which registers the key as
a watcher of the Footer. A recompose replaces the keys, but the watcher list keeps the old ones (Textual
prunes it only when `compact` changes, which it never does here). The chat recomposes the footer a few times
a turn, as its bindings follow the turn's state, so every turn left about a dozen dead keys alive, each with
its styles and caches: at turn 40 that was 435 keys and 41,000 caches, and the garbage collector's passes
grew with them (bench/long_session.py).
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer

WATCHERS = "__watchers"  # where textual.reactive keeps an object's watchers (Textual is pinned: pyproject.toml)


class KeyFooter(Footer):
    _pending = False
    _shown: object = None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Textual's Footer stays empty until the screen first reports its bindings, after the first frame: the
        # keys then came two frames (30-40 ms) after the rest of the screen. The screen's and the app's own
        # keys are known at compose; a focused widget's, if it shows any, follow as with Textual's.
        self.set_reactive(Footer._bindings_ready, True)

    def compose(self) -> ComposeResult:
        self._shown = self._keys()
        return super().compose()

    def bindings_changed(self, screen: Screen) -> None:
        if not screen.app.app_focus or self._pending:
            return
        if self.is_attached and screen is self.screen:
            self._pending = True
            self.call_after_refresh(self._recompose_if_changed)

    def _keys(self) -> object:
        """What `compose` draws from: the shown bindings and the palette's, with their state, and the settings."""
        palette_key = self.app.COMMAND_PALETTE_BINDING
        bindings = [
            (key, binding, enabled, tooltip)
            for key, (_, binding, enabled, tooltip) in self.screen.active_bindings.items()
            if binding.show or key == palette_key
        ]
        return bindings, self.compact, self.show_command_palette, self.combine_groups

    async def _recompose_if_changed(self) -> None:
        self._pending = False
        if self.is_attached and self._keys() != self._shown:
            await self.recompose()

    async def recompose(self) -> None:
        await super().recompose()
        watchers = getattr(self, WATCHERS, {})
        for bound in watchers.values():
            bound[:] = [(node, callback) for node, callback in bound if node is self or node.is_attached]
