"""Every reference answer of one reply next to the others, to compare what the aggregator read.

Columns when the terminal has room for each to be readable (MIN_COLUMN cells), tabs otherwise; the choice
is made again when the terminal is resized. In columns, scrolling one answer scrolls the others to the
same proportion of their length, so that the same stage of each argument stays in view side by side.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static, TabbedContent, TabPane

from ...session.reply_parts import PanelAnswer
from ...text.inert import inert
from ...text.wording import plural
from ..widgets.footer import dialog_footer
from ..widgets.markdown import ReplyMarkdown
from ..widgets.reference_card import WORDS

MIN_COLUMN = 40  # cells: narrower than this, a paragraph reads a few words a line
GUTTER = 1  # cells between two columns
CHROME = 4  # the panel's border and padding, left and right


def fits_columns(count: int, width: int) -> bool:
    """Whether `count` answers fit side by side on a screen `width` cells wide."""
    return count > 0 and width - CHROME >= count * MIN_COLUMN + (count - 1) * GUTTER


def answer_markdown(answer: PanelAnswer) -> str:
    text = answer.text.strip()
    return inert(text) if text else f"*No answer: {inert(answer.error or WORDS.get(answer.status, answer.status))}*"


def heading(number: int, answer: PanelAnswer) -> Content:
    return Content.assemble(
        (f"{number} ", "$text-muted"),
        (inert(answer.label), "bold"),
        (f"  {WORDS.get(answer.status, answer.status)}", "$text-muted"),
    )


class SideBySide(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q", "dismiss(None)", "Close", id="close_side_by_side"),
        # An answer that scrolls sideways (a wide table) keeps the arrows: the step then takes Tab.
        Binding("left", "step(-1)", "Previous answer", show=False, id="previous_answer"),
        Binding("right", "step(1)", "Next answer", show=False, id="next_answer"),
    ]

    def __init__(self, answers: tuple[PanelAnswer, ...], aggregator: str) -> None:
        super().__init__()
        self.answers, self.aggregator = answers, aggregator
        self.columns = False  # set as it is composed, for the terminal's width then
        self._following = False  # while one column moves the others, their own moves lead nothing

    def compose(self) -> ComposeResult:
        count = len(self.answers)
        self.columns = fits_columns(count, self.app.size.width)
        with Vertical(id="side-by-side", classes="modal-panel"):
            yield Static(
                Content.assemble(
                    ("Side by side", "bold"),
                    (f" — the {plural(count, 'answer')} {inert(self.aggregator)} read", "$text-muted"),
                ),
                classes="modal-title",
            )
            if not self.answers:
                yield Static("No reference answers were kept for this reply.", classes="detail-empty")
            elif self.columns:
                with Horizontal(id="sbs-columns"):
                    for number, answer in enumerate(self.answers, 1):
                        with Vertical(classes="sbs-column"):
                            yield Static(heading(number, answer), classes="sbs-heading")
                            with VerticalScroll(classes="sbs-scroll"):
                                yield ReplyMarkdown(answer_markdown(answer))
            else:
                with TabbedContent(id="sbs-tabs"):
                    for number, answer in enumerate(self.answers, 1):
                        with TabPane(Content(f"{number} {inert(answer.label)}"), id=f"sbs-answer-{number}"):
                            yield Static(heading(number, answer), classes="sbs-heading")
                            with VerticalScroll(classes="sbs-scroll"):
                                yield ReplyMarkdown(answer_markdown(answer))
            yield Static(self._hint(), classes="modal-hint")
        yield dialog_footer()

    def _hint(self) -> Content:
        if len(self.answers) < 2:
            return Content.assemble(("Esc", "bold"), " close")
        hint = Content.assemble(("Esc", "bold"), " close · ", ("← →", "bold"), " another answer")
        if self.columns:
            return hint + Content(" · scroll one, the others follow")
        return hint + Content(f" · columns from {CHROME + len(self.answers) * (MIN_COLUMN + GUTTER) - GUTTER} wide")

    def _scrolls(self) -> list[VerticalScroll]:
        return list(self.query(".sbs-scroll").results(VerticalScroll))

    def action_step(self, step: int) -> None:
        """The next answer (or the previous one): its column takes the focus, or its tab opens."""
        scrolls = self._scrolls()
        if len(scrolls) < 2:
            return
        if self.columns:
            now = next((i for i, scroll in enumerate(scrolls) if scroll.has_focus), 0)
            scrolls[(now + step) % len(scrolls)].focus()
            return
        tabs = self.query_one(TabbedContent)
        panes = [pane.id for pane in tabs.query(TabPane) if pane.id]
        now = panes.index(tabs.active) if tabs.active in panes else 0
        tabs.active = panes[(now + step) % len(panes)]
        self.call_after_refresh(self._focus_active)

    def _focus_active(self) -> None:
        tabs = self.query_one(TabbedContent)
        pane = tabs.active_pane
        if pane is not None:
            pane.query_one(VerticalScroll).focus()

    def on_mount(self) -> None:
        self._link()

    def _link(self) -> None:
        scrolls = self._scrolls()
        if scrolls:
            scrolls[0].focus()
        if not self.columns:
            return
        for scroll in scrolls:
            self.watch(scroll, "scroll_y", self._follower(scroll), init=False)

    def _follower(self, leader: VerticalScroll) -> Callable[[], None]:
        def follow() -> None:
            self._follow(leader)

        return follow

    def _follow(self, leader: VerticalScroll) -> None:
        if self._following:
            return
        fraction = leader.scroll_y / leader.max_scroll_y if leader.max_scroll_y else 0.0
        self._following = True
        try:
            for other in self._scrolls():
                if other is not leader:
                    other.scroll_to(y=fraction * other.max_scroll_y, animate=False, immediate=True)
        finally:
            self._following = False

    async def on_resize(self, event: events.Resize) -> None:
        columns = fits_columns(len(self.answers), event.size.width)
        if columns != self.columns:
            await self.recompose()
            self._link()
