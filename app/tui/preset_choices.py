"""The ways the chat's preset changes: by name (the palette), stepping through those that can run (F3,
Shift+F3), the preset picker (F2, with a Self-MoA on a local Ollama model), or a provider's model as the
aggregator or one more reference. Each change is the session's; what the chat shows of it is `switched`'s."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from textual.screen import Screen

from ..config import ConfigError, Preset
from ..providers import cycle_order, next_runnable, readiness
from ..session import ChatSession
from .host import ChatHost
from .screens.model_picker import ModelPicker
from .screens.preset_picker import PresetPicker, SelfMoA


class PresetChoices:
    def __init__(
        self, session: ChatSession, screen: Screen[Any], host: ChatHost, switched: Callable[[Preset], None]
    ) -> None:
        """`screen` shows the pickers and the notices; `switched` shows a preset that has become current."""
        self.session = session
        self._screen = screen
        self._host = host
        self._switched = switched
        self._told_skipped: tuple[tuple[str, str | None], ...] = ()  # the skipped presets last told, and why

    def switch(self, name: str) -> None:
        self._switched(self.session.switch_preset(name))

    def choose(self, name: str) -> None:
        """Switch to `name` (the palette) if it can run here; else say why, as the picker does, and stay."""
        state = readiness(self.session.config, self.session.config.preset(name))
        if not state.runnable:
            self._screen.notify(
                state.problem or f"{name} cannot run here", title="Preset not switched", severity="error", markup=False
            )
            return
        self.switch(name)

    def cycle(self, step: int) -> None:
        # Only presets that can run: stepping onto one that cannot would just fail the next prompt. Say which
        # ones are passed over and why, the first time and whenever that changes (an Ollama started or stopped).
        config = self.session.config
        skipped = [state for state in map(partial(readiness, config), cycle_order(config)) if not state.runnable]
        told = tuple((state.preset.name, state.reason) for state in skipped)
        if told and told != self._told_skipped:
            why = ", ".join(f"{name} ({reason})" for name, reason in told)
            self._screen.notify(f"F3 skips the presets that cannot run here: {why}.", timeout=10, markup=False)
        self._told_skipped = told
        preset = next_runnable(config, self.session.preset.name, step)
        if preset is None:
            self._screen.notify(
                "No other preset can run here; F2 lists what each one needs.",
                title="Preset not switched",
                severity="warning",
            )
            return
        self.switch(preset.name)

    def choose_model(self, provider: str, *, as_aggregator: bool) -> None:
        """List `provider`'s models; the one chosen becomes the aggregator, or joins the references."""

        def chosen(spec: str | None) -> None:
            if not spec:
                return
            try:
                preset = self.session.use_model(spec, as_aggregator=as_aggregator)
            except ConfigError as exc:
                self._screen.notify(str(exc), title="Model not used", severity="error")
                return
            self._switched(preset)

        picker = ModelPicker(self.session.config, provider, as_aggregator=as_aggregator)
        self._screen.app.push_screen(picker, chosen)

    def use_self_moa(self, spec: str) -> None:
        """A Self-MoA on one model (`provider:model`, e.g. one of Ollama's) for this session."""
        try:
            preset = self.session.use_self_moa(spec)
        except ConfigError as exc:
            self._screen.notify(str(exc), title="Model not used", severity="error")
            return
        self._switched(preset)

    def pick(self) -> None:
        """The preset picker: a preset, or a Self-MoA on one of a local Ollama's models."""

        def chosen(choice: str | SelfMoA | None) -> None:
            if isinstance(choice, SelfMoA):
                self.use_self_moa(choice.spec)
            elif choice and choice != self.session.preset.name:
                self.switch(choice)

        picker = PresetPicker(self.session.config, self.session.preset.name, ollama=self._host.ollama_models)
        self._screen.app.push_screen(picker, chosen)
        self._host.recheck_ollama()  # Ollama may have started or stopped since it was last asked

    def announce_preflight(self, preset: Preset) -> None:
        """What would stop `preset`'s next turn (a missing key), or slow it, as notices."""
        error, warning = self.session.preflight(preset)
        for text, level in ((error, "error"), (warning, "warning")):
            if text:
                self._screen.notify(text, severity="error" if level == "error" else "warning", timeout=8, markup=False)
