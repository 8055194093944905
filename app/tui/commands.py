"""Command palette entries: one per preset ("Switch preset: NAME"), and for each provider that can be
called, its models as the aggregator or as one more reference ("Models from openrouter: ...")."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from ..providers import has_key

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
