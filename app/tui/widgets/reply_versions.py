"""A reply asked for again inside its turn: the aggregator's stream was cut off after text had arrived, and the
engine asks once more (ReplyRestarted). What the reply had shown stays as an earlier version, marked cut off
(the store keeps it as the exchange's previous version, reached with F9); the fresh reply streams in its place,
after a line that says what happened."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from ...session.reply_parts import CutVersion
from ...text.inert import inert


class RestartNote(Static):
    """Where a reply starts afresh: the earlier version was cut off and is kept."""

    def __init__(self, cut: CutVersion) -> None:
        why = inert(cut.reason)
        super().__init__(
            Content.assemble(("↻ ", "bold"), f"{why} — asked again; the cut-off reply stays as the previous version"),
            classes="reply-warning reply-restarted",
        )
        self.cut = cut

    @property
    def event(self) -> CutVersion:
        """What to build this note again from (named as a tool block's, so a reply keeps its parts alike)."""
        return self.cut
