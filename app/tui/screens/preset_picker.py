"""F2: every preset, one aligned row each, in the order F3 cycles them; Enter switches.

A preset that cannot run (its aggregator's key is not set, the local extra is not installed, its Ollama is
not running) is dimmed and says what it needs, in the words `moa-chat presets` uses; choosing it explains how
to fix that instead of switching to a chat that would only fail. What it needs follows
its models on the same line when the row has room, else takes a line of its own (60 columns): it is the one
part of the row that must never be cut.

When an Ollama server on this machine has answered, its models follow the presets: Enter on one starts a
Self-MoA on that model for the session (a `custom` preset), and a preset naming a model Ollama has not
pulled says so. Ollama is asked again as the picker opens: its answer updates the rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ...config import Config
from ...config.adhoc import SELF_MOA_SAMPLES
from ...engine.panel import panel
from ...providers import Readiness, cycle_order, readiness
from ...providers.ollama import OLLAMA, not_pulled
from ...text.inert import inert
from ..widgets.footer import dialog_footer

MODEL_OPTION = "ollama-model:"  # option ids of Ollama's models; a preset's option id is its name


@dataclass(frozen=True)
class SelfMoA:
    """The picker's answer when a model was chosen rather than a preset: `provider:model`."""

    spec: str


MAX_LIST, MIN_LIST = 30, 3  # the list's rows at most, and at least however short the screen


class PresetPicker(ModalScreen[str | SelfMoA | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "Close", id="close_picker")]

    def __init__(self, config: Config, active: str, *, ollama: tuple[str, ...] | None = None) -> None:
        super().__init__()
        self.config, self.active = config, active
        self.states = self._states()
        self.ollama = ollama  # the models Ollama has pulled; None when it has not answered

    def compose(self) -> ComposeResult:
        with Vertical(id="picker", classes="modal-panel"):
            yield Static("Switch preset", classes="modal-title")
            yield OptionList(*self._options(), id="preset-options")
            yield Static("", id="picker-why", classes="modal-error")
            yield Static(
                Content.assemble(("Enter", "bold"), " switch · ", ("Esc", "bold"), " close"), classes="modal-hint"
            )
        yield dialog_footer()

    def _states(self) -> dict[str, Readiness]:
        return {p.name: readiness(self.config, p) for p in cycle_order(self.config)}

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
            # Nothing is "not pulled" while Ollama has not answered, or has no models to compare with.
            unpulled = not_pulled(preset, self.ollama) if self.ollama else []
            if not state.runnable:
                status = Content.styled(state.reason or "", "$text-warning")
            elif state.missing:
                status = Content.styled(f"needs {state.needs} for some references", "$text-warning")
            elif unpulled:
                status = Content.styled(f"Ollama has not pulled {', '.join(unpulled)}", "$text-warning")
            else:
                status = Content("")
            indent = " " * (width + 4)
            fits = 2 + width + 2 + len(seats) + 2 + status.cell_length <= self._room()
            prompt = Content.assemble(
                ("● " if active else "  ", "$accent"),
                (f"{preset.name:<{width}}", f"bold {'$accent' if active else ''} {dim}".strip()),
                "  ",
                (inert(preset.description or ""), f"{dim} italic".strip()),
                "\n",
                indent,
                (seats, dim or "$text-muted"),
                *(("  ", status) if fits or not status else ("\n", indent, status)),
            )
            options.append(Option(prompt, id=preset.name))
        return options + self._model_options(width)

    def _room(self) -> int:
        """The columns a row has: the screen's, less the panel's share of it, frame, padding and scrollbar
        (modals.tcss: 90% up to 110, a round border, padding 2)."""
        return min(self.app.size.width * 9 // 10, 110) - 2 - 4 - 2

    def _model_options(self, width: int) -> list[Option | None]:
        """Ollama's models, after the presets: each one a Self-MoA for this session."""
        if not self.ollama:
            return []
        options: list[Option | None] = [
            None,
            Option(
                Content.assemble(
                    ("  Ollama's models", "bold"),
                    (
                        f"  Self-MoA: {SELF_MOA_SAMPLES} answers and a synthesis by one model, for this session",
                        "$text-muted",
                    ),
                ),
                disabled=True,
            ),
        ]
        for model in self.ollama:
            label = f"{OLLAMA}:{model}"
            prompt = Content.assemble(
                "  ",
                (f"{inert(model):<{width}}", "bold"),
                "  ",
                (f"{SELF_MOA_SAMPLES} samples → {inert(label)}", "$text-muted"),
            )
            options.append(Option(prompt, id=MODEL_OPTION + model))
        return options

    def offer_ollama(self, models: tuple[str, ...] | None) -> None:
        """Ollama answered while the picker was open: show its models and which presets can run now (the
        highlighted row stays)."""
        self.ollama = models
        self.states = self._states()
        self._rebuild()

    def on_resize(self) -> None:
        self._rebuild()  # a row's needs move to a line of their own, or back, with the width

    def _rebuild(self) -> None:
        options = self.query_one(OptionList)
        highlighted = options.highlighted_option
        options.clear_options()
        options.add_options(self._options())
        if highlighted is not None and highlighted.id is not None:
            options.highlighted = options.get_option_index(highlighted.id)
        options.styles.max_height = MAX_LIST  # as tall as it likes, then fitted to the panel
        self.call_after_refresh(self.fit_list)

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        if self.active in self.states:
            options.highlighted = options.get_option_index(self.active)
        options.focus()

    def _explain(self, text: str) -> None:
        why = self.query_one("#picker-why", Static)
        why.update(Content(inert(text)))
        why.display = bool(text)
        self.call_after_refresh(self.fit_list)

    def fit_list(self) -> None:
        """A list taller than the panel's room under its title and over its hint gives up the rows it overflows
        by, and scrolls: at its own height, on a short screen, it would push the hint out of the panel."""
        panel, options = self.query_one("#picker", Vertical), self.query_one(OptionList)
        last = [child for child in panel.children if child.display][-1]
        overflow = last.region.bottom + last.styles.margin.bottom - panel.content_region.bottom
        if overflow > 0:
            options.styles.max_height = max(MIN_LIST, options.size.height - overflow)

    def on_option_list_option_highlighted(self, _event: OptionList.OptionHighlighted) -> None:
        self._explain("")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        chosen = event.option.id or ""
        if chosen.startswith(MODEL_OPTION) and self.ollama and chosen.removeprefix(MODEL_OPTION) in self.ollama:
            self.dismiss(SelfMoA(f"{OLLAMA}:{chosen.removeprefix(MODEL_OPTION)}"))
            return
        state = self.states.get(chosen)
        if state is not None and not state.runnable:
            # Switching would only fail at the first prompt: say what to do instead.
            self._explain(state.problem or "")
            return
        self.dismiss(event.option.id)
