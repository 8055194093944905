"""F2: every preset, one aligned row each, in the order F3 cycles them; Enter switches.

A preset that cannot run (its aggregator's key is not set) is dimmed and says which variable it needs;
choosing it explains how to fix that instead of switching to a chat that would only fail.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ...config import Config
from ...engine.panel import panel
from ...providers import Readiness, cycle_order, readiness
from ...terminal import inert


class PresetPicker(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "Close", id="close_picker")]

    def __init__(self, config: Config, active: str) -> None:
        super().__init__()
        self.config, self.active = config, active
        self.states: dict[str, Readiness] = {p.name: readiness(config, p) for p in cycle_order(config)}

    def compose(self) -> ComposeResult:
        with Vertical(id="picker", classes="modal-panel"):
            yield Static("Switch preset", classes="modal-title")
            yield OptionList(*self._options(), id="preset-options")
            yield Static("", id="picker-why", classes="modal-error")
            yield Static(
                Content.assemble(("Enter", "bold"), " switch · ", ("Esc", "bold"), " close"), classes="modal-hint"
            )

    def _options(self) -> list[Option | None]:
        states = list(self.states.values())
        width = max(len(name) for name in self.states)
        options: list[Option | None] = []
        for position, state in enumerate(states):
            preset = state.preset
            if position and preset.bundled != states[position - 1].preset.bundled:
                options.append(None)  # a rule between the user's presets and the bundled ones
            active = preset.name == self.active
            dim = "" if state.runnable else "dim"
            refs = len(panel(preset))  # seats: a model asked 3 times (samples) counts 3
            seats = f"{refs} reference{'s' if refs != 1 else ''} → {preset.aggregator.label}"
            if not state.runnable:
                status = Content.styled(f"needs {state.needs or 'a fix'}", "$text-warning")
            elif state.missing:
                status = Content.styled(f"needs {state.needs} for some references", "$text-warning")
            else:
                status = Content("")
            prompt = Content.assemble(
                ("● " if active else "  ", "$accent"),
                (f"{preset.name:<{width}}", f"bold {'$accent' if active else ''} {dim}".strip()),
                "  ",
                (inert(preset.description or ""), f"{dim} italic".strip()),
                "\n  ",
                (" " * width, ""),
                "  ",
                (seats, dim or "$text-muted"),
                "  ",
                status,
            )
            options.append(Option(prompt, id=preset.name))
        return options

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        if self.active in self.states:
            options.highlighted = options.get_option_index(self.active)
        options.focus()

    def _explain(self, text: str) -> None:
        why = self.query_one("#picker-why", Static)
        why.update(Content(inert(text)))
        why.display = bool(text)

    def on_option_list_option_highlighted(self, _event: OptionList.OptionHighlighted) -> None:
        self._explain("")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        state = self.states.get(event.option.id or "")
        if state is not None and not state.runnable:
            # Switching would only fail at the first prompt: say what to do instead.
            self._explain(state.problem or "")
            return
        self.dismiss(event.option.id)
