"""The session database's schema, as numbered forward steps applied in order.

`PRAGMA user_version` records how many steps a database has had. Opening one applies the missing steps
in a single transaction; a database from a newer moa-chat (more steps than this one knows) is refused
before anything is written to it. A step, once released, never changes: a new schema is a new step.
"""

from __future__ import annotations

import sqlite3

MIGRATIONS: tuple[str, ...] = (
    # 1: sessions, their messages as a tree (branches from edits and regenerations), every MoA turn
    # with one row per model call, and the prompt history.
    """
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        title TEXT NOT NULL DEFAULT '',
        created REAL NOT NULL,
        updated REAL NOT NULL,
        preset TEXT NOT NULL DEFAULT '',
        head_id INTEGER
    );
    CREATE INDEX sessions_by_update ON sessions (updated DESC);

    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        parent_id INTEGER REFERENCES messages (id) ON DELETE CASCADE,
        turn_id INTEGER,
        role TEXT NOT NULL,
        content TEXT NOT NULL DEFAULT '',
        tool_calls TEXT,
        tool_call_id TEXT,
        partial INTEGER NOT NULL DEFAULT 0,
        created REAL NOT NULL
    );
    CREATE INDEX messages_by_parent ON messages (session_id, parent_id);

    CREATE TABLE turns (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        user_message_id INTEGER REFERENCES messages (id) ON DELETE CASCADE,
        kind TEXT NOT NULL DEFAULT 'ask',
        preset TEXT NOT NULL,
        preset_json TEXT NOT NULL,
        status TEXT NOT NULL,
        error TEXT,
        started REAL NOT NULL,
        seconds REAL
    );
    CREATE INDEX turns_by_session ON turns (session_id, id);

    CREATE TABLE calls (
        id INTEGER PRIMARY KEY,
        turn_id INTEGER NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
        role TEXT NOT NULL,
        label TEXT NOT NULL,
        idx INTEGER NOT NULL,
        layer INTEGER NOT NULL,
        iteration INTEGER NOT NULL,
        status TEXT NOT NULL,
        text TEXT NOT NULL DEFAULT '',
        error TEXT,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        total_tokens INTEGER,
        seconds REAL NOT NULL,
        first_token_seconds REAL,
        finish_reason TEXT
    );
    CREATE INDEX calls_by_turn ON calls (turn_id);

    CREATE TABLE prompt_history (
        id INTEGER PRIMARY KEY,
        text TEXT NOT NULL,
        created REAL NOT NULL
    );

    """,
    # 2: full-text search over message text, filled for the messages stored before it existed.
    """
    CREATE VIRTUAL TABLE messages_fts USING fts5 (content, content='messages', content_rowid='id');
    CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
    END;
    CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    END;
    CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
        INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
    END;
    INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
    """,
    # 3: how a turn was run: solo (the aggregator alone) or not, and the order a shuffled panel was shown in.
    """
    ALTER TABLE turns ADD COLUMN solo INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE turns ADD COLUMN reference_order TEXT;
    """,
    # 4: what each call cost, in dollars (NULL: no price known).
    """
    ALTER TABLE calls ADD COLUMN cost REAL;
    """,
    # 5: how many layers of references a turn ran, and (`layers: auto`) why no more.
    """
    ALTER TABLE turns ADD COLUMN layers_run INTEGER;
    ALTER TABLE turns ADD COLUMN layers_reason TEXT;
    """,
    # 6: what a reasoning model thought before it answered (NULL: no reasoning came).
    """
    ALTER TABLE calls ADD COLUMN reasoning TEXT;
    """,
    # 7: eval runs (`moa-chat eval`): what each run asks, and every result as it arrives, so a run resumes.
    """
    CREATE TABLE eval_runs (
        id TEXT PRIMARY KEY,
        created REAL NOT NULL,
        updated REAL NOT NULL,
        spec TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'running'
    );
    CREATE TABLE eval_results (
        run_id TEXT NOT NULL REFERENCES eval_runs (id) ON DELETE CASCADE,
        kind TEXT NOT NULL,
        task_id TEXT NOT NULL,
        job TEXT NOT NULL,
        record TEXT NOT NULL,
        created REAL NOT NULL,
        PRIMARY KEY (run_id, kind, task_id, job)
    );
    """,
    # 8: what moa-chat learns about a model, kept so that it is learned once: the context window an overflow
    # error named (with the prompt's size it named, and what the provider's metadata said then), and how the
    # provider's count of a prompt compares with moa-chat's estimate of it.
    """
    CREATE TABLE model_facts (
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        learned_window INTEGER,
        learned_prompt_tokens INTEGER,
        learned_provider_said INTEGER,
        learned_at REAL,
        token_ratio REAL,
        token_samples INTEGER NOT NULL DEFAULT 0,
        calibrated_at REAL,
        PRIMARY KEY (provider, model)
    );
    """,
    # 9: a long conversation's summaries (compaction): each stands, for the models, for the conversation up to
    # and including one message, so a reopened session sends what it sent before (and was made after another,
    # where the log shows it); the whole history stays. And
    # what each call sent, as counted before sending, beside its model's window then.
    """
    CREATE TABLE summaries (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        upto_message_id INTEGER NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
        after_message_id INTEGER REFERENCES messages (id) ON DELETE SET NULL,
        text TEXT NOT NULL,
        exchanges INTEGER NOT NULL,
        tokens_before INTEGER NOT NULL,
        tokens_after INTEGER NOT NULL,
        model TEXT NOT NULL,
        created REAL NOT NULL
    );
    CREATE INDEX summaries_by_session ON summaries (session_id, upto_message_id);
    ALTER TABLE calls ADD COLUMN sent_tokens INTEGER;
    ALTER TABLE calls ADD COLUMN context_window INTEGER;
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)


class SchemaTooNew(Exception):
    def __init__(self, found: int) -> None:
        self.found = found
        super().__init__(
            f"the session database was written by a newer moa-chat (schema {found}; this one knows up to "
            f"{SCHEMA_VERSION}); upgrade moa-chat, or point MOA_CHAT_HOME at another folder. Nothing was changed."
        )


def migrate(connection: sqlite3.Connection) -> int:
    """Bring the database up to SCHEMA_VERSION; returns the version it had."""
    found = _user_version(connection)
    if found > SCHEMA_VERSION:
        raise SchemaTooNew(found)
    if found == SCHEMA_VERSION:
        return found
    # executescript commits first; BEGIN IMMEDIATE keeps a second instance from migrating at the same time.
    connection.execute("BEGIN IMMEDIATE")
    try:
        again = _user_version(connection)  # another instance may have won
        for number in range(again + 1, SCHEMA_VERSION + 1):
            for statement in _statements(MIGRATIONS[number - 1]):
                connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {number}")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return found


def _statements(script: str) -> list[str]:
    """Split a step into statements (triggers contain semicolons, so split on complete statements)."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return statements


def _user_version(connection: sqlite3.Connection) -> int:
    """The schema version the database file records (0 for a new file)."""
    return int(connection.execute("PRAGMA user_version").fetchone()[0])
