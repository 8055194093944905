"""One turn's model calls as its trace kept them (`save_traces: true`): what each model was sent and what
it answered, with its status, time, tokens and cost.

The trace file is a session's calls in the order they ended, with no turn id in them (the core could add
one: an entry's "turn" is used when there is one). A session's turns run one at a time, so a call belongs
to the last turn that had started when it was written: its `time` against the stored turns' `started`.
"""

from __future__ import annotations

import asyncio
import bisect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from ...config.pricing import format_cost
from ...store import SessionStore, StoredTurn
from ...store.traces import read_traces, trace_path
from ...text.inert import inert
from ...text.wording import plural
from ..widgets.footer import dialog_footer
from ..widgets.reference_card import WORDS

# A trace's time is rounded to the millisecond and a turn's start is not: a call that ended within a
# millisecond of its turn's start must not fall into the turn before.
SLACK = 0.002
TURN_ON = "Add `save_traces: true` to config.yaml (or to one preset) to keep a trace of every model call."


def calls_for_turn(entries: list[dict[str, Any]], turns: list[StoredTurn], turn_id: int) -> list[dict[str, Any]]:
    """The trace entries of turn `turn_id`, in the order they were written."""
    order = sorted(turns, key=lambda turn: turn.started)
    starts = [turn.started for turn in order]
    calls = []
    for entry in entries:
        owner = entry.get("turn")
        if not isinstance(owner, int):
            moment = entry.get("time")
            if not isinstance(moment, int | float):
                continue
            position = bisect.bisect_right(starts, moment + SLACK) - 1
            if position < 0:
                continue  # written before any stored turn: not this session's, or its turns were deleted
            owner = order[position].id
        if owner == turn_id:
            calls.append(entry)
    return calls


@dataclass(frozen=True)
class TurnTrace:
    """What the screen shows: the turn, its calls, and why there are none when there are none."""

    turn: StoredTurn | None
    number: int = 0  # the turn's place in the session, from 1
    calls: list[dict[str, Any]] = field(default_factory=list)
    path: Path | None = None
    empty: str | None = None


def load_turn_trace(
    store: SessionStore | None, session_id: str | None, turn_id: int | None, *, traces_on: bool
) -> TurnTrace:
    """Read a turn's calls from its session's trace (the last turn when `turn_id` is None). Reads a file
    and the database: not on the UI's thread."""
    if store is None:
        return TurnTrace(None, empty="This conversation is not being saved, so no trace is kept of it. " + TURN_ON)
    turns = store.turns(session_id) if session_id is not None else []  # stored from its first turn on
    turn = next((t for t in turns if t.id == turn_id), None) if turn_id is not None else (turns[-1] if turns else None)
    if turn is None:
        return TurnTrace(None, empty="There is no turn to trace yet.")
    assert session_id is not None
    number = sorted(t.id for t in turns).index(turn.id) + 1
    folder = store.file.parent  # where the session traces them (ChatSession._tracer)
    path = trace_path(session_id, folder)
    # Written as each call ended, whichever first: shown in the turn's order instead (each fan-out, then
    # the aggregator round it advised; layer by layer; references in the preset's order).
    calls = sorted(calls_for_turn(read_traces(session_id, folder), turns, turn.id), key=_turn_order)
    if calls:
        return TurnTrace(turn, number, calls, path)
    if not traces_on:
        empty = "Traces are off, so this turn's calls were not kept. " + TURN_ON
    else:
        empty = (
            "No trace was kept for this turn: it ran before traces were turned on (or its file was removed). "
            "Turns from now on are traced."
        )
    return TurnTrace(turn, number, [], path, empty)


def _turn_order(entry: dict[str, Any]) -> tuple[int, int, int, int]:
    def number(name: str) -> int:
        value = entry.get(name)
        return value if isinstance(value, int) else 0

    return number("iteration"), entry.get("role") != "reference", number("layer"), number("index")


# --------------------------------------------------------------------------- the call's facts


def tokens_text(entry: dict[str, Any]) -> str:
    usage = entry.get("usage")
    if not isinstance(usage, dict):
        return "—"
    return f"{int(usage.get('prompt_tokens') or 0):,} → {int(usage.get('completion_tokens') or 0):,}"


def cost_text(entry: dict[str, Any]) -> str:
    cost = entry.get("cost")
    return format_cost(float(cost)) if isinstance(cost, int | float) else "—"


def role_text(entry: dict[str, Any]) -> str:
    role = str(entry.get("role", "?"))
    iteration = entry.get("iteration")
    if role == "aggregator" and isinstance(iteration, int) and iteration > 1:
        return f"aggregator {iteration}"  # a tool loop runs the aggregator again
    return role


def row(number: int, entry: dict[str, Any]) -> tuple[str, ...]:
    seconds = entry.get("seconds")
    status = str(entry.get("status", "?"))
    return (
        str(number),
        role_text(entry),
        inert(str(entry.get("label", "?"))),
        str(entry.get("layer", "")) if entry.get("role") == "reference" else "",
        WORDS.get(status, status),
        f"{seconds:.1f}s" if isinstance(seconds, int | float) else "—",
        tokens_text(entry),
        cost_text(entry),
    )


COLUMNS = ("#", "role", "model", "layer", "status", "time", "tokens in → out", "cost")


