"""A reasoning model's thinking, off the screen: the engine's events over the real wire, `ask`, the store and
the export. The chat's side is test_thinking_tui.py."""

from __future__ import annotations

import io
import json
import threading

from conftest import WIRE_CONFIG, write_config
from loop_helpers import tool_loop
from moa_chat.cli.progress import Progress
from moa_chat.engine import AggregatorFinished, ReasoningDelta, ReferenceFinished, ReferenceProgress, ReplyDelta
from moa_chat.providers.loopback_server import Reply
from moa_chat.session import ChatSession
from moa_chat.store import SessionStore
from moa_chat.store.export import as_json, as_markdown
from moa_chat.store.migrations import SCHEMA_VERSION
from test_cli import run

QUESTION = [{"role": "user", "content": "How do I reverse a list in Python?"}]
THOUGHT = "The user wants a list reversed. Slicing makes a copy; reverse() works in place."


def _collect() -> tuple[list[object], object]:
    events: list[object] = []
    lock = threading.Lock()

    def observer(event: object) -> None:
        with lock:
            events.append(event)

    return events, observer


def test_the_aggregators_thinking_streams_as_events_before_its_text(wire_config, llm_server):
    llm_server.script("agg", Reply(text="Use items[::-1].", reasoning=THOUGHT))
    config = wire_config()
    events, observer = _collect()
    result = tool_loop(config, observer=observer).run(QUESTION)
    assert result.status == "ok" and result.text == "Use items[::-1]."
    thoughts = [e for e in events if isinstance(e, ReasoningDelta) and e.role == "aggregator"]
    assert len(thoughts) > 1, "streamed piece by piece, not whole at the end"
    assert "".join(e.text for e in thoughts) == THOUGHT
    assert {e.label for e in thoughts} == {"wire:agg"}
    # All of it before the first piece of the reply; the reply itself holds none of it.
    first_text = next(i for i, e in enumerate(events) if isinstance(e, ReplyDelta))
    assert max(events.index(e) for e in thoughts) < first_text
    assert THOUGHT not in result.text
    finished = [e for e in events if isinstance(e, AggregatorFinished)]
    assert [e.reasoning for e in finished] == [THOUGHT]


def test_the_reasoning_field_is_read_under_either_name(wire_config, llm_server):
    llm_server.script("agg", Reply(text="Answer.", reasoning="Openrouter style.", reasoning_field="reasoning"))
    config = wire_config()
    events, observer = _collect()
    tool_loop(config, observer=observer).run(QUESTION)
    text = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert text == "Openrouter style."


def test_a_references_thinking_comes_with_its_progress_and_its_answer(wire_config, llm_server):
    llm_server.script("ref-a", Reply(text="Reverse it.", reasoning=THOUGHT))
    config = wire_config()
    events, observer = _collect()
    tool_loop(config, observer=observer).run(QUESTION)
    thought = "".join(e.text for e in events if isinstance(e, ReasoningDelta) and e.role == "reference")
    assert thought == THOUGHT
    assert {e.index for e in events if isinstance(e, ReasoningDelta) and e.role == "reference"} == {0}
    # The first progress event is the first reasoning delta: no text yet, but its thinking has begun.
    first = next(e for e in events if isinstance(e, ReferenceProgress) and e.index == 0)
    assert first.text == "" and first.thinking_seconds is not None
    finished = {e.index: e for e in events if isinstance(e, ReferenceFinished)}
    assert finished[0].reasoning == THOUGHT and finished[0].text == "Reverse it."
    assert finished[1].reasoning == ""  # a model that does not think has nothing here


