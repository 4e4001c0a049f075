//! The store's task: one OS thread (`agentd-store`) owns the SQLite connection of
//! `<store.path>/agentd.sqlite3` and answers typed requests, one at a time, in the order they
//! were sent; the daemon holds a [`Store`], a cheap handle whose every method sends its request
//! at once and resolves to the answer. No SQLite call runs on an async thread.
//!
//! At open, the thread makes the directory, brings the database's schema to the latest
//! version ([`MIGRATIONS`]) and opens `mcp_events`' store on it; what fails there is the
//! answer of [`Store::open`]. The thread ends once every handle is dropped, or at
//! [`Store::close`], after finishing the requests sent before.
//!
//! The schema's version is the database's `PRAGMA user_version`: migration `n` takes it from
//! `n - 1` to `n`, in one transaction with the bump, so a migration that fails leaves the
//! database as it was. A file of a version this build does not know is refused.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use std::{fmt, thread};

use mcp_events::binding::Batch;
use mcp_events::sqlite::{SCHEMA, Sqlite};
use mcp_events::store::{Entry, Store as _, StoreError, Stored};
use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::{mpsc, oneshot};

/// The database file, inside `store.path`.
pub(crate) const FILE: &str = "agentd.sqlite3";

/// The schema's migrations, oldest first: entry `n - 1` takes the database from version
/// `n - 1` to `n`. A change of the schema is one more entry at the end; an entry, once
/// released, is never edited.
const MIGRATIONS: &[&str] = &[
    // 1: MCP Events' bindings, streams and documents (the tables a file made before
    // versioning holds already: `CREATE TABLE IF NOT EXISTS`).
    SCHEMA,
];

/// How long a request waits for a file another connection holds.
const BUSY: Duration = Duration::from_secs(5);

/// What went wrong at the store's boundary.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum Error {
    /// The store's thread has ended (closed, or gone): the request was not made.
    Closed,
    /// The store's directory could not be made.
    Dir {
        /// The directory (`store.path`).
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The store's thread could not be started.
    Thread(std::io::Error),
    /// SQLite failed opening or migrating the database file.
    Sqlite(rusqlite::Error),
    /// The database's schema is of a version this build does not know (a later one's).
    Version {
        /// Its `user_version`.
        found: i64,
        /// The latest version this build knows.
        known: usize,
    },
    /// The store failed a request (or opening the migrated file).
    Store(StoreError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed => f.write_str("store: closed"),
            Self::Dir { path, source } => write!(f, "store: {}: {source}", path.display()),
            Self::Thread(e) => write!(f, "store: its thread: {e}"),
            Self::Sqlite(e) => write!(f, "store: {e}"),
            Self::Version { found, known } => write!(
                f,
                "store: the database's schema is version {found}, this build knows up to \
                 {known}: it was made by a later agentd"
            ),
            // Already `store: …`.
            Self::Store(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Dir { source, .. } | Self::Thread(source) => Some(source),
            Self::Sqlite(e) => Some(e),
            Self::Store(e) => Some(e),
            Self::Closed | Self::Version { .. } => None,
        }
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Self::Sqlite(e)
    }
}

/// Where a request's answer goes.
type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

/// A request to the store's thread: `mcp_events::store::Store`'s methods, and the close.
enum Request {
    Load {
        binding: String,
        reply: Reply<Stored>,
    },
    SaveWebhook {
        binding: String,
        secret: String,
        subscription: Option<String>,
        reply: Reply<()>,
    },
    Commit {
        binding: String,
        stream: String,
        batch: Arc<Batch>,
        reply: Reply<usize>,
    },
    Read {
        stream: String,
        after: i64,
        limit: usize,
        reply: Reply<Vec<Entry>>,
    },
    SaveDocument {
        name: String,
        value: String,
        stream: String,
        records: Vec<Vec<u8>>,
        reply: Reply<()>,
    },
    LoadDocument {
        name: String,
        reply: Reply<Option<String>>,
    },
    Remove {
        binding: String,
        stream: String,
        reply: Reply<()>,
    },
    Forget {
        binding: String,
        reply: Reply<()>,
    },
    Close {
        closed: oneshot::Sender<()>,
    },
}

/// The handle of the store's thread. Each method sends its request when called (so requests
/// are answered in the order of the calls, whenever they are awaited) and resolves to the
/// answer; dropping the future drops only the answer.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    requests: mpsc::UnboundedSender<Request>,
}

