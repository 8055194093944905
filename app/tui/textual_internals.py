"""The one module in moa-chat that uses Textual's private API (Textual is pinned in pyproject). Each use has no
public equivalent and something a user would miss without it:

1. `textual._xterm_parser.XTermParser`, subclassed as `KeyParser` (its `_sequence_to_key_events` and `parse`
   extended), and put in its place in the Linux and web drivers' modules (`use_key_parser`). Textual's parser
   reads three kinds of input as the wrong key or none: ESC CR (Alt+Enter in xterm, GNOME Terminal, tmux)
   as a plain Enter, which sent a half-written prompt; CSI 1;mR (Shift+F3 and other modified F3s) as a
   cursor position report, so the key never arrived; and xterm's modifyOtherKeys form (Shift+Enter, Ctrl+A
   under tmux `extended-keys always`) as a key named after a control character, or the bare letter. The
   drivers build their parser inside their input thread, by the module's name for the class, with no
   parameter or hook to pass another; the events they hand on (`Driver.process_message`, public) have
   already lost what tells Alt+Enter from Enter, and Ctrl+A from A.
2. `textual._keyboard_protocol.FUNCTIONAL_KEYS` (`kitty_key_names`): the names of the keys only the kitty
   keyboard protocol reports (F13-F35, media keys). Without them, a `keymap:` entry binding one would be
   reported as a typo and dropped.
3. `textual.keys._character_to_key` (`character_to_key`): the name Textual gives a character in a key event
   ("?" → "question_mark"), so that a `keymap:` entry is checked against the names Textual really reports.
4. `Screen._on_timer_update`, the update timer's callback (layout, then paint): called by `paint_now`, with
   the flags Textual's own idle handler reads to decide that a paint is due, and extended by
   `OwedTickScreen` to note a tick Textual drops inside App.batch_update (`App._batch_count`). Textual
   paints only at its timer's ticks. A reply's drain waits for each batch's frame, so a tick's wait on each
   would hold a fast reply's backlog back for seconds; and a tick dropped while a streamed batch mounts its
   blocks would leave that batch's frame to a later tick, so a fast reply would begin in frames far apart
   (bench/stream_render.py; tui/pacing.py says when it paints).

5. The watcher lists `textual.reactive` keeps on an object (the `__watchers` attribute): `forget_detached_watchers`
   drops the ones whose widget has left the DOM. Textual's Footer binds each key's `compact` to its own
   (`data_bind`), and a recompose replaces the keys without forgetting them, so every recompose of the footer
   (a few a turn, as the chat's keys follow its state) would keep a dozen dead keys alive with their styles
   and caches, and a long session's memory and garbage-collector passes would grow with them
   (bench/long_session.py).

6. `Footer._bindings_ready`, set at construction by `footer_keys_at_compose`. Textual's Footer composes no keys
   until the screen first reports its bindings, a refresh after the first frame, so the keys would pop in
   after the rest of the first screen (bench/startup.py's settled screen measures it). The screen's and the
   app's keys are known at compose, so the footer shows them in the first frame.

tests/test_textual_internals.py checks each of these still has the shape used here, and that no other module
in app/ imports Textual's private modules (import-linter cannot name an external package's submodules).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Generator, Iterable
from typing import Any, TypeVar

from textual import events
from textual._xterm_parser import XTermParser
from textual.keys import _character_to_key
from textual.screen import Screen
from textual.widgets import Footer

character_to_key: Callable[[str], str] = _character_to_key

ResultType = TypeVar("ResultType")

# The driver modules whose input thread builds an XTermParser. The inline driver keeps Textual's parser: it
# does ask for the cursor's position.
DRIVER_MODULES = ("textual.drivers.linux_driver", "textual.drivers.web_driver")


def kitty_key_names() -> set[str]:
    """The whole key names only the kitty keyboard protocol reports (F13-F35, media keys); empty if Textual
    no longer has them where this looks (then only those keys go unrecognised in a keymap)."""
    try:
        from textual._keyboard_protocol import FUNCTIONAL_KEYS, MODIFIER_FUNCTIONAL_KEYS
    except ImportError:
        return set()
    return {key for key in FUNCTIONAL_KEYS.values() if key not in MODIFIER_FUNCTIONAL_KEYS}


# xterm's modifyOtherKeys form, CSI 27 ; modifiers ; code ~ (tmux with `extended-keys always` sends it too).
_MODIFY_OTHER_KEYS = re.compile(r"\x1b\[27;(\d+);(\d+)~")
_NAMED_CODES = {13: "enter", 9: "tab", 27: "escape", 127: "backspace", 8: "backspace", 32: "space"}
_MODIFIER_BITS = ((1, "shift"), (2, "alt"), (4, "ctrl"))


def _modified(name: str, parameter: int) -> str | None:
    """`name` with the modifiers an xterm parameter (1 + bits) names; None for bits Textual has no name for."""
    bits = parameter - 1
    if bits <= 0 or bits & ~0b111:
        return None
    return "+".join([*sorted(m for bit, m in _MODIFIER_BITS if bits & bit), name])


class KeyParser(XTermParser):
    """Textual's input parser, with the bytes it reads as the wrong key (or none) put right:

    * ESC CR (Alt+Enter in xterm with metaSendsEscape, GNOME Terminal, tmux) comes out of Textual's parser as
      a plain Enter, or, followed quickly by more keys and another ESC, as "^" and Enter; and 0x8D (xterm's
      8-bit Alt+Enter) as a key named "\\x8d". All: alt+enter.
    * CSI 1 ; m R (Shift+F3 and other modified F3s in xterm, GNOME Terminal and tmux) is also the shape of a
      cursor position report, and Textual takes it for one. The app never asks for the cursor's position
      (only inline apps do), so a report is always a key here.
    * modifyOtherKeys sequences: Shift+Enter (CSI 27;2;13~) comes out of Textual's parser as "shift+\\r".
    """

    def _sequence_to_key_events(self, sequence: str, alt: bool = False) -> Iterable[events.Key]:
        # ESC CR whole, at once: no escape sequence goes on from there. Left to wait for more, it takes the
        # letters typed next along, and an ESC among them (another Alt+Enter) has it all read as "^", Enter.
        if sequence in ("\x1b\r", "\x8d") or (sequence == "\r" and alt):
            yield events.Key("alt+enter", None)
            return
        if match := _MODIFY_OTHER_KEYS.fullmatch(sequence):
            code = int(match[2])
            name = _NAMED_CODES.get(code) or (_character_to_key(chr(code).lower()) if 32 < code < 127 else None)
            key = _modified(name, int(match[1])) if name else None
            if key is not None:
                yield events.Key(key, None)
                return
        yield from super()._sequence_to_key_events(sequence, alt)

    def parse(self, token_callback: Callable[[Any], None]) -> Generator[Any, str, None]:
        def translated(token: Any) -> None:
            if isinstance(token, events.CursorPosition) and token.y == 0:
                key = _modified("f3", token.x + 1)  # CSI 1 ; m R reads as row 1, column m
                if key is not None:
                    token = events.Key(key, None)
            token_callback(token)

        return super().parse(translated)


def use_key_parser() -> None:
    """Read the terminal with `KeyParser`: the drivers build their parser by their module's name for it."""
    for name in DRIVER_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # not on this platform (termios): its driver is not used either
            continue
        if getattr(module, "XTermParser", None) is XTermParser:
            setattr(module, "XTermParser", KeyParser)  # noqa: B010 (mypy: a module has no such attribute)


