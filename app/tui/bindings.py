"""The chat's keys and the footer's choice of them: which bindings the chat declares, in what order the footer
shows them, and which it gives up when they do not fit the width. Every key, shown or not, is in the help (F1)
and the palette."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from textual.binding import ActiveBinding, Binding, BindingType

# What the footer shows, in this order, and when (`ChatScreen.footer_ids`): the keys a newcomer needs, and the
# ones for what can be done right now. Every key, these and the rest, is in the help (F1) and the palette.
FOOTER_ORDER = (
    "cancel_turn",  # while a turn runs, or an edit is open
    "help",
    "copy_reply",  # after a reply
    "edit_prompt",
    "regenerate",
    "previous_version",  # when the last exchange has more than one version
    "next_version",
    "preset_picker",
    "toggle_sidebar",  # on a narrow screen, where the sidebar starts hidden
    "sessions",  # when conversations are saved
    "new_conversation",
    "quit",
)
# When they do not all fit the width, the footer gives them up from the end of this list.
FOOTER_PRIORITY = (
    "cancel_turn",
    "help",
    "quit",
    "copy_reply",
    "toggle_sidebar",  # narrow screens only, and there it is the way to the panel's progress
    "preset_picker",
    "previous_version",  # shown just after a regenerate or an edit: what is wanted next
    "next_version",
    "edit_prompt",
    "regenerate",
    "new_conversation",
    "sessions",
)
VERSIONS = Binding.Group("Versions")
# What the palette's key keeps at the footer's right edge ("▏^p palette").
PALETTE_ROOM = 12

CHAT_BINDINGS: list[BindingType] = [
    Binding("f2", "preset_picker", "Presets", id="preset_picker", tooltip="pick a preset"),
    Binding("f3", "next_preset", "Next preset", id="next_preset", tooltip="next preset"),
    # xterm, GNOME Terminal and tmux send Shift+F3 as CSI 1;2R, which keys.KeyParser reads as shift+f3 (Textual
    # alone takes it for a cursor report); F15 is that sequence's name in Textual's table, kept as a fallback.
    Binding(
        "shift+f3,f15",
        "previous_preset",
        "Previous preset",
        id="previous_preset",
        show=False,
        tooltip="previous preset",
    ),
    Binding(
        "escape",
        "cancel_turn",
        "Cancel",
        id="cancel_turn",
        tooltip="cancel the running turn (the partial reply stays)",
    ),
    Binding("f4", "toggle_sidebar", "Sidebar", id="toggle_sidebar", tooltip="show or hide the reference sidebar"),
    # Priority: the prompt would take them to move its cursor; reading back matters more while typing.
    Binding(
        "pageup",
        "scroll_log(-1)",
        "Scroll up",
        id="scroll_log_up",
        show=False,
        priority=True,
        tooltip="scroll the conversation up (a streaming reply stops pulling the view down)",
    ),
    Binding(
        "pagedown",
        "scroll_log(1)",
        "Scroll down",
        id="scroll_log_down",
        show=False,
        priority=True,
        tooltip="scroll the conversation down (at the bottom it follows new text again)",
    ),
    # Not priority: in the prompt End is the end of the line; Ctrl+End works from anywhere.
    Binding(
        "ctrl+end,end",
        "scroll_bottom",
        "Bottom",
        id="scroll_bottom",
        show=False,
        tooltip="jump to the newest text and follow it (End too, outside the prompt)",
    ),
    Binding("f5", "copy_reply", "Copy", id="copy_reply", tooltip="copy the last reply"),
    # Priority: the prompt (a TextArea) uses F6 to select a line.
    Binding(
        "f6",
        "copy_code",
        "Copy code",
        id="copy_code",
        show=False,
        priority=True,
        tooltip="copy the last code block",
    ),
    Binding("ctrl+n", "new_conversation", "New chat", id="new_conversation", tooltip="new conversation"),
    Binding(
        "ctrl+l",
        "compact",
        "Compact",
        id="compact",
        show=False,
        tooltip="summarise the conversation's earlier exchanges now, to keep it within the models' windows",
    ),
    Binding(
        "ctrl+r",
        "rerun(False)",
        "Re-ask",
        id="reask",
        show=False,
        tooltip="answer the last prompt again, references and all (retry after a failure)",
    ),
    Binding(
        "ctrl+g",
        "rerun(True)",
        "Regenerate",
        id="regenerate",
        tooltip="regenerate the last reply: the aggregator again, on the stored reference answers",
    ),
    # Not Ctrl+E: the prompt (a TextArea) uses it for the end of the line.
    Binding(
        "f8",
        "edit_prompt",
        "Edit",
        id="edit_prompt",
        tooltip="edit the last prompt; Enter sends it as a new version (the old one stays)",
    ),
    Binding(
        "f9",
        "version(-1)",
        "Previous version",
        id="previous_version",
        group=VERSIONS,
        tooltip="previous version of the last exchange",
    ),
    Binding(
        "f10",
        "version(1)",
        "Next version",
        id="next_version",
        group=VERSIONS,
        tooltip="next version of the last exchange",
    ),
    # Priority: the prompt (a TextArea) uses F7 to select all.
    Binding(
        "f7",
        "panel",
        "Panel answers",
        id="panel",
        show=False,
        priority=True,
        tooltip="what each reference answered for the last reply",
    ),
    Binding(
        "ctrl+b",
        "side_by_side",
        "Side by side",
        id="side_by_side",
        show=False,
        tooltip="the references' answers to the last reply, side by side",
    ),
    Binding(
        "ctrl+t",
        "send_solo",
        "Solo",
        id="send_solo",
        show=False,
        tooltip="send the prompt to the aggregator alone, no references (a quick question)",
    ),
    Binding(
        "ctrl+o",
        "sessions",
        "Sessions",
        id="sessions",
        tooltip="stored sessions: search, open, rename, delete",
    ),
]


def footer_bindings(
    active: Mapping[str, ActiveBinding],
    shown: set[str],
    *,
    width: int,
    key_display: Callable[[Binding], str],
    cancel_stops_edit: bool,
) -> dict[str, ActiveBinding]:
    """`active` (the keys in force) in FOOTER_ORDER, those with an id shown in the footer only when `shown`
    names them and they fit `width`. `cancel_stops_edit`: Esc stops an edit rather than a turn, and says so."""
    kept = fitting(shown, active, width=width, key_display=key_display)
    rank = {binding_id: position for position, binding_id in enumerate(FOOTER_ORDER)}
    bindings: dict[str, ActiveBinding] = {}
    for key, binding_in_force in active.items():
        binding = binding_in_force.binding
        if binding.id:
            show = binding.id in kept
            description = "Stop editing" if binding.id == "cancel_turn" and cancel_stops_edit else None
            if show != binding.show or description:
                binding = dataclasses.replace(binding, show=show, description=description or binding.description)
            binding_in_force = ActiveBinding(
                binding_in_force.node, binding, binding_in_force.enabled, binding_in_force.tooltip
            )
        bindings[key] = binding_in_force
    return dict(sorted(bindings.items(), key=lambda item: rank.get(item[1].binding.id or "", len(rank))))


def fitting(
    shown: set[str], active: Mapping[str, ActiveBinding], *, width: int, key_display: Callable[[Binding], str]
) -> set[str]:
    """`shown` less its least needed keys (FOOTER_PRIORITY) until the footer fits `width`: past it, the last
    keys (Quit among them) were cut off at the edge. A group's keys go together."""
    widths: dict[str, int] = {}
    group_of: dict[str, Binding.Group] = {}
    for binding_in_force in active.values():
        binding = binding_in_force.binding
        if binding.id in shown and binding.id not in widths:
            # " key description ": a group's keys share one description (the versions' "f9 f10 Versions").
            label = binding.description
            if binding.group is not None:
                label = "" if binding.group in group_of.values() else binding.group.description
                group_of[binding.id] = binding.group
            widths[binding.id] = len(key_display(binding)) + len(label) + 3
    room = width - PALETTE_ROOM
    kept = set(widths)
    for binding_id in reversed(FOOTER_PRIORITY):
        if sum(widths[i] for i in kept) <= room:
            break
        group = group_of.get(binding_id)
        kept -= {binding_id, *(i for i, g in group_of.items() if group is not None and g is group)}
    return kept


def footer_ids(*, saved: bool, narrow: bool, busy: bool, versions: int | None) -> set[str]:
    """The binding ids the footer shows: `saved` (conversations are stored), `narrow` (the sidebar starts
    hidden), `busy` (a turn runs or an edit is open), `versions` (how many the last exchange has; None before
    a first reply)."""
    shown = {"help", "preset_picker", "new_conversation", "quit"}
    if saved:
        shown.add("sessions")
    if narrow:
        shown.add("toggle_sidebar")
    if busy:
        shown.add("cancel_turn")
    elif versions is not None:
        shown.add("copy_reply")
        if saved:
            shown.update({"edit_prompt", "regenerate"})
        if versions > 1:
            shown.update({"previous_version", "next_version"})
    return shown