impl Store {
    /// Starts the store's thread on `<dir>/agentd.sqlite3`, making `dir` when it is missing
    /// and migrating the database to the latest schema; resolves once it is open.
    pub(crate) async fn open(dir: &Path) -> Result<Self, Error> {
        Self::open_with(dir, MIGRATIONS).await
    }

    async fn open_with(dir: &Path, migrations: &'static [&'static str]) -> Result<Self, Error> {
        let (requests, taken) = mpsc::unbounded_channel();
        let (opened, open) = oneshot::channel();
        let dir = dir.to_owned();
        thread::Builder::new()
            .name("agentd-store".into())
            .spawn(move || match start(&dir, migrations) {
                Ok(db) => {
                    let _ = opened.send(Ok(()));
                    serve(db, taken);
                }
                Err(e) => drop(opened.send(Err(e))),
            })
            .map_err(Error::Thread)?;
        open.await.unwrap_or(Err(Error::Closed))?;
        Ok(Self { requests })
    }

    /// Sends the request `make` builds; resolves to its answer.
    fn ask<T, F>(&self, make: F) -> impl Future<Output = Result<T, Error>> + Send + use<T, F>
    where
        T: Send + 'static,
        F: FnOnce(Reply<T>) -> Request,
    {
        let (reply, answer) = oneshot::channel();
        let sent = self.requests.send(make(reply)).is_ok();
        async move {
            if !sent {
                return Err(Error::Closed);
            }
            match answer.await {
                Ok(answered) => answered.map_err(Error::Store),
                Err(_) => Err(Error::Closed),
            }
        }
    }

    /// What is kept of `binding`, if anything.
    pub(crate) fn load(
        &self,
        binding: &str,
    ) -> impl Future<Output = Result<Stored, Error>> + Send + use<> {
        let binding = binding.to_owned();
        self.ask(|reply| Request::Load { binding, reply })
    }

    /// Keeps `binding`'s webhook secret and subscription id.
    pub(crate) fn save_webhook(
        &self,
        binding: &str,
        secret: &str,
        subscription: Option<&str>,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<> {
        let (binding, secret) = (binding.to_owned(), secret.to_owned());
        let subscription = subscription.map(str::to_owned);
        self.ask(|reply| Request::SaveWebhook {
            binding,
            secret,
            subscription,
            reply,
        })
    }

    /// Appends `batch`'s records to `stream` with `binding`'s cursor, in one transaction:
    /// how many it appended.
    pub(crate) fn commit(
        &self,
        binding: &str,
        stream: &str,
        batch: Arc<Batch>,
    ) -> impl Future<Output = Result<usize, Error>> + Send + use<> {
        let (binding, stream) = (binding.to_owned(), stream.to_owned());
        self.ask(|reply| Request::Commit {
            binding,
            stream,
            batch,
            reply,
        })
    }

    /// Up to `limit` records of `stream` after position `after`, oldest first.
    pub(crate) fn read(
        &self,
        stream: &str,
        after: i64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Entry>, Error>> + Send + use<> {
        let stream = stream.to_owned();
        self.ask(move |reply| Request::Read {
            stream,
            after,
            limit,
            reply,
        })
    }

    /// Keeps `value` as the document `name` and appends `records` to `stream`, in one
    /// transaction.
    pub(crate) fn save_document(
        &self,
        name: &str,
        value: &str,
        stream: &str,
        records: Vec<Vec<u8>>,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<> {
        let (name, value, stream) = (name.to_owned(), value.to_owned(), stream.to_owned());
        self.ask(|reply| Request::SaveDocument {
            name,
            value,
            stream,
            records,
            reply,
        })
    }

    /// The document `name`, if one is kept.
    pub(crate) fn load_document(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<String>, Error>> + Send + use<> {
        let name = name.to_owned();
        self.ask(|reply| Request::LoadDocument { name, reply })
    }

    /// Forgets `binding` and deletes its records from `stream`.
    pub(crate) fn remove(
        &self,
        binding: &str,
        stream: &str,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<> {
        let (binding, stream) = (binding.to_owned(), stream.to_owned());
        self.ask(|reply| Request::Remove {
            binding,
            stream,
            reply,
        })
    }

    /// Forgets `binding`'s cursor, secret and subscription id; its records stay.
    pub(crate) fn forget(
        &self,
        binding: &str,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<> {
        let binding = binding.to_owned();
        self.ask(|reply| Request::Forget { binding, reply })
    }

    /// Ends the store's thread once the requests sent before are answered; those sent after
    /// are answered [`Error::Closed`]. Resolves once the database is closed (at once when
    /// the thread had ended).
    pub(crate) fn close(&self) -> impl Future<Output = ()> + Send + use<> {
        let (closed, done) = oneshot::channel();
        let _ = self.requests.send(Request::Close { closed });
        async move {
            let _ = done.await;
        }
    }
}

/// On the store's thread: the directory made, the database migrated, the store opened.
fn start(dir: &Path, migrations: &[&str]) -> Result<Sqlite, Error> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Dir {
        path: dir.to_owned(),
        source,
    })?;
    let path = dir.join(FILE);
    let mut db = Connection::open(&path)?;
    migrate(&mut db, migrations)?;
    drop(db);
    Sqlite::open_existing(&path).map_err(Error::Store)
}

/// Brings `db` to the last of `migrations`, one transaction each (taking the file's write
/// lock first, so that two processes migrate it once): the version it is at.
fn migrate(db: &mut Connection, migrations: &[&str]) -> Result<usize, Error> {
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

/// On the store's thread: answers each request in turn until every handle is gone or the
/// store is closed.
fn serve(mut db: Sqlite, mut requests: mpsc::UnboundedReceiver<Request>) {
    while let Some(request) = requests.blocking_recv() {
        // An answer nobody waits for any more is dropped.
        match request {
            Request::Load { binding, reply } => drop(reply.send(db.load(&binding))),
            Request::SaveWebhook {
                binding,
                secret,
                subscription,
                reply,
            } => {
                let saved = db.save_webhook(&binding, &secret, subscription.as_deref());
                drop(reply.send(saved));
            }
            Request::Commit {
                binding,
                stream,
                batch,
                reply,
            } => drop(reply.send(db.commit(&binding, &stream, &batch))),
            Request::Read {
                stream,
                after,
                limit,
                reply,
            } => drop(reply.send(db.read(&stream, after, limit))),
            Request::SaveDocument {
                name,
                value,
                stream,
                records,
                reply,
            } => {
                let saved = db.save_document(&name, &value, &stream, &records);
                drop(reply.send(saved));
            }
            Request::LoadDocument { name, reply } => drop(reply.send(db.load_document(&name))),
            Request::Remove {
                binding,
                stream,
                reply,
            } => drop(reply.send(db.remove(&binding, &stream))),
            Request::Forget { binding, reply } => drop(reply.send(db.forget(&binding))),
            Request::Close { closed } => {
                // Nothing more is taken; what was sent meanwhile is dropped unanswered
                // (its callers hear `Closed`).
                requests.close();
                while requests.try_recv().is_ok() {}
                drop(db);
                let _ = closed.send(());
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use mcp_events::binding::Record;

    use super::*;

    /// The tables as a file made before versioning has them (user_version 0).
    const UNVERSIONED: &str = "CREATE TABLE bindings (
            key TEXT PRIMARY KEY, cursor TEXT, secret TEXT, subscription TEXT);
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT, stream TEXT NOT NULL, id TEXT NOT NULL,
            binding TEXT NOT NULL, body BLOB NOT NULL, UNIQUE (stream, id));
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);";

    fn version(db: &Connection) -> i64 {
        db.query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    }

    fn tables(db: &Connection) -> Vec<String> {
        let mut query = db
            .prepare(
                "SELECT name FROM sqlite_master WHERE type = 'table' \
                 AND name NOT LIKE 'sqlite_%' ORDER BY name",
            )
            .unwrap();
        query
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// A connection to `agentd.sqlite3` in a directory of its own.
    fn file() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let db = Connection::open(dir.path().join(FILE)).unwrap();
        (dir, db)
    }

    #[test]
    fn an_empty_file_is_brought_to_the_latest_version() {
        let (_dir, mut db) = file();
        assert_eq!(migrate(&mut db, MIGRATIONS).unwrap(), MIGRATIONS.len());
        assert_eq!(version(&db), i64::try_from(MIGRATIONS.len()).unwrap());
        assert_eq!(tables(&db), ["bindings", "events", "meta"]);
    }

    /// A file made before versioning (its tables, user_version 0) is migrated with its rows.
    #[tokio::test]
    async fn a_file_made_before_versioning_keeps_its_rows() {
        let (dir, db) = file();
        db.execute_batch(UNVERSIONED).unwrap();
        db.execute_batch(
            "INSERT INTO bindings VALUES ('b1', 'c7', 'whsec_x', 'sub_1');
             INSERT INTO events (stream, id, binding, body) VALUES ('in', 'e1', 'b1', X'7B7D');
             INSERT INTO meta VALUES ('subscriptions', '[]');",
        )
        .unwrap();
        assert_eq!(version(&db), 0);
        drop(db);

        let store = Store::open(dir.path()).await.unwrap();
        let stored = store.load("b1").await.unwrap();
        assert_eq!(
            (stored.cursor, stored.secret, stored.subscription),
            (
                Some("c7".to_owned()),
                Some("whsec_x".to_owned()),
                Some("sub_1".to_owned())
            )
        );
        let read = store.read("in", 0, 10).await.unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].bytes, b"{}");
        assert_eq!(
            store.load_document("subscriptions").await.unwrap(),
            Some("[]".to_owned())
        );
        store.close().await;
        let db = Connection::open(dir.path().join(FILE)).unwrap();
        assert_eq!(version(&db), i64::try_from(MIGRATIONS.len()).unwrap());
    }

    #[test]
    fn the_latest_version_is_left_as_it_is() {
        let (_dir, mut db) = file();
        migrate(&mut db, MIGRATIONS).unwrap();
        db.execute_batch("INSERT INTO meta VALUES ('k', 'v')")
            .unwrap();
        assert_eq!(migrate(&mut db, MIGRATIONS).unwrap(), MIGRATIONS.len());
        let kept: String = db
            .query_row("SELECT value FROM meta WHERE key = 'k'", [], |r| r.get(0))
            .unwrap();
        assert_eq!(kept, "v");
    }

    /// A file of a later build is refused, untouched, and the store does not open on it.
    #[tokio::test]
    async fn a_later_version_is_refused() {
        let (dir, db) = file();
        let later = i64::try_from(MIGRATIONS.len()).unwrap() + 1;
        db.pragma_update(None, "user_version", later).unwrap();
        drop(db);
        let refused = Store::open(dir.path()).await.unwrap_err();
        assert!(
            matches!(refused, Error::Version { found, known } if found == later && known == MIGRATIONS.len()),
            "{refused:?}"
        );
        assert!(refused.to_string().contains("later agentd"), "{refused}");
        let db = Connection::open(dir.path().join(FILE)).unwrap();
        assert_eq!(version(&db), later);
        assert!(tables(&db).is_empty());
    }

    /// A migration that fails is undone whole: the version stays, and so do the tables.
    #[tokio::test]
    async fn a_failed_migration_leaves_the_version_unchanged() {
        const BROKEN: &[&str] = &[SCHEMA, "CREATE TABLE plans (id TEXT); NOT SQL"];
        let (dir, mut db) = file();
        migrate(&mut db, &MIGRATIONS[..1]).unwrap();
        let failed = migrate(&mut db, BROKEN).unwrap_err();
        assert!(matches!(failed, Error::Sqlite(_)), "{failed:?}");
        assert!(std::error::Error::source(&failed).is_some());
        assert_eq!(version(&db), 1);
        assert_eq!(tables(&db), ["bindings", "events", "meta"]);
        drop(db);
        // Through the store, too: opening fails with it.
        let failed = Store::open_with(dir.path(), BROKEN).await.unwrap_err();
        assert!(matches!(failed, Error::Sqlite(_)), "{failed:?}");
    }

    /// Requests sent before the close are answered; after it, the store is closed.
    #[tokio::test]
    async fn a_closed_store_answers_closed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        let batch = Batch {
            records: vec![Record {
                id: "mcp/s/t/e1".into(),
                event_id: "e1".into(),
                bytes: b"{}".to_vec(),
            }],
            cursor: Some("c1".into()),
        };
        // Sent first, awaited after the close.
        let committed = store.commit("b1", "in", Arc::new(batch));
        let other = store.clone();
        other.close().await;
        assert_eq!(committed.await.unwrap(), 1);
        assert!(matches!(store.load("b1").await, Err(Error::Closed)));
        store.close().await;

        // What was committed is there for the next open.
        let store = Store::open(dir.path()).await.unwrap();
        assert_eq!(
            store.load("b1").await.unwrap().cursor.as_deref(),
            Some("c1")
        );
    }
}