def test_the_store_keeps_each_calls_thinking_and_the_export_shows_it(wire_config, llm_server, home):
    llm_server.script("agg", Reply(text="Use items[::-1].", reasoning=THOUGHT))
    llm_server.script("ref-b", Reply(text="reversed(items)", reasoning="Lazy is fine."))
    config = wire_config()
    store = SessionStore(home / "sessions.db")
    session = ChatSession(config, config.preset("wire"), store=store)
    session.send("How do I reverse a list?")
    session_id = session.id
    session.close()
    store = SessionStore(home / "sessions.db")  # read back from the file
    (turn,) = store.turns(session_id)
    by_label = {c.record.label: c.reasoning for c in turn.calls}
    assert by_label == {"wire:ref-a": "", "wire:ref-b": "Lazy is fine.", "wire:ref-c": "", "wire:agg": THOUGHT}
    exported = as_json(store, session_id)
    calls = exported["turns"][0]["calls"]
    assert [c["reasoning"] for c in calls if c["role"] == "aggregator"] == [THOUGHT]
    assert sum(c["reasoning"] is None for c in calls) == 2
    markdown = as_markdown(store, session_id)
    # Folded under the reply's heading, above its text.
    heading = markdown.index("## moa-chat (wire:agg)")
    fold = markdown.index("<summary>Thinking</summary>")
    assert heading < fold < markdown.index(THOUGHT) < markdown.index("Use items[::-1].", heading)
    store.close()


def test_a_database_from_before_the_column_gains_it(home):
    import sqlite3

    from moa_chat.store.migrations import MIGRATIONS, migrate

    path = home / "old.db"
    db = sqlite3.connect(path)
    db.executescript(MIGRATIONS[0])
    db.execute("PRAGMA user_version = 1")
    db.commit()
    migrate(db)
    columns = {row[1] for row in db.execute("PRAGMA table_info(calls)")}
    assert "reasoning" in columns
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    db.close()


# --------------------------------------------------------------------------- ask


def _wire(home, llm_server) -> None:
    write_config(home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra=""))
    llm_server.script("agg", Reply(text="Use items[::-1].", reasoning=THOUGHT))


def test_ask_prints_no_thinking_unless_asked(home, llm_server):
    _wire(home, llm_server)
    result = run("ask", "q")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Use items[::-1].\n"
    assert "Slicing" not in result.stderr


def test_ask_show_reasoning_writes_the_thinking_to_stderr_before_the_answer(home, llm_server):
    _wire(home, llm_server)
    result = run("ask", "q", "--show-reasoning", "-q")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Use items[::-1].\n"  # stdout stays the answer alone
    assert result.stderr == THOUGHT + "\n"  # plain into a pipe: no escape sequences


def test_ask_json_has_the_thinking_of_each_call(home, llm_server):
    _wire(home, llm_server)
    llm_server.script("ref-c", Reply(text="reversed(items)", reasoning="Lazy is fine."))
    result = run("ask", "q", "--json", "--show-reasoning")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["reply"] == "Use items[::-1]." and data["reasoning"] == THOUGHT
    assert [r["reasoning"] for r in data["references"]] == [None, None, "Lazy is fine."]
    assert "Slicing" not in result.stderr  # the object has it: not printed twice


def test_the_thinking_is_faint_at_a_terminal_and_ends_its_line_before_anything_else():
    err, out = io.StringIO(), io.StringIO()
    progress = Progress(err, out, False, reasoning=True, dim=True)
    progress(ReasoningDelta("wire:agg", "aggregator", "Hmm, "))
    progress(ReasoningDelta("wire:agg", "aggregator", "slicing.\x1b]52;c;AAAA\x07"))
    progress(ReasoningDelta("wire:ref-a", "reference", "not shown", 0))
    progress(ReplyDelta("Answer."))
    progress.end_line()
    assert err.getvalue() == "\x1b[2mHmm, slicing.␛]52;c;AAAA␇\x1b[22m\n"  # the model's escapes made inert
    assert out.getvalue() == "Answer.\n"


def test_a_secret_split_across_thinking_deltas_is_still_redacted_on_screen():
    from moa_chat.session.display_scrub import DisplayScrub
    from moa_chat.text.redaction import apply

    shown: list[object] = []
    scrub = DisplayScrub(shown.append, lambda text: apply("display", text, for_models=False))
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8J9k0L1m2N3p4Q5r6"
    for piece in ("The key is ", key[:12], key[12:], " so I will not repeat it."):
        scrub(ReasoningDelta("wire:agg", "aggregator", piece))
    scrub(ReplyDelta("Done."))
    scrub.flush()
    thought = "".join(e.text for e in shown if isinstance(e, ReasoningDelta))
    assert key[:12] not in thought and key[12:] not in thought
    assert thought.startswith("The key is ") and thought.endswith(" so I will not repeat it.")
    # All of the thinking is shown before the reply begins.
    assert isinstance(shown[-1], ReplyDelta) and shown[-1].text == "Done."
