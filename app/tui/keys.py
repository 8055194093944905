"""The keys as they really are: read from the active bindings, so a `keymap:` remap shows everywhere a key
is named (help, palette, welcome); the `keymap:` itself checked against Textual's key names, so a typo is
reported instead of silently doing nothing. The bytes terminals send for a few keys are read as those keys by
`KeyParser` (tui/textual_internals.py), where Textual's own parser reads them as something else."""

from __future__ import annotations

import difflib
import re
import string
import unicodedata
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from textual.binding import Binding
from textual.dom import DOMNode
from textual.keys import (
    KEY_ALIASES,
    KEY_DISPLAY_ALIASES,
    KEY_NAME_REPLACEMENTS,
    KEY_TO_UNICODE_NAME,
    REPLACED_KEYS,
    Keys,
)
from textual.screen import Screen

from .textual_internals import KeyParser, kitty_key_names, use_key_parser
from .textual_internals import character_to_key as _character_to_key

__all__ = ["KeyParser", "use_key_parser"]  # read the terminal (textual_internals), named here for the app


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
    return {binding_id: " / ".join(_as_pressed(_unique(labels))) for binding_id, labels in keys.items()}


def _as_pressed(labels: list[str]) -> list[str]:
    """The keys a person presses: F13…F24 go when Shift+F1…F12 is there too (xterm numbers Shift+F3 as F15, and
    a binding lists both so that it fires either way; "Shift+F3 / F15" would read as two keys)."""
    shifted = {f"F{int(m[1]) + 12}" for label in labels if (m := re.fullmatch(r"Shift\+F([1-9]|1[0-2])", label))}
    return [label for label in labels if label not in shifted]


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


# ---------------------------------------------------------------------------------------------- keymap checks

# Textual names a key's modifiers in this order (sorted), and a binding matches the name exactly: a keymap
# entry "shift+ctrl+x" would never fire.
MODIFIERS = ("alt", "ctrl", "hyper", "meta", "shift", "super")

# What people write for a key, from Textual's own display names ("esc", "pgdn", "del") and ours ("PgUp").
_SPELLINGS = {
    **{shown.lower(): key for key, shown in KEY_DISPLAY_ALIASES.items()},
    **{shown.lower(): key for key, shown in _NAMES.items()},
}


def known_binding_ids() -> list[str]:
    """Every binding id moa-chat declares: the app, its screens (modals too) and widgets, sorted."""
    package = __name__.rpartition(".")[0] + "."
    ids: set[str] = set()
    seen: set[type[DOMNode]] = set()
    pending: list[type[DOMNode]] = [DOMNode]
    while pending:
        cls = pending.pop()
        subclasses: list[type[DOMNode]] = cls.__subclasses__()
        for sub in subclasses:
            if sub not in seen:
                seen.add(sub)
                pending.append(sub)
        if cls.__module__.startswith(package):
            ids.update(b.id for b in cls.__dict__.get("BINDINGS", ()) if isinstance(b, Binding) and b.id)
    return sorted(ids)


@cache
def _named_keys() -> frozenset[str]:
    """Whole key names Textual reports: the Keys enum (modifiers included, e.g. "ctrl+@"), their aliases,
    and the kitty keyboard protocol's keys (f25…f35, media keys)."""
    names = {key.value for key in Keys if not key.value.startswith("<")}
    names.update(alias for aliases in KEY_ALIASES.values() for alias in aliases)
    names.update(kitty_key_names())
    return frozenset(names)


@cache
def _base_keys() -> frozenset[str]:
    """Names that may follow modifiers: the named keys' last parts, and printable ASCII characters' names."""
    bases = {name.rsplit("+", 1)[-1] for name in _named_keys()}
    bases.update(_character_to_key(c) for c in string.ascii_lowercase + string.digits + string.punctuation + " ")
    return frozenset(b for b in bases if len(b) > 1 and "-" not in b)


def _is_character_name(name: str) -> bool:
    """A character's name as Textual spells it in key events ("question_mark", "slash", "minus"). Letters and
    digits have none: Textual reports them as themselves ("ctrl+π", not "ctrl+greek_small_letter_pi")."""
    original = REPLACED_KEYS.get(name, name)
    try:
        character = unicodedata.lookup(KEY_TO_UNICODE_NAME.get(original, original.replace("_", " ").upper()))
    except KeyError:
        return False
    return character.isprintable() and _character_to_key(character) == name


