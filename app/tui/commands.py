"""Command palette entries: one per preset ("Switch preset: NAME"), for each provider that can be called,
its models as the aggregator or as one more reference ("Models from openrouter: ..."), once a local
Ollama has answered, a Self-MoA on each of its models ("Ollama model llama3.2: Self-MoA"), and the chat's
own actions (`chat_commands`), each naming its key."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

from textual.app import SystemCommand
from textual.command import DiscoveryHit, Hit, Hits, Provider

from ..config.adhoc import SELF_MOA_SAMPLES
from ..engine.panel import panel
from ..providers import has_key, readiness
from ..providers.ollama import OLLAMA
from ..text.wording import plural
from .keys import key_texts
from .screens.chat import ChatScreen, find_chat


class PresetCommands(Provider):
    def _entries(self) -> list[tuple[str, str, Callable[[], object]]]:
        chat = find_chat(self.app)
        presets = chat.host.config.presets  # the config's own presets, not a session's ad hoc one
        entries: list[tuple[str, str, Callable[[], object]]] = []
        for name in sorted(presets):
            preset = presets[name]
            # Seats, as the picker and the sidebar count them: a model asked three times is three references.
            panel_text = f"{plural(len(panel(preset)), 'reference')} → {preset.aggregator.label}"
            state = readiness(chat.session.config, preset)
            help_text = f"{preset.description} — {panel_text}" + (f" — {state.reason}" if state.reason else "")
            entries.append((f"Switch preset: {name}", help_text, partial(chat.presets.choose, name)))
        return entries

    async def discover(self) -> Hits:
        for command, help_text, callback in self._entries():
            yield DiscoveryHit(command, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command, help_text, callback in self._entries():
            score = matcher.match(command)
            if score > 0:
                yield Hit(score, matcher.highlight(command), callback, help=help_text)


class ModelCommands(Provider):
    def _entries(self) -> list[tuple[str, str, Callable[[], object]]]:
        chat = find_chat(self.app)
        config = chat.session.config
        entries: list[tuple[str, str, Callable[[], object]]] = []
        for name in sorted(config.providers):
            if not has_key(name, config):
                continue  # its /models would only answer 401
            entries.append(
                (
                    f"Models from {name}: use as aggregator",
                    f"List {name}'s models and make one the aggregator, for this session",
                    partial(chat.presets.choose_model, name, as_aggregator=True),
                )
            )
            entries.append(
                (
                    f"Models from {name}: add a reference",
                    f"List {name}'s models and add one to the panel, for this session",
                    partial(chat.presets.choose_model, name, as_aggregator=False),
                )
            )
        for model in chat.host.ollama_models or ():  # once a local Ollama has answered (asked after the first paint)
            entries.append(
                (
                    f"Ollama model {model}: Self-MoA",
                    f"Every seat on ollama:{model}: {SELF_MOA_SAMPLES} answers and a synthesis, for this session",
                    partial(chat.presets.use_self_moa, f"{OLLAMA}:{model}"),
                )
            )
        return entries

    async def discover(self) -> Hits:
        for command, help_text, callback in self._entries():
            yield DiscoveryHit(command, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command, help_text, callback in self._entries():
            score = matcher.match(command)
            if score > 0:
                yield Hit(score, matcher.highlight(command), callback, help=help_text)


def chat_commands(chat: ChatScreen) -> Iterable[SystemCommand]:
    """The chat's entries in the command palette, each naming the key that does the same."""
    keys = key_texts(chat)

    def key(binding_id: str) -> str:
        return f" ({keys[binding_id]})" if binding_id in keys else ""

    yield SystemCommand(
        "Pick preset", f"Choose the MoA preset for the next turn{key('preset_picker')}", chat.action_preset_picker
    )
    yield SystemCommand("Next preset", f"Switch to the next preset{key('next_preset')}", chat.action_next_preset)
    yield SystemCommand(
        "Previous preset", f"Switch to the previous preset{key('previous_preset')}", chat.action_previous_preset
    )
    if chat.turn_running:
        yield SystemCommand(
            "Cancel turn",
            f"Stop the running turn; the partial reply stays{key('cancel_turn')}",
            chat.action_cancel_turn,
        )
    yield SystemCommand(
        "Trace of the last turn",
        "Every call of the last turn: request, answer, usage, cost (needs save_traces: true)",
        chat.action_trace,
    )
    yield SystemCommand(
        "Side by side",
        f"The references' answers to the last reply, side by side{key('side_by_side')}",
        chat.action_side_by_side,
    )
    yield SystemCommand(
        "Toggle sidebar", f"Show or hide the reference sidebar{key('toggle_sidebar')}", chat.action_toggle_sidebar
    )
    if chat.session.messages and not chat.turn_running:
        yield SystemCommand(
            "Compact now",
            f"Summarise the earlier exchanges, to keep the conversation within the models' windows{key('compact')}",
            chat.action_compact,
        )
    if chat.last_reply is not None:
        yield SystemCommand(
            "Copy reply", f"Copy the last reply to the clipboard{key('copy_reply')}", chat.action_copy_reply
        )
        yield SystemCommand(
            "Copy code block", f"Copy the last code block of the last reply{key('copy_code')}", chat.action_copy_code
        )
    if chat.session.store is not None:
        yield SystemCommand(
            "Sessions", f"Search, open, rename or delete stored sessions{key('sessions')}", chat.action_sessions
        )
    yield SystemCommand(
        "New conversation",
        f"Clear the conversation and start again{key('new_conversation')}",
        chat.action_new_conversation,
    )
