"""What the chat does about its models' windows (docs/context.md): refuse a prompt no model's window can hold,
compact the conversation on request ("Compact now"), and open a compaction's summary from its marker."""

from __future__ import annotations

from typing import Any

from textual.screen import Screen

from ..engine.events import CompactionEnded
from ..session import ChatSession
from ..session.attachments import Attachment
from .widgets.chat_log import ChatLog
from .widgets.compaction_marker import CompactionMarker


def refused(screen: Screen[Any], session: ChatSession, content: str, files: list[Attachment]) -> bool:
    """Whether the prompt cannot be sent, even alone, to one of the preset's models whose window is known: it
    stays in the box, and a notice names the files, their sizes and the window."""
    problem = session.context.too_long(session.config, session.preset, content, files)
    if problem is None:
        return False
    screen.notify(f"{problem[0].upper()}{problem[1:]}.", title="Not sent", severity="error", timeout=12)
    return True


def compact_now(screen: Screen[Any], session: ChatSession, log: ChatLog) -> None:
    """Summarise the conversation's earlier exchanges now, on a worker; its marker joins the log's end."""
    if not session.messages:
        screen.notify("There is no conversation to compact yet.", severity="warning")
        return
    screen.notify("Compacting the conversation…", timeout=3)

    def work() -> None:
        ended = session.compact()
        screen.app.call_from_thread(screen.call_later, shown, ended)

    async def shown(ended: CompactionEnded | None) -> None:
        if ended is None:
            screen.notify("Nothing to compact: the recent exchanges are kept as they are.", severity="information")
        elif ended.error is not None:
            screen.notify(f"The conversation was not compacted: {ended.error}. It is as it was.", severity="error")
        else:
            await log.mount(CompactionMarker(ended))
            log.scroll_end(animate=False)
            screen.notify(ended.line, title="Compacted")

    screen.run_worker(work, name="compact", group="compact", exclusive=True, thread=True, exit_on_error=False)


def open_summary(screen: Screen[Any], marker: CompactionMarker) -> None:
    from .screens.summary_view import SummaryView

    screen.app.push_screen(SummaryView(marker.compacted))