def key_is_valid(key: str) -> bool:
    """Whether Textual can ever report `key` (one key, no commas): a binding to any other never fires."""
    if key in _named_keys() or (len(key) == 1 and key.isprintable() and not key.isspace()):
        return True
    *modifiers, base = key.split("+")
    if not base or modifiers != sorted(set(modifiers)) or not set(modifiers) <= set(MODIFIERS):
        return False
    if len(base) == 1:
        # With modifiers, Textual reports a character by its name, in lower case: "ctrl+slash", "ctrl+a".
        return base == _character_to_key(base) and not base.isupper()
    return base in _base_keys() or _is_character_name(base)


def suggest_key(key: str) -> str | None:
    """The valid key most likely meant, case, spelling, modifier order and "-" for "+" put right:
    "Ctrl+Shft+X" → "ctrl+shift+x", "ctrl-x" → "ctrl+x", "esc" → "escape", "ctrl+?" → "ctrl+question_mark"."""
    if key_is_valid(key):
        return None
    for candidate in dict.fromkeys([key, key.replace("-", "+")]):
        suggestion = _repaired(candidate)
        if suggestion and suggestion != key and key_is_valid(suggestion):
            return suggestion
    return None


def _repaired(key: str) -> str | None:
    *modifiers, base = key.split("+")
    fixed: set[str] = set()
    for modifier in modifiers:
        match = difflib.get_close_matches(modifier.lower(), MODIFIERS, n=1, cutoff=0.5)
        if not match:
            return None
        fixed.add(match[0])
    if len(base) == 1:
        base = _character_to_key(base.lower()) if modifiers else base
    else:
        base = _SPELLINGS.get(base.lower(), base.lower())
        base = KEY_NAME_REPLACEMENTS.get(base, base)  # Textual shortens a few Unicode names: hyphen_minus → minus
        if base not in _base_keys() and not _is_character_name(base):
            if base[:1] == "f" and base[1:].isdigit():
                return None  # a function key Textual does not know: no nearby number is likelier than another
            match = difflib.get_close_matches(base, sorted(_base_keys()), n=1, cutoff=0.75)
            if not match:
                return None
            base = match[0]
    return "+".join([*sorted(fixed), base])


def check_keymap(keymap: Mapping[str, str], known_ids: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """(the part of `keymap` that can work, a sentence per entry or key that cannot).

    An unknown id names no binding. A key Textual never reports is dropped: the keymap replaces a binding's
    default keys, so it would leave the action unreachable; an entry with no valid key left keeps its default."""
    known = sorted(set(known_ids))
    usable: dict[str, str] = {}
    problems: list[str] = []
    for binding_id, keys in keymap.items():
        if binding_id not in known:
            close = difflib.get_close_matches(binding_id, known, n=1, cutoff=0.6)
            hint = f" — did you mean {close[0]!r}?" if close else ""
            problems.append(f"{binding_id!r} is not a binding id{hint}")
            continue
        good: list[str] = []
        for key in (k.strip() for k in keys.split(",")):
            if key_is_valid(key):
                good.append(key)
                continue
            suggestion = suggest_key(key) if key else None
            hint = f" — did you mean {suggestion!r}?" if suggestion else ""
            what = f"{key!r} is not a key Textual can bind" if key else "an empty key"
            problems.append(f"{binding_id}: {what}{hint}")
        if good:
            usable[binding_id] = ",".join(good)
    return usable, problems


def keymap_notice(config_path: object, problems: list[str], help_key: str = "F1") -> str:
    """The start-up warning for `check_keymap`'s problems: which file, what, and where the valid ids are."""
    where = f"{config_path}, keymap:" if config_path else "keymap:"
    lines = "\n".join(f"• {problem}" for problem in problems)
    return (
        f"{where}\n{lines}\nThese are ignored (a binding left without a valid key keeps its default). "
        f"Help ({help_key}) lists the binding ids."
    )
