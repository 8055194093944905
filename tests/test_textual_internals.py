"""Textual's private API in moa-chat: confined to moa_chat.tui.textual_internals, and still shaped as that
module expects. A failure here after a Textual upgrade names the use that broke; see that module's docstring
for why each one is there."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import moa_chat
import moa_chat.tui
import pytest
from moa_chat.tui import textual_internals
from moa_chat.tui.keys import check_keymap, known_binding_ids
from textual.app import App
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual_private import driver_input_parser, textual_input_parser

APP = Path(moa_chat.__file__).parent
INTERNALS = "tui/textual_internals.py"

# Modules that still use Textual's private API outside tui/textual_internals.py: none. A module put here is
# skipped by the checks below until it no longer does.
PENDING: dict[str, str] = {}


def _private_textual_imports(path: Path) -> list[str]:
    """`import textual._x`, `from textual.y._x import …`, `from textual.y import _x`, by line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        modules: list[tuple[str, list[str]]] = []
        if isinstance(node, ast.Import):
            modules = [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [(node.module, [alias.name for alias in node.names])]
        for module, names in modules:
            parts = module.split(".")
            if parts[0] != "textual":
                continue
            private = [p for p in parts if p.startswith("_")] + [n for n in names if n.startswith("_")]
            if private:
                found.append(f"{path.relative_to(APP)}:{node.lineno}: {module} {', '.join(names)}".strip())
    return found


def _reads_of_app_or_screen_privates(path: Path) -> list[str]:
    """`….app._x`, `….screen._x`, `app._x`, `screen._x`: a Textual App's or Screen's private attribute."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            named = owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else ""
            if named in ("app", "screen"):
                found.append(f"{path.relative_to(APP)}:{node.lineno}: {ast.unparse(node)}")
    return found


def _checked_modules() -> list[Path]:
    skipped = {INTERNALS, *PENDING}
    return [p for p in sorted(APP.rglob("*.py")) if str(p.relative_to(APP)) not in skipped]


def test_only_textual_internals_imports_textual_private_modules():
    found = [line for path in _checked_modules() for line in _private_textual_imports(path)]
    assert not found, (
        "Textual's private API is used outside tui/textual_internals.py; use a public equivalent, or move the "
        "use there and say why in its docstring:\n" + "\n".join(found)
    )


def test_no_module_reads_a_private_attribute_of_the_app_or_a_screen():
    found = [line for path in _checked_modules() for line in _reads_of_app_or_screen_privates(path)]
    assert not found, "Textual's private state read outside tui/textual_internals.py:\n" + "\n".join(found)


def _textual_made(base: type) -> set[str]:
    """The private names Textual's metaclass gives every subclass of `base` (not overrides of ours)."""
    return set(type("Probe", (base,), {}).__dict__)


def test_no_class_overrides_a_private_name_of_a_textual_class():
    made = _textual_made(Widget) | _textual_made(Screen) | _textual_made(ModalScreen) | _textual_made(App)
    made |= {"_abc_impl"}
    found = []
    for info in pkgutil.walk_packages(moa_chat.tui.__path__, "moa_chat.tui."):
        module = importlib.import_module(info.name)
        where = str(Path(module.__file__ or "").relative_to(APP))
        if where == INTERNALS or where in PENDING:
            continue
        for cls in vars(module).values():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                continue
            textual_bases = [b for b in cls.__mro__[1:] if b.__module__.split(".")[0] == "textual"]
            for name in cls.__dict__:
                if name.startswith("_") and not name.startswith("__") and name not in made:
                    owners = [b.__qualname__ for b in textual_bases if name in b.__dict__]
                    if owners:
                        found.append(f"{where}: {cls.__name__}.{name} overrides {owners[0]}.{name}")
    assert not found, "Textual's private methods overridden:\n" + "\n".join(found)


def test_the_pending_list_names_files_that_exist():
    assert all((APP / path).exists() for path in PENDING), "a PENDING entry names no file: drop it"


# ------------------------------------------------------------------ the shape each private use expects


def test_the_drivers_build_their_input_parser_by_a_module_name_key_parser_can_replace():
    for name in textual_internals.DRIVER_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        parser = driver_input_parser(name)
        assert parser in (textual_input_parser(), textual_internals.KeyParser), (
            f"{name} no longer builds its parser from a module-level XTermParser: use_key_parser has no effect"
        )


def test_textuals_parser_still_has_the_methods_key_parser_extends():
    parser = textual_input_parser()
    extended = inspect.signature(parser._sequence_to_key_events)
    assert list(extended.parameters) == ["self", "sequence", "alt"], (
        f"XTermParser._sequence_to_key_events is now {extended}: KeyParser's override no longer fits"
    )
    assert list(inspect.signature(parser.parse).parameters) == ["self", "token_callback"], (
        "XTermParser.parse changed: KeyParser.parse no longer fits"
    )


def test_character_to_key_names_characters_as_key_events_do():
    name = textual_internals.character_to_key
    assert [name(c) for c in "a?/ -"] == ["a", "question_mark", "slash", "space", "minus"]


@pytest.mark.parametrize("key", ["f25", "media_play"])
def test_kitty_only_keys_are_known_to_the_keymap_check(key):
    assert key in textual_internals.kitty_key_names(), f"{key} is gone from Textual's kitty key names"
    usable, problems = check_keymap({"newline": key}, known_binding_ids())
    assert usable == {"newline": key} and not problems


async def test_a_screen_still_has_what_paint_now_calls_and_reads():
    app = App[None]()
    async with app.run_test(size=(20, 4)):
        screen = app.screen
        assert inspect.signature(screen._on_timer_update).parameters == {}, (
            "Screen._on_timer_update changed: paint_now (tui/pacing.py's prompt frames) no longer fits"
        )
        flags = ("_layout_required", "_scroll_required", "_repaint_required", "_recompose_required")
        missing = [name for name in (*flags, "_dirty_widgets") if not hasattr(screen, name)]
        assert not missing and hasattr(app, "_batch_count"), f"paint_now reads state Textual no longer has: {missing}"
        textual_internals.paint_now(screen)
        assert textual_internals.paint_now(screen) is False and not any(getattr(screen, f) for f in flags)


def test_the_footer_still_has_the_reactive_that_holds_its_keys_back():
    """footer_keys_at_compose sets Footer._bindings_ready; a Textual that renames it would leave the keys to pop
    in a refresh after the first frame again."""
    from textual.reactive import Reactive
    from textual.widgets import Footer

    assert isinstance(vars(Footer).get("_bindings_ready"), Reactive), "Footer._bindings_ready is gone or changed"