def paint_now(screen: Screen[Any]) -> bool:
    """Lay out and paint `screen`'s pending changes now, as its update timer's next tick would (False if
    nothing is due, the screen is not the current one, or an App.batch_update is under way)."""
    due = (
        screen._layout_required
        or screen._scroll_required
        or screen._repaint_required
        or screen._dirty_widgets
        or screen._recompose_required
    )
    if not due or screen.app._batch_count or not screen.is_current:
        return False
    screen._on_timer_update()
    return True


class OwedTickScreen(Screen[ResultType]):
    """A screen that knows when its update timer's last tick painted nothing because it came during an
    App.batch_update (Textual drops such a tick and pauses the timer): `tick_owed`, until the next paint."""

    tick_owed = False

    def _on_timer_update(self) -> None:
        self.tick_owed = bool(self.app._batch_count)
        super()._on_timer_update()


WATCHERS = "__watchers"  # where textual.reactive keeps an object's watchers


def forget_detached_watchers(node: object) -> None:
    """Drop the watchers of `node`'s reactives whose watching widget is no longer attached."""
    watchers: dict[str, list[tuple[Any, Any]]] = getattr(node, WATCHERS, {})
    for bound in watchers.values():
        bound[:] = [(watcher, callback) for watcher, callback in bound if watcher is node or watcher.is_attached]


def footer_keys_at_compose(footer: Footer) -> None:
    """Let `footer` compose its keys at once instead of after the screen's first report of its bindings."""
    footer.set_reactive(Footer._bindings_ready, True)
