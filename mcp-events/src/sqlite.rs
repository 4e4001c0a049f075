//! The embedded store (feature `sqlite`): SQLite (WAL, synchronous commits) in the file the
//! caller names, readable with `sqlite3`.
//!
//! ```sql
//! bindings(key PRIMARY KEY, cursor, secret, subscription)
//! events(seq INTEGER PRIMARY KEY AUTOINCREMENT, stream, id, binding, body, UNIQUE(stream, id))
//! meta(key PRIMARY KEY, value)     -- the documents, by name
//! ```
//!
//! A document's records are events of the stream named with it (their `id` is
//! `record/<seq>`, their `binding` empty), written with the document in one transaction.
//!
//! A batch's records and its cursor are written in one transaction; a record whose id its
//! stream holds already is passed over (`INSERT OR IGNORE`), so a batch committed twice after
//! a crash appends nothing twice.
//!
//! Group commit: a [`Group`] ([`Sqlite::group`]; [`Sqlite::commit_group`] for a slice) writes
//! the batches of several bindings in one transaction, each as it is given, under a savepoint
//! of its own, so that one sync of the file (the bound on durable commits per second) makes
//! them all durable; each batch still succeeds or fails on its own.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use crate::binding::Batch;
use crate::store::{Entry, Store, StoreError, Stored};

/// The SQLite store.
#[derive(Debug)]
pub struct Sqlite {
    db: Connection,
}

fn failed(e: rusqlite::Error) -> StoreError {
    StoreError(e.to_string())
}

/// The store's tables, as `CREATE TABLE IF NOT EXISTS` statements (run by [`Sqlite::open`]).
///
/// A caller that versions its database itself runs these in a migration of its own and opens
/// the store with [`Sqlite::open_existing`]. They are stable: a later change of the store's
/// tables comes as statements of their own, never as an edit of these.
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS bindings (
    key TEXT PRIMARY KEY,
    cursor TEXT,
    secret TEXT,
    subscription TEXT
);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    stream TEXT NOT NULL,
    id TEXT NOT NULL,
    binding TEXT NOT NULL,
    body BLOB NOT NULL,
    UNIQUE (stream, id)
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);";

/// How every connection is set up: WAL, synchronous commits, a wait on a busy file.
const PRAGMAS: &str = "PRAGMA journal_mode = WAL;
PRAGMA synchronous = FULL;
PRAGMA busy_timeout = 5000;";

impl Sqlite {
    /// Opens the store in the database file `path`, creating the file (not its directory)
    /// when there is none, and its tables ([`SCHEMA`]) when they are missing.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let store = Self::open_existing(path)?;
        store.db.execute_batch(SCHEMA).map_err(failed)?;
        Ok(store)
    }

    /// Opens the store in the database file `path` as it is, creating the file (not its
    /// directory) when there is none but none of its tables: the caller made them (with
    /// [`SCHEMA`]). A table missing fails the requests that use it.
    pub fn open_existing(path: &Path) -> Result<Self, StoreError> {
        let db =
            Connection::open(path).map_err(|e| StoreError(format!("{}: {e}", path.display())))?;
        db.execute_batch(PRAGMAS).map_err(failed)?;
        Ok(Self { db })
    }

    /// Checkpoints the WAL into the database file when a commit leaves it holding `pages`
    /// pages or more (`PRAGMA wal_autocheckpoint`; SQLite's default, which [`Sqlite::open`]
    /// and [`Sqlite::open_existing`] keep, is 1,000, about 4 MiB); 0 turns checkpointing at
    /// commits off.
    ///
    /// A checkpoint copies each page the WAL holds once, however many of its commits wrote
    /// that page, and runs inside the commit that crossed the bound. Commits from many
    /// bindings rewrite the same pages of the stream index again and again, so a larger bound
    /// does less copying per commit, at the cost of a larger WAL file (it keeps its largest
    /// size once reached): 16 bindings committing 1 KiB records in groups made a few percent
    /// more commits a second at 10,000 pages than at 1,000 (`--bench group`: medians of 23.4k
    /// against 22.7k over 18 rounds on one machine), and the checkpoints copied fewer pages.
    pub fn set_checkpoint_pages(&mut self, pages: u32) -> Result<(), StoreError> {
        self.db
            .pragma_update(None, "wal_autocheckpoint", pages)
            .map_err(failed)
    }

    /// Commits several batches, each `(binding, stream, batch)` as [`Store::commit`] does
    /// one, in one transaction (one sync of the file for them all): the outcome of each, in
    /// their order. The same as a [`Group`] given them one after another.
    pub fn commit_group(
        &mut self,
        batches: &[(&str, &str, &Batch)],
    ) -> Vec<Result<usize, StoreError>> {
        let mut group = self.group();
        for &(binding, stream, batch) in batches {
            group.append(binding, stream, batch);
        }
        group.commit()
    }

    /// Begins a group commit: batches written into one transaction as they are given, and
    /// committed together ([`Group::commit`]).
    #[must_use = "a group dropped without its commit is rolled back"]
    pub fn group(&mut self) -> Group<'_> {
        let transaction = self.db.transaction().map_err(failed);
        Group {
            batches: 0,
            outcomes: Vec::new(),
            transaction,
        }
    }
}

