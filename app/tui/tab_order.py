"""Tab and Shift+Tab on the chat screen: they move among what is on screen and never scroll the log.

Tab from the prompt goes to the panel's first card, Shift+Tab to the log's newest stop in view (a tool call,
a thought, the earlier-messages line), else the panel's last card (the aggregator's). With the panel hidden
(F4, or a screen too narrow for it), Tab shows it over the log, not beside it (the log would wrap its lines
again), until the focus leaves it. The log's stops scrolled out of view are no Tab stops: focused, they would
scroll the log to them.
"""

from __future__ import annotations

from textual.widget import Widget

from .pacing import PromptlyPainted
from .widgets.chat_log import ChatLog
from .widgets.prompt_input import PromptInput
from .widgets.sidebar import ReferenceSidebar


class TabOrder(PromptlyPainted[None]):
    """The chat screen's Tab stops: its prompt, its log and its panel."""

    @property
    def sidebar(self) -> ReferenceSidebar:
        return self.query_one(ReferenceSidebar)

    @property
    def chat_log(self) -> ChatLog:
        return self.query_one(ChatLog)

    @property
    def focus_chain(self) -> list[Widget]:
        chain = super().focus_chain
        return self.chat_log.in_view(chain, self.focused) if self.is_mounted else chain

    def focus_prompt(self) -> None:
        self.set_focus(self.query_one(PromptInput))  # now, not after a refresh as Widget.focus: the next key lands here

    def on_prompt_input_tab_out(self, event: PromptInput.TabOut) -> None:
        if event.forward or not self.chat_log.focus_newest_stop():
            self.sidebar.focus_card(first=event.forward)

    def on_reference_sidebar_left(self) -> None:
        """Shift+Tab on the first card: back to the prompt, where Tab came from."""
        self.focus_prompt()
