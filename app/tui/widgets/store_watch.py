"""The session database as the chat shows it: once damage is seen (when the store checks its file after
opening, or by any read or write since), the header says nothing is being saved and the log says why, once.

The store hears of the damage on whichever thread met it (the check's own, a turn's, the UI's), so it is
passed on as a message, which any thread may post; this widget, which shows nothing itself, takes it.
"""

from __future__ import annotations

from textual.message import Message
from textual.widget import Widget

from ...store import SessionStore
from .chat_log import ChatLog, NoticeLine
from .header import StatusHeader


class StoreWatch(Widget):
    DEFAULT_CSS = "StoreWatch { display: none; }"

    class Damaged(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, store: SessionStore | None) -> None:
        super().__init__()
        self.store = store

    def on_mount(self) -> None:
        if self.store is not None:
            self.store.health.on_damage(self._heard)

    def _heard(self, text: str) -> None:
        self.post_message(self.Damaged(text))

    async def on_store_watch_damaged(self, event: Damaged) -> None:
        self.screen.query_one(StatusHeader).show_not_saving()
        log = self.screen.query_one(ChatLog)
        await log.mount(NoticeLine(f"Conversations are not being saved: {event.text}", "error"))
        log.scroll_end(animate=False)