/// A group commit under way: each batch written as it is given, under a savepoint of its
/// own, into one transaction committed by [`Group::commit`] (one sync of the file for them
/// all). A batch can be given while the next ones are still awaited, so that its writing
/// overlaps their coming.
///
/// One that fails (its records and its cursor rolled back) fails alone, and the others are
/// committed. When the transaction itself fails (its beginning, its `COMMIT`, or an error
/// that rolled it back), every batch fails and none is written. An outcome is known only once
/// the `COMMIT` returned: a batch reported appended is durable. Dropped without its commit,
/// a group is rolled back.
#[derive(Debug)]
#[must_use = "a group dropped without its commit is rolled back"]
pub struct Group<'a> {
    /// How many batches were given.
    batches: usize,
    /// The outcome of each batch written, in order.
    outcomes: Vec<Result<usize, StoreError>>,
    /// The transaction, or why there is none (any more).
    transaction: Result<rusqlite::Transaction<'a>, StoreError>,
}

impl Group<'_> {
    /// Writes `batch`, as [`Store::commit`] would, for `binding` to `stream`.
    pub fn append(&mut self, binding: &str, stream: &str, batch: &Batch) {
        self.batches += 1;
        let Ok(tx) = &self.transaction else {
            return;
        };
        let outcome = in_savepoint(tx, || append(tx, binding, stream, batch));
        if outcome.is_err() && tx.is_autocommit() {
            // The failure ended the transaction (SQLite rolled it back): nothing of the
            // group is written.
            let why = outcome.err().map(|e| e.to_string()).unwrap_or_default();
            self.transaction = Err(StoreError(format!(
                "the group's transaction was rolled back: {why}"
            )));
            return;
        }
        self.outcomes.push(outcome.map_err(failed));
    }

    /// Commits the group: the outcome of each batch, in the order they were given.
    pub fn commit(self) -> Vec<Result<usize, StoreError>> {
        let failure = match self.transaction {
            Ok(tx) => match tx.commit() {
                Ok(()) => return self.outcomes,
                Err(e) => failed(e),
            },
            Err(e) => e,
        };
        vec![Err(failure); self.batches]
    }
}

/// Runs `write` under a savepoint of `db`'s transaction: what it wrote is kept when it and the
/// savepoint's release succeed, and rolled back otherwise, its own error returned. When the
/// rollback itself fails, the whole transaction is rolled back, so that nothing of a failed
/// batch is committed (the caller sees the transaction ended). The statements are prepared
/// once per connection.
fn in_savepoint<T>(
    db: &Connection,
    write: impl FnOnce() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let run = |sql: &str| db.prepare_cached(sql).and_then(|mut s| s.execute([]));
    run("SAVEPOINT batch")?;
    let written = write().and_then(|written| run("RELEASE batch").map(|_| written));
    // Left to the transaction when it is over already (SQLite rolled it back).
    if written.is_err()
        && !db.is_autocommit()
        && (run("ROLLBACK TO batch").is_err() || run("RELEASE batch").is_err())
    {
        let _ = db.execute_batch("ROLLBACK");
    }
    written
}

