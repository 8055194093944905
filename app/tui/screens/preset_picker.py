"""F2: every preset with its description, references and aggregator; Enter switches."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ...config import Config


class PresetPicker(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "Close", id="close_picker")]

    def __init__(self, config: Config, active: str) -> None:
        super().__init__()
        self.config, self.active = config, active

    def compose(self) -> ComposeResult:
        with Vertical(id="picker", classes="modal-panel"):
            yield Static("Switch preset", classes="modal-title")
            yield OptionList(*self._options(), id="preset-options")
            yield Static(
                Content.assemble(("Enter", "bold"), " switch · ", ("Esc", "bold"), " close"), classes="modal-hint"
            )

    def _options(self) -> list[Option]:
        options = []
        for name in sorted(self.config.presets):
            preset = self.config.presets[name]
            active = name == self.active
            refs = ", ".join(slot.label for slot in preset.references)
            prompt = Content.assemble(
                ("● " if active else "  ", "$accent"),
                (name, "bold $accent" if active else "bold"),
                ("  (active)" if active else "", "$text-muted"),
                "\n    ",
                (preset.description or "", "italic"),
                "\n    ",
                ("references ", "$text-muted"),
                refs,
                "\n    ",
                ("aggregator ", "$text-muted"),
                preset.aggregator.label,
            )
            options.append(Option(prompt, id=name))
        return options

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        names = sorted(self.config.presets)
        if self.active in names:
            options.highlighted = names.index(self.active)
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)
