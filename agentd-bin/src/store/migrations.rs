//! The schema's versions. The version is the database's `PRAGMA user_version`: migration `n`
//! takes it from `n - 1` to `n`, in one transaction with the bump, so a migration that fails
//! leaves the database as it was. A file of a version this build does not know is refused.

use std::time::Duration;

use mcp_events::sqlite::SCHEMA;
use rusqlite::{Connection, TransactionBehavior};

use super::error::Error;

/// The schema's migrations, oldest first: entry `n - 1` takes the database from version
/// `n - 1` to `n`. A change of the schema is one more entry at the end; an entry, once
/// released, is never edited.
// Each comment above the entry it names (rustfmt would move it after the one before).
#[rustfmt::skip]
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: MCP Events' bindings, streams and documents (the tables a file made before
    // versioning holds already: `CREATE TABLE IF NOT EXISTS`).
    SCHEMA,
    // 2: the agent's durable state.
    DURABLE,
    // 3: the questions put to people.
    QUESTIONS,
    // 4: the conversations' histories.
    CONVERSATIONS,
    // 5: the summaries that replace a conversation's first messages in its context.
    SUMMARIES,
    // 6: the inbox messages' ids, kept in their rows.
    INBOX_IDS,
    // 7: the subagents.
    SUBAGENTS,
    // 8: the workflows made at runtime, and every run with its steps.
    WORKFLOWS,
    // 9: where each event start of a workflow stands in its stream.
    STARTS,
    // 10: the ended runs by when they ended, for pruning.
    RUNS_BY_ENDED,
    // 11: the subscribe starts whose change waits for room.
    HELD,
];

/// Migration 2: the memory, artifacts, plans, inboxes and finished units.
const DURABLE: &str = "CREATE TABLE memory (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    version INTEGER NOT NULL
);
CREATE TABLE artifacts (
    unit TEXT NOT NULL,
    name TEXT NOT NULL,
    media_type TEXT NOT NULL,
    bytes BLOB NOT NULL,
    created INTEGER NOT NULL,
    PRIMARY KEY (unit, name)
);
CREATE TABLE plans (
    unit TEXT PRIMARY KEY,
    plan TEXT NOT NULL,
    version INTEGER NOT NULL
);
CREATE TABLE inboxes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation TEXT NOT NULL,
    sender TEXT NOT NULL,
    text TEXT NOT NULL,
    at INTEGER NOT NULL
);
CREATE INDEX inboxes_by_conversation ON inboxes (conversation, seq);
CREATE TABLE finished_units (
    unit TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    summary TEXT NOT NULL,
    at INTEGER NOT NULL
);";

/// Migration 3: the questions put to people, `ask_human`'s and servers' elicitations
/// (`origin`: `ask_human` or `elicitation`; `asker`: the unit or the server; `state`:
/// `open`, `answered` or `cancelled`; `answer`: compact JSON, once answered).
const QUESTIONS: &str = "CREATE TABLE questions (
    id INTEGER PRIMARY KEY,
    origin TEXT NOT NULL,
    asker TEXT NOT NULL,
    question TEXT NOT NULL,
    schema TEXT NOT NULL,
    state TEXT NOT NULL,
    answer TEXT,
    asked INTEGER NOT NULL,
    ended INTEGER
);
CREATE INDEX questions_by_state ON questions (state, id);";

/// Migration 4: each conversation's turns, how far into its inbox they read, its tokens, and
/// its history (each message as JSON, with its turn and time).
const CONVERSATIONS: &str = "CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    turns INTEGER NOT NULL,
    taken INTEGER NOT NULL,
    tokens INTEGER NOT NULL
);
CREATE TABLE conversation_messages (
    conversation TEXT NOT NULL,
    seq INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    message TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (conversation, seq)
);";

/// Migration 5: the summary `context.compact` wrote of a conversation's first `summarized`
/// messages (its history keeps them all).
const SUMMARIES: &str =
    "ALTER TABLE conversations ADD COLUMN summarized INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN summary TEXT;";

