"""The key footer: Textual's Footer, recomposed only when the keys it shows change, and without its leak.

Textual's Footer recomposes after every change to the screen's bindings: each focus change, each
`refresh_bindings`. Most change nothing it shows, yet each recompose mounts a fresh key per binding and
restyles it; at start-up the chat screen asked for 23 of them before its first frame, about a fifth of the
time to the first screen (bench/startup.py). This footer coalesces the requests into one per refresh and
skips it when the keys it would show are the ones it shows.

It also forgets the keys a recompose replaced, which Textual's Footer keeps alive as watchers of its `compact`
(tui/textual_internals.py says why that needs Textual's private state).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer

from ..textual_internals import footer_keys_at_compose, forget_detached_watchers


class KeyFooter(Footer):
    _pending = False

    def __init__(self, *, id: str | None = None, palette: bool = True) -> None:
        """`palette`: show the command palette's key at the right edge (the chat's footer; a dialog's does not)."""
        super().__init__(id=id, show_command_palette=palette)
        footer_keys_at_compose(self)  # in the first frame, not a refresh later (textual_internals says why)

    _shown: object = None

    def compose(self) -> ComposeResult:
        self._shown = self._keys()
        return super().compose()

    def bindings_changed(self, screen: Screen[object]) -> None:
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
        forget_detached_watchers(self)


def dialog_footer() -> KeyFooter:
    """The footer a dialog composes last, over the chat's: the dialog's own keys (Close, Allow once, Rename…).

    Without it the chat's footer showed under a dialog, offering F2, F4, Ctrl+N and the rest, none of which
    works while the dialog is open (a modal screen's bindings stop at the screen, Textual's
    `_modal_binding_chain`). The palette's key is left out too: its commands act on the chat behind."""
    return KeyFooter(palette=False)