/// Appends `batch`'s records to `stream` (passing over the ids it holds) and stores its
/// cursor as `binding`'s, in the transaction (or savepoint) `db` is in: how many it appended.
fn append(db: &Connection, binding: &str, stream: &str, batch: &Batch) -> rusqlite::Result<usize> {
    let mut appended = 0;
    let mut insert = db.prepare_cached(
        "INSERT OR IGNORE INTO events (stream, id, binding, body) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for record in &batch.records {
        appended += insert.execute(params![stream, record.id, binding, record.bytes])?;
    }
    db.prepare_cached(
        "INSERT INTO bindings (key, cursor) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET cursor = ?2",
    )?
    .execute(params![binding, batch.cursor])?;
    Ok(appended)
}

impl Store for Sqlite {
    fn load(&mut self, binding: &str) -> Result<Stored, StoreError> {
        let row = self
            .db
            .query_row(
                "SELECT cursor, secret, subscription FROM bindings WHERE key = ?1",
                params![binding],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(failed)?;
        let mut stored = Stored::default();
        if let Some((cursor, secret, subscription)) = row {
            stored.cursor = cursor;
            stored.secret = secret;
            stored.subscription = subscription;
        }
        Ok(stored)
    }

    fn save_webhook(
        &mut self,
        binding: &str,
        secret: &str,
        subscription: Option<&str>,
    ) -> Result<(), StoreError> {
        self.db
            .execute(
                "INSERT INTO bindings (key, secret, subscription) VALUES (?1, ?2, ?3)
                 ON CONFLICT (key) DO UPDATE SET secret = ?2, subscription = ?3",
                params![binding, secret, subscription],
            )
            .map(drop)
            .map_err(failed)
    }

    fn commit(&mut self, binding: &str, stream: &str, batch: &Batch) -> Result<usize, StoreError> {
        self.commit_group(&[(binding, stream, batch)])
            .pop()
            .unwrap_or_else(|| Err(StoreError("no outcome".into())))
    }

    fn read(&mut self, stream: &str, after: i64, limit: usize) -> Result<Vec<Entry>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut query = self
            .db
            .prepare_cached(
                "SELECT seq, body FROM events WHERE stream = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
            )
            .map_err(failed)?;
        let rows = query
            .query_map(params![stream, after, limit], |r| {
                Ok(Entry {
                    seq: r.get(0)?,
                    bytes: r.get(1)?,
                })
            })
            .map_err(failed)?;
        rows.collect::<Result<_, _>>().map_err(failed)
    }

    fn save_document(
        &mut self,
        name: &str,
        value: &str,
        stream: &str,
        records: &[Vec<u8>],
    ) -> Result<(), StoreError> {
        let tx = self.db.transaction().map_err(failed)?;
        tx.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = ?2",
            params![name, value],
        )
        .map_err(failed)?;
        {
            // A record's id is its place in the store: unique, and never reused.
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO events (stream, id, binding, body)
                     VALUES (?1, 'record/' || (SELECT IFNULL(MAX(seq), 0) + 1 FROM events), '', ?2)",
                )
                .map_err(failed)?;
            for record in records {
                insert.execute(params![stream, record]).map_err(failed)?;
            }
        }
        tx.commit().map_err(failed)
    }

    fn load_document(&mut self, name: &str) -> Result<Option<String>, StoreError> {
        self.db
            .query_row(
                "SELECT value FROM meta WHERE key = ?1",
                params![name],
                |r| r.get(0),
            )
            .optional()
            .map_err(failed)
    }

    fn remove(&mut self, binding: &str, stream: &str) -> Result<(), StoreError> {
        let tx = self.db.transaction().map_err(failed)?;
        tx.execute(
            "DELETE FROM events WHERE stream = ?1 AND binding = ?2",
            params![stream, binding],
        )
        .map_err(failed)?;
        tx.execute("DELETE FROM bindings WHERE key = ?1", params![binding])
            .map_err(failed)?;
        tx.commit().map_err(failed)
    }

    fn forget(&mut self, binding: &str) -> Result<(), StoreError> {
        self.db
            .execute("DELETE FROM bindings WHERE key = ?1", params![binding])
            .map(drop)
            .map_err(failed)
    }
}

