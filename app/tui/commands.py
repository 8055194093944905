"""Command palette entries: one per preset ("Switch preset: NAME"), for each provider that can be called,
its models as the aggregator or as one more reference ("Models from openrouter: ..."), and once a local
Ollama has answered, a Self-MoA on each of its models ("Ollama model llama3.2: Self-MoA")."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from ..config.adhoc import SELF_MOA_SAMPLES
from ..providers import has_key
from ..providers.ollama import OLLAMA

if TYPE_CHECKING:
    from .app import MoAChatApp


class PresetCommands(Provider):
    def _entries(self) -> list[tuple[str, str, object]]:
        app: MoAChatApp = self.app  # type: ignore[assignment]
        chat = app.chat
        entries: list[tuple[str, str, object]] = []
        for name in sorted(app.config.presets):
            preset = app.config.presets[name]
            help_text = f"{preset.description} — {len(preset.references)} references → {preset.aggregator.label}"
            entries.append((f"Switch preset: {name}", help_text, partial(chat.switch_preset, name)))
        return entries

    async def discover(self) -> Hits:
        for command, help_text, callback in self._entries():
            yield DiscoveryHit(command, callback, help=help_text)  # type: ignore[arg-type]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command, help_text, callback in self._entries():
            score = matcher.match(command)
            if score > 0:
                yield Hit(score, matcher.highlight(command), callback, help=help_text)  # type: ignore[arg-type]


class ModelCommands(Provider):
    def _entries(self) -> list[tuple[str, str, object]]:
        app: MoAChatApp = self.app  # type: ignore[assignment]
        chat = app.chat
        config = chat.session.config
        entries: list[tuple[str, str, object]] = []
        for name in sorted(config.providers):
            if not has_key(name, config):
                continue  # its /models would only answer 401
            entries.append(
                (
                    f"Models from {name}: use as aggregator",
                    f"List {name}'s models and make one the aggregator, for this session",
                    partial(chat.choose_model, name, as_aggregator=True),
                )
            )
            entries.append(
                (
                    f"Models from {name}: add a reference",
                    f"List {name}'s models and add one to the panel, for this session",
                    partial(chat.choose_model, name, as_aggregator=False),
                )
            )
        for model in app.ollama_models or ():  # once a local Ollama has answered (asked after the first paint)
            entries.append(
                (
                    f"Ollama model {model}: Self-MoA",
                    f"Every seat on ollama:{model}: {SELF_MOA_SAMPLES} answers and a synthesis, for this session",
                    partial(chat.use_self_moa, f"{OLLAMA}:{model}"),
                )
            )
        return entries

    async def discover(self) -> Hits:
        for command, help_text, callback in self._entries():
            yield DiscoveryHit(command, callback, help=help_text)  # type: ignore[arg-type]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command, help_text, callback in self._entries():
            score = matcher.match(command)
            if score > 0:
                yield Hit(score, matcher.highlight(command), callback, help=help_text)  # type: ignore[arg-type]