/// Migration 6: each inbox message's id (its place in its conversation's inbox, from 1) kept
/// in its row and indexed, the messages kept so far numbered in their order: inboxes are read
/// and appended to by id, never by counting or skipping rows.
const INBOX_IDS: &str = "ALTER TABLE inboxes ADD COLUMN id INTEGER NOT NULL DEFAULT 0;
UPDATE inboxes SET id = numbered.n FROM (
    SELECT seq, row_number() OVER (PARTITION BY conversation ORDER BY seq) AS n FROM inboxes
) AS numbered WHERE numbered.seq = inboxes.seq;
DROP INDEX inboxes_by_conversation;
CREATE UNIQUE INDEX inboxes_by_id ON inboxes (conversation, id);";

/// Migration 7: the subagents (`id`: `s<n>`, from 1; `spec`: the tools and servers it was
/// run with, as JSON; `run_ms`: how long each run of it may take; `state`: running, finished,
/// failed, timed_out, killed or retired; `deadline`: when its current run's deadline passes,
/// in Unix milliseconds). Its conversation is `subagent:<id>`.
const SUBAGENTS: &str = "CREATE TABLE subagents (
    id TEXT PRIMARY KEY,
    parent TEXT NOT NULL,
    spec TEXT NOT NULL,
    run_ms INTEGER NOT NULL,
    state TEXT NOT NULL,
    answer TEXT,
    error TEXT,
    deadline INTEGER NOT NULL,
    started INTEGER NOT NULL
);
CREATE INDEX subagents_by_state ON subagents (state);";

/// Migration 8: the workflows made at runtime (each definition's body as JSON, its version),
/// and every run (its record: the definition and input it started with, its status, its
/// current step, the signals it holds, its output or error) with every step (its status,
/// attempts, failures, idempotency key, the resource a wait watches, its times, its output or
/// error; JSON values as text).
const WORKFLOWS: &str = "CREATE TABLE workflows (
    name TEXT PRIMARY KEY,
    definition TEXT NOT NULL,
    version INTEGER NOT NULL
);
CREATE TABLE workflow_runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    workflow TEXT NOT NULL,
    definition TEXT NOT NULL,
    input TEXT NOT NULL,
    started_by TEXT NOT NULL,
    status TEXT NOT NULL,
    step INTEGER NOT NULL,
    signals TEXT NOT NULL,
    output TEXT,
    error TEXT,
    step_timeout INTEGER NOT NULL,
    started INTEGER NOT NULL,
    updated INTEGER NOT NULL,
    ended INTEGER
);
CREATE INDEX workflow_runs_by_status ON workflow_runs (status, seq);
CREATE TABLE workflow_steps (
    run TEXT NOT NULL,
    idx INTEGER NOT NULL,
    step TEXT NOT NULL,
    status TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    failures INTEGER NOT NULL,
    idempotency_key TEXT,
    watched TEXT,
    started INTEGER,
    due INTEGER,
    output TEXT,
    error TEXT,
    ended INTEGER,
    PRIMARY KEY (run, idx)
);";

/// Migration 9: each event start's position in its stream (the `seq` of the last record
/// it took).
const STARTS: &str = "CREATE TABLE workflow_starts (
    workflow TEXT NOT NULL,
    node TEXT NOT NULL,
    stream TEXT NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (workflow, node, stream)
);";

/// Migration 10: the runs that ended, by when (the oldest pruned first).
const RUNS_BY_ENDED: &str =
    "CREATE INDEX workflow_runs_by_ended ON workflow_runs (ended) WHERE ended IS NOT NULL;";

/// Migration 11: the subscribe starts whose resource changed while the runs were at their
/// bound, in the order they came.
const HELD: &str = "CREATE TABLE workflow_held (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow TEXT NOT NULL,
    node TEXT NOT NULL,
    UNIQUE (workflow, node)
);";

/// How long a request waits for a file another connection holds.
const BUSY: Duration = Duration::from_secs(5);

/// Brings `db` to the last of `migrations`, one transaction each (taking the file's write
/// lock first, so that two processes migrate it once): the version it is at.
pub(super) fn migrate(db: &mut Connection, migrations: &[&str]) -> Result<usize, Error> {
    db.busy_timeout(BUSY)?;
    loop {
        let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        let version = usize::try_from(found)
            .ok()
            .filter(|v| *v <= migrations.len())
            .ok_or(Error::Version {
                found,
                known: migrations.len(),
            })?;
        let Some(next) = migrations.get(version) else {
            return Ok(version);
        };
        tx.execute_batch(next)?;
        tx.pragma_update(None, "user_version", found + 1)?;
        tx.commit()?;
    }
}