def message_text(message: dict[str, Any]) -> str:
    """A request message's text: its content (text parts of a multi-part one), then any tool calls."""
    content = message.get("content")
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            else:
                kind = part.get("type", "part") if isinstance(part, dict) else "part"
                parts.append(f"[{kind}]")
        text = "\n".join(parts)
    else:
        text = "" if content is None else str(content)
    calls = message.get("tool_calls")
    if calls:
        text += ("\n" if text else "") + json.dumps(calls, ensure_ascii=False, indent=2)
    return text


def _section(title: str, style: str = "bold $text-accent") -> Content:
    return Content.assemble((title, style))


def call_content(entry: dict[str, Any]) -> Content:
    """The request as sent, then the answer (and its reasoning, tool calls, error)."""
    request = entry.get("request") if isinstance(entry.get("request"), dict) else {}
    assert isinstance(request, dict)
    settings = [f"{request.get('provider', '?')}:{request.get('model', '?')}"]
    for name in ("temperature", "max_tokens", "reasoning_effort"):
        if request.get(name) is not None:
            settings.append(f"{name} {request[name]}")
    if request.get("tools"):
        settings.append(f"{len(request['tools'])} tools")
    attempts = entry.get("attempts")
    if isinstance(attempts, int) and attempts > 1:
        settings.append(f"{attempts} attempts")
    parts: list[Content] = [_section("Request"), Content.styled(inert(" · ".join(settings)), "$text-muted")]
    for message in request.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role", "?"))
        extra = message.get("name") or message.get("tool_call_id")
        parts.append(Content(""))
        parts.append(
            Content.assemble((f"── {role}", "bold"), (f" {inert(str(extra))}" if extra else "", "$text-muted"))
        )
        parts.append(Content(inert(message_text(message))))
    parts += [Content(""), _section("Answer", "bold $text-success")]
    answer = str(entry.get("answer") or "")
    parts.append(Content(inert(answer)) if answer else Content.styled("(no text)", "italic $text-muted"))
    if entry.get("reasoning"):
        parts += [Content(""), _section("Reasoning", "bold $text-muted"), Content(inert(str(entry["reasoning"])))]
    if entry.get("tool_calls"):
        calls = json.dumps(entry["tool_calls"], ensure_ascii=False, indent=2)
        parts += [Content(""), _section("Tool calls"), Content(inert(calls))]
    if entry.get("error"):
        parts += [Content(""), Content.assemble(("Error: ", "bold $text-error"), inert(str(entry["error"])))]
    return Content("\n").join(parts)


# --------------------------------------------------------------------------- the screen


class TraceScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q", "dismiss(None)", "Close", id="close_trace")]

    def __init__(
        self, store: SessionStore | None, session_id: str | None, *, traces_on: bool, turn_id: int | None = None
    ) -> None:
        super().__init__()
        self.store, self.session_id, self.traces_on, self.turn_id = store, session_id, traces_on, turn_id
        self.trace: TurnTrace | None = None  # once read

    def compose(self) -> ComposeResult:
        with Vertical(id="trace", classes="modal-panel"):
            yield Static(_section("Trace"), id="trace-title", classes="modal-title")
            yield Static("Reading the trace…", id="trace-empty", classes="detail-empty")
            table: DataTable[str] = DataTable(id="trace-calls", cursor_type="row", zebra_stripes=True)
            table.display = False
            yield table
            with VerticalScroll(id="trace-detail") as detail:
                detail.display = False
                yield Static(id="trace-text")
            yield Static(
                Content.assemble(
                    ("↑↓", "bold"), " a call · ", ("Tab", "bold"), " to its text · ", ("Esc", "bold"), " close"
                ),
                classes="modal-hint",
            )
        yield dialog_footer()

    def on_mount(self) -> None:
        self._load()

    @work(exclusive=True, group="trace", exit_on_error=False)
    async def _load(self) -> None:
        try:
            trace = await asyncio.to_thread(
                load_turn_trace, self.store, self.session_id, self.turn_id, traces_on=self.traces_on
            )
        except (OSError, ValueError) as exc:  # ValueError: a line that is not JSON
            trace = TurnTrace(None, empty=f"The trace could not be read: {exc}")
        self._show(trace)

    def _show(self, trace: TurnTrace) -> None:
        self.trace = trace
        title = [("Trace", "bold")]
        if trace.turn is not None:
            count = len(trace.calls)
            title.append((f" — turn {trace.number} · {plural(count, 'call')}", "$text-muted"))
        self.query_one("#trace-title", Static).update(Content.assemble(*title))
        empty = self.query_one("#trace-empty", Static)
        if not trace.calls:
            empty.update(Content(trace.empty or "No calls."))
            return
        empty.display = False
        table = self.query_one("#trace-calls", DataTable)
        table.add_columns(*COLUMNS)
        for number, entry in enumerate(trace.calls, 1):
            table.add_row(*row(number, entry), key=str(number - 1))
        table.display = True
        self.query_one("#trace-detail").display = True
        self.show_call(0)
        table.focus()

    def show_call(self, index: int) -> None:
        if self.trace is None or not 0 <= index < len(self.trace.calls):
            return
        self.query_one("#trace-text", Static).update(call_content(self.trace.calls[index]))
        self.query_one("#trace-detail", VerticalScroll).scroll_home(animate=False)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_call(event.cursor_row)
