"""A provider's models, from its own `/models` list (Ollama's: what it has pulled, from `/api/tags`): type
to filter, Enter to use the model as the aggregator or as one more reference, for this session (a `custom`
preset; config.yaml is not touched)."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from ...config import Config
from ...llm import describe_error, list_models
from ...providers import start_server
from ...providers.lifecycle import ServerStart
from ...providers.ollama import OLLAMA, address, installed_models
from ...text.inert import inert
from ..widgets.footer import dialog_footer

SHOWN = 200  # a provider like OpenRouter serves hundreds: filter rather than scroll


class ModelPicker(ModalScreen[str | None]):
    """Dismisses with `provider:model`, or None."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Close", id="close_models"),
        Binding("down", "focus_list", "To the list", show=False),
    ]

    def __init__(self, config: Config, provider: str, *, as_aggregator: bool) -> None:
        super().__init__()
        self.config, self.provider, self.as_aggregator = config, provider, as_aggregator
        self.models: list[str] = []

    def compose(self) -> ComposeResult:
        role = "the aggregator" if self.as_aggregator else "a reference to add"
        with Vertical(id="model-picker", classes="modal-panel"):
            yield Static(f"{self.provider}: choose {role}", classes="modal-title")
            yield Input(placeholder="type to filter", id="model-filter")
            yield OptionList(id="model-options")
            yield Static(f"asking {self.provider} for its models…", id="model-status", classes="modal-hint")
        yield dialog_footer()

    def action_focus_list(self) -> None:
        self.query_one(OptionList).focus()

    def on_mount(self) -> None:
        self.query_one(Input).focus()
        self._fetch()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def _fetch(self) -> None:
        if self.provider == OLLAMA:
            self._fetch_ollama()
            return
        try:
            # A provider moa-chat runs itself (the local model) starts first: say so while it does.
            start_server(self.provider, self.config, report=self._starting)
            models = list_models(self.provider, self.config)
        except Exception as exc:  # any failure is the provider's news, shown in the picker
            self.app.call_from_thread(self._show_error, describe_error(exc))
            return
        self.app.call_from_thread(self._show_models, models)

    def _starting(self, event: ServerStart) -> None:
        if event.stage == "starting":  # on the starting thread: the status changes on the UI's
            self.app.call_from_thread(self._show_status, event.text)

    def _show_status(self, text: str) -> None:
        self.query_one("#model-status", Static).update(Content(inert(text)))

    def _fetch_ollama(self) -> None:
        """Ollama's own list of what it has pulled (asked again: it may have started, or pulled more, since)."""
        models = installed_models(self.config, fresh=True)
        answered = getattr(self.app, "ollama_answered", None)
        if answered is not None:
            self.app.call_from_thread(answered, models)  # the preset picker and the palette follow
        if models is None:
            self.app.call_from_thread(
                self._show_error,
                f"Ollama is not answering at {address(self.config)}: start it with `ollama serve`",
            )
        elif not models:
            self.app.call_from_thread(self._show_error, "Ollama has no models yet: `ollama pull llama3.2` fetches one")
        else:
            self.app.call_from_thread(self._show_models, list(models))

    def _show_error(self, reason: str) -> None:
        self.query_one("#model-status", Static).update(Content.styled(inert(reason), "$text-error"))

    def _show_models(self, models: list[str]) -> None:
        self.models = models
        self._filter(self.query_one(Input).value)

    def on_input_changed(self, event: Input.Changed) -> None:
        self._filter(event.value)

    def _filter(self, text: str) -> None:
        words = text.lower().split()
        matching = [m for m in self.models if all(w in m.lower() for w in words)]
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options(Option(inert(m), id=m) for m in matching[:SHOWN])
        if matching:
            options.highlighted = 0
        more = f" (first {SHOWN} shown: type to narrow)" if len(matching) > SHOWN else ""
        status = f"{len(matching)} of {len(self.models)} models{more} · Enter choose · ↓ to the list · Esc close"
        self.query_one("#model-status", Static).update(status if self.models else "no models listed")

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is not None:
            self._choose(options.get_option_at_index(options.highlighted).id)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self._choose(event.option.id)

    def _choose(self, model: str | None) -> None:
        if model:
            self.dismiss(f"{self.provider}:{model}")
