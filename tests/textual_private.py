"""The one place the tests reach into Textual's private API. Each helper says what it reads and why a test
needs it; when Textual changes, the failures point here, not all over the suite. (The app's own private uses
live in moa_chat.tui.textual_internals; tests/test_textual_internals.py checks their shape.)"""

from __future__ import annotations

from typing import Any

from textual._xterm_parser import XTermParser
from textual.screen import Screen


def textual_input_parser() -> type[XTermParser]:
    """Textual's own terminal input parser, to show what KeyParser reads differently (and why it exists)."""
    return XTermParser


def driver_input_parser(module_name: str) -> Any:
    """The parser class a driver module builds in its input thread (the name `use_key_parser` replaces)."""
    import importlib

    return getattr(importlib.import_module(module_name), "XTermParser", None)


def stop_update_timer(screen: Screen[Any]) -> None:
    """Stop the timer Textual paints a screen from, so that a frame can only come from the app's own paths
    (tui/pacing.py); the screen's `_update_timer`."""
    screen._update_timer.stop()


def paint_due(screen: Screen[Any]) -> bool:
    """Whether the screen has a change it has not painted yet: the flags Textual's idle handler reads."""
    return bool(
        screen._layout_required
        or screen._scroll_required
        or screen._repaint_required
        or screen._dirty_widgets
        or screen._recompose_required
    )


def timer_tick(screen: Screen[Any]) -> None:
    """What the screen's update timer does at a tick (`Screen._on_timer_update`): lay out and paint, or, during
    an App.batch_update, nothing."""
    screen._on_timer_update()
