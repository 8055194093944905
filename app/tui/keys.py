"""The keys as they really are: read from the active bindings, so a `keymap:` remap shows everywhere a key
is named (help, palette, welcome)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.binding import Binding
from textual.screen import Screen


def declared_bindings(screen: Screen[Any]) -> list[Binding]:
    """Every binding with an id that the app, this screen and its widgets declare, in declaration order."""
    from .widgets.prompt_input import PromptInput

    found: list[Binding] = []
    for owner in (screen.app, screen, *screen.query(PromptInput)):
        found.extend(b for b in owner.BINDINGS if isinstance(b, Binding) and b.id)
    return found


def key_texts(screen: Screen[Any]) -> dict[str, str]:
    """Binding id → the keys that trigger it now, as shown to the user ("F2", "Ctrl+J / Shift+Enter")."""
    keys: dict[str, list[str]] = {}
    # What Textual would dispatch now, keymap applied: the screen's chain (focused widget, screen, app).
    for key, active in screen.active_bindings.items():
        if active.binding.id:
            keys.setdefault(active.binding.id, []).append(key_label(key))
    # Bindings of widgets that are not focused now: their declared keys, remapped as Textual would.
    keymap = _keymap_of(screen.app)
    for binding in declared_bindings(screen):
        if binding.id and binding.id not in keys:
            keys[binding.id] = [key_label(key) for key in keymap.get(binding.id, binding.key).split(",")]
    return {binding_id: " / ".join(_unique(labels)) for binding_id, labels in keys.items()}


_NAMES = {"escape": "Esc", "pageup": "PgUp", "pagedown": "PgDn", "enter": "Enter", "tab": "Tab", "space": "Space"}


def key_label(key: str) -> str:
    """A key as prose names it: ctrl+j → Ctrl+J, f2 → F2, shift+enter → Shift+Enter, escape → Esc."""
    parts = key.strip().split("+")
    *modifiers, name = parts
    label = _NAMES.get(
        name, name.upper() if len(name) == 1 or (name[:1] == "f" and name[1:].isdigit()) else name.title()
    )
    return "+".join([*(m.title() for m in modifiers), label])


def _keymap_of(app: object) -> dict[str, str]:
    config = getattr(app, "config", None)
    return dict(getattr(config, "keymap", None) or {})


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def help_rows(screen: Screen[Any]) -> list[tuple[str, str]]:
    """(keys, what they do) for the help screen, in the order a newcomer needs them."""
    from .widgets.prompt_input import PromptInput

    keys = key_texts(screen)
    app = screen.app

    def rows(bindings: Iterable[object]) -> list[tuple[str, str]]:
        return [
            (keys[b.id], b.tooltip or b.description)
            for b in bindings
            if isinstance(b, Binding) and b.id and b.id in keys
        ]

    palette = key_label(app.COMMAND_PALETTE_BINDING)
    return [
        ("Enter", "send the prompt"),
        *rows(PromptInput.BINDINGS),
        ("↑ / ↓", "earlier prompts (at the first / last line)"),
        *rows(type(screen).BINDINGS),
        ("Tab to a card, Enter", "read that reference's full answer"),
        (palette, "command palette (presets, themes, every action)"),
        *rows(type(app).BINDINGS),
    ]