#[cfg(test)]
mod tests {
    use crate::binding::Record;

    use super::*;

    fn record(id: &str) -> Record {
        Record {
            id: format!("mcp/s/t/{id}"),
            event_id: id.to_owned(),
            bytes: format!(r#"{{"id":"{id}"}}"#).into_bytes(),
        }
    }

    fn temp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    /// `open_existing` makes no table; the schema run on its file makes a working store.
    #[test]
    fn open_existing_makes_no_table() {
        let dir = temp();
        let file = dir.path().join("store.sqlite3");
        let mut store = Sqlite::open_existing(&file).unwrap();
        assert!(store.load("b").is_err(), "no table yet");
        store.db.execute_batch(SCHEMA).unwrap();
        assert_eq!(store.load("b").unwrap(), Stored::default());
    }

    /// The WAL is checkpointed (and so written again from its start) at the bound set, and
    /// only grows with none.
    #[test]
    fn the_wal_is_checkpointed_at_the_pages_set() {
        let wal_after = |pages: u32| {
            let dir = temp();
            let file = dir.path().join("store.sqlite3");
            let mut store = Sqlite::open(&file).unwrap();
            store.set_checkpoint_pages(pages).unwrap();
            let read = |r: &rusqlite::Row<'_>| r.get::<_, u32>(0);
            let set = store
                .db
                .pragma_query_value(None, "wal_autocheckpoint", read);
            assert_eq!(set.unwrap(), pages);
            for n in 0..50 {
                let batch = Batch {
                    records: vec![record(&n.to_string())],
                    cursor: Some(n.to_string()),
                };
                assert_eq!(store.commit("b", "in", &batch), Ok(1));
            }
            std::fs::metadata(dir.path().join("store.sqlite3-wal"))
                .unwrap()
                .len()
        };
        let page = 4096 + 24;
        assert!(
            wal_after(0) > 50 * page,
            "each commit writes a page at least"
        );
        assert!(
            wal_after(1) < 16 * page,
            "a commit's pages, then the WAL starts again"
        );
    }

    #[test]
    fn a_batch_and_its_cursor_commit_together_and_nothing_twice() {
        let dir = temp();
        let file = dir.path().join("store.sqlite3");
        let mut store = Sqlite::open(&file).unwrap();
        assert_eq!(store.load("b").unwrap(), Stored::default());
        let batch = Batch {
            records: vec![record("a"), record("b")],
            cursor: Some("c2".into()),
        };
        assert_eq!(store.commit("b", "in", &batch).unwrap(), 2);
        // The same batch again (a crash between the commit and the acknowledgment).
        assert_eq!(store.commit("b", "in", &batch).unwrap(), 0);
        drop(store);
        let mut store = Sqlite::open(&file).unwrap();
        assert_eq!(store.load("b").unwrap().cursor.as_deref(), Some("c2"));
        let read = store.read("in", 0, 10).unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(read[0].bytes, br#"{"id":"a"}"#);
        assert_eq!(store.read("in", read[0].seq, 10).unwrap().len(), 1);
        assert_eq!(store.read("other", 0, 10).unwrap().len(), 0);

        store.save_webhook("b", "whsec_x", Some("sub_1")).unwrap();
        let stored = store.load("b").unwrap();
        assert_eq!(
            (
                stored.cursor.as_deref(),
                stored.secret.as_deref(),
                stored.subscription.as_deref()
            ),
            (Some("c2"), Some("whsec_x"), Some("sub_1"))
        );
        // A batch with no records still moves the cursor; a null cursor is stored as null.
        store
            .commit(
                "b",
                "in",
                &Batch {
                    records: vec![],
                    cursor: None,
                },
            )
            .unwrap();
        assert_eq!(store.load("b").unwrap().cursor, None);

        assert_eq!(store.load_document("index").unwrap(), None);
        store.save_document("index", "[]", "trail", &[]).unwrap();
        let audit = [b"{\"a\":1}".to_vec(), b"{\"a\":2}".to_vec()];
        store
            .save_document("index", r#"[{"id":"b1"}]"#, "trail", &audit)
            .unwrap();
        store
            .save_document("index", r#"[{"id":"b1"}]"#, "trail", &audit[..1])
            .unwrap();
        store.save_document("other", "{}", "trail", &[]).unwrap();
        assert_eq!(
            store.load_document("index").unwrap().as_deref(),
            Some(r#"[{"id":"b1"}]"#)
        );
        assert_eq!(store.load_document("other").unwrap().as_deref(), Some("{}"));
        let trail: Vec<Vec<u8>> = store
            .read("trail", 0, 10)
            .unwrap()
            .into_iter()
            .map(|e| e.bytes)
            .collect();
        assert_eq!(trail, [&audit[..], &audit[..1]].concat());

        store.save_webhook("f", "whsec_y", Some("sub_2")).unwrap();
        store.forget("f").unwrap();
        assert_eq!(store.load("f").unwrap(), Stored::default());

        store.remove("b", "in").unwrap();
        assert_eq!(store.read("in", 0, 10).unwrap().len(), 0);
        assert_eq!(store.load("b").unwrap(), Stored::default());
    }

    fn batch(ids: &[&str], cursor: &str) -> Batch {
        Batch {
            records: ids.iter().map(|id| record(id)).collect(),
            cursor: Some(cursor.into()),
        }
    }

    fn ids(store: &mut Sqlite, stream: &str) -> Vec<String> {
        store
            .read(stream, 0, 100)
            .unwrap()
            .into_iter()
            .map(|e| String::from_utf8(e.bytes).unwrap())
            .collect()
    }

    /// Several bindings' batches in one transaction: each appended to its stream with its
    /// cursor, each outcome its own; a batch committed before appends nothing twice.
    #[test]
    fn a_group_commits_each_batch_with_its_cursor() {
        let dir = temp();
        let mut store = Sqlite::open(&dir.path().join("store.sqlite3")).unwrap();
        let (one, two, three) = (
            batch(&["a"], "c1"),
            batch(&["a", "b"], "c2"),
            batch(&[], "c3"),
        );
        assert_eq!(store.commit("b1", "in", &one).unwrap(), 1);
        let outcomes = store.commit_group(&[
            ("b1", "in", &one),
            ("b2", "other", &two),
            ("b3", "in", &three),
        ]);
        assert_eq!(outcomes, [Ok(0), Ok(2), Ok(0)]);
        assert_eq!(ids(&mut store, "in"), [r#"{"id":"a"}"#]);
        assert_eq!(ids(&mut store, "other"), [r#"{"id":"a"}"#, r#"{"id":"b"}"#]);
        for (binding, cursor) in [("b1", "c1"), ("b2", "c2"), ("b3", "c3")] {
            assert_eq!(store.load(binding).unwrap().cursor.as_deref(), Some(cursor));
        }
        assert_eq!(store.commit_group(&[]), []);
    }

    /// A group is written as its batches are given and kept only by its commit: dropped
    /// before, nothing of it stays; given one by one, it commits as `commit_group` does.
    #[test]
    fn a_group_is_kept_by_its_commit_only() {
        let dir = temp();
        let mut store = Sqlite::open(&dir.path().join("store.sqlite3")).unwrap();
        let (one, two) = (batch(&["a"], "c1"), batch(&["b"], "c2"));
        let mut group = store.group();
        group.append("b1", "in", &one);
        drop(group);
        assert!(ids(&mut store, "in").is_empty());
        assert_eq!(store.load("b1").unwrap(), Stored::default());
        let mut group = store.group();
        group.append("b1", "in", &one);
        group.append("b2", "in", &two);
        assert_eq!(group.commit(), [Ok(1), Ok(1)]);
        assert_eq!(ids(&mut store, "in"), [r#"{"id":"a"}"#, r#"{"id":"b"}"#]);
        assert_eq!(store.group().commit(), []);
    }

    /// A group whose transaction could not begin fails every batch given to it.
    #[test]
    fn a_group_that_cannot_begin_fails_every_batch() {
        let dir = temp();
        let mut store = Sqlite::open(&dir.path().join("store.sqlite3")).unwrap();
        store.db.execute_batch("BEGIN").unwrap();
        let (one, two) = (batch(&["a"], "c1"), batch(&["b"], "c2"));
        let mut group = store.group();
        group.append("b1", "in", &one);
        group.append("b2", "in", &two);
        let outcomes = group.commit();
        assert_eq!(outcomes.len(), 2);
        for outcome in outcomes {
            let StoreError(why) = outcome.unwrap_err();
            assert!(why.contains("within a transaction"), "{why}");
        }
        store.db.execute_batch("ROLLBACK").unwrap();
        assert!(ids(&mut store, "in").is_empty());
    }

    /// A store whose insert of the record `bad` does `raise` (a trigger), in a directory of
    /// its own.
    fn refusing_bad(raise: &str) -> (tempfile::TempDir, Sqlite) {
        let dir = temp();
        let store = Sqlite::open(&dir.path().join("store.sqlite3")).unwrap();
        store
            .db
            .execute_batch(&format!(
                "CREATE TRIGGER refuse BEFORE INSERT ON events WHEN NEW.id = 'mcp/s/t/bad'
                 BEGIN SELECT {raise}; END;"
            ))
            .unwrap();
        (dir, store)
    }

    /// A batch that fails in a group fails alone and leaves nothing (neither its records
    /// before the failing one nor its cursor); the batches around it are committed.
    #[test]
    fn a_failing_batch_fails_alone_and_whole() {
        let (_dir, mut store) = refusing_bad("RAISE(ABORT, 'refused')");
        let (first, bad, last) = (
            batch(&["a"], "c1"),
            batch(&["x", "bad", "y"], "c2"),
            batch(&["z"], "c3"),
        );
        let outcomes = store.commit_group(&[
            ("b1", "in", &first),
            ("b2", "in", &bad),
            ("b3", "in", &last),
        ]);
        assert_eq!(outcomes[0], Ok(1));
        assert!(
            outcomes[1].as_ref().is_err_and(|e| e.0.contains("refused")),
            "{outcomes:?}"
        );
        assert_eq!(outcomes[2], Ok(1));
        assert_eq!(ids(&mut store, "in"), [r#"{"id":"a"}"#, r#"{"id":"z"}"#]);
        assert_eq!(store.load("b2").unwrap(), Stored::default());
        assert_eq!(store.load("b3").unwrap().cursor.as_deref(), Some("c3"));
        // Alone, through `commit`, it fails the same way and writes nothing.
        assert!(store.commit("b2", "in", &bad).is_err());
        assert_eq!(ids(&mut store, "in").len(), 2);
    }

    /// A failure that ends the transaction itself fails every batch of the group, and none
    /// is written, not even those before it.
    #[test]
    fn a_rolled_back_group_fails_every_batch() {
        let (_dir, mut store) = refusing_bad("RAISE(ROLLBACK, 'rolled back')");
        let (first, bad, last) = (
            batch(&["a"], "c1"),
            batch(&["bad"], "c2"),
            batch(&["z"], "c3"),
        );
        let outcomes = store.commit_group(&[
            ("b1", "in", &first),
            ("b2", "in", &bad),
            ("b3", "in", &last),
        ]);
        assert!(outcomes.iter().all(Result::is_err), "{outcomes:?}");
        assert_eq!(outcomes.len(), 3);
        assert!(ids(&mut store, "in").is_empty());
        assert_eq!(store.load("b1").unwrap(), Stored::default());
        // The store goes on.
        assert_eq!(store.commit_group(&[("b3", "in", &last)]), [Ok(1)]);
    }
}
