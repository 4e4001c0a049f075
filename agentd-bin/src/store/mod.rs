//! The store's task: one OS thread (`agentd-store`) owns the SQLite connections of
//! `<store.path>/agentd.sqlite3` and answers typed requests, one at a time, in the order they
//! were sent; the daemon holds a [`Store`], a cheap handle whose every method sends its request
//! at once and resolves to the answer. No SQLite call runs on an async thread.
//!
//! At open, the thread makes the directory, brings the database's schema to the latest
//! version ([`migrations`]) and opens `mcp_events`' store on it; what fails there is the
//! answer of [`Store::open`]. The thread ends once every handle is dropped, or at
//! [`Store::close`], after finishing the requests sent before.
//!
//! Each concern has its file: MCP Events' requests ([`events`]), the memory ([`memory`]), the
//! artifacts ([`artifacts`]), the plans ([`plans`]), the inboxes ([`inbox`]) and the finished
//! units with the store's numbers ([`units`]). A request that reads, changes and writes runs
//! in one transaction, and requests are answered one at a time: a compare-and-set, a push, a
//! shift or a pop is atomic, and a version goes up by one per change.

use std::path::{Path, PathBuf};
use std::{fmt, thread};

use mcp_events::sqlite::Sqlite;
use mcp_events::store::StoreError;
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use crate::config::Config;

pub(crate) mod artifacts;
mod events;
pub(crate) mod inbox;
pub(crate) mod memory;
mod migrations;
pub(crate) mod plans;
pub(crate) mod units;

/// The database file, inside `store.path`.
pub(crate) const FILE: &str = "agentd.sqlite3";

/// The bounds the store enforces that come from the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The most bytes of a memory value (its compact JSON, also the array after a push) and
    /// of a message's text: `store.max_value_bytes`, 262144 unless configured.
    pub(crate) max_value_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_value_bytes: crate::config::MAX_VALUE_BYTES,
        }
    }
}

impl From<&Config> for Limits {
    fn from(config: &Config) -> Self {
        Self {
            max_value_bytes: config.max_value_bytes,
        }
    }
}

/// What went wrong at the store's boundary. [`Error::code`] is the contract's word for it.
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
    /// SQLite failed opening or migrating the database file, or a request.
    Sqlite(rusqlite::Error),
    /// The database's schema is of a version this build does not know (a later one's).
    Version {
        /// Its `user_version`.
        found: i64,
        /// The latest version this build knows.
        known: usize,
    },
    /// The store failed a request of MCP Events (or opening the migrated file).
    Store(StoreError),
    /// A value kept in the database is not the JSON it should be.
    Corrupt(serde_json::Error),
    /// A memory key is not 1..=256 bytes of UTF-8 without control characters.
    BadKey {
        /// The rule it breaks.
        rule: &'static str,
    },
    /// An argument breaks one of the contract's rules other than a key's or a size's.
    Invalid {
        /// Where, as a JSON pointer into the tool's arguments (`/limit`, `/steps/3/title`).
        pointer: String,
        /// The rule.
        rule: String,
    },
    /// Content past its bound in bytes; nothing was written.
    TooLarge {
        /// What (`value`, `content`, `text`, `summary`).
        what: &'static str,
        /// Its size.
        bytes: usize,
        /// The bound.
        limit: usize,
    },
    /// A compare-and-set expected another version; nothing was written.
    VersionMismatch {
        /// The key's version now (0: absent).
        current: u64,
    },
    /// A push, shift or pop on a key whose value is not an array.
    NotAnArray,
    /// What is to be created exists already (a unit's plan).
    Exists {
        /// What.
        what: &'static str,
    },
    /// What the request names does not exist (an artifact, a unit's plan).
    NotFound {
        /// What.
        what: &'static str,
    },
    /// The unit was finished already.
    AlreadyFinished {
        /// The unit.
        unit: String,
    },
}

impl Error {
    /// The contract's stable code word for this error (`store` for the store's own failures).
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::BadKey { .. } => "bad_key",
            Self::Invalid { .. } => "invalid_arguments",
            Self::TooLarge { .. } => "too_large",
            Self::VersionMismatch { .. } => "version_mismatch",
            Self::NotAnArray => "not_an_array",
            Self::Exists { .. } => "exists",
            Self::NotFound { .. } => "not_found",
            Self::AlreadyFinished { .. } => "already_finished",
            Self::Closed
            | Self::Dir { .. }
            | Self::Thread(_)
            | Self::Sqlite(_)
            | Self::Version { .. }
            | Self::Store(_)
            | Self::Corrupt(_) => "store",
        }
    }

    /// `Invalid` at `pointer`.
    fn invalid(pointer: impl Into<String>, rule: impl Into<String>) -> Self {
        Self::Invalid {
            pointer: pointer.into(),
            rule: rule.into(),
        }
    }
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
            Self::Corrupt(e) => write!(f, "store: a kept value is not JSON: {e}"),
            Self::BadKey { rule } => write!(f, "bad key: {rule}"),
            Self::Invalid { pointer, rule } => write!(f, "invalid arguments: {pointer}: {rule}"),
            Self::TooLarge { what, bytes, limit } => {
                write!(f, "too large: the {what} is {bytes} bytes, at most {limit}")
            }
            Self::VersionMismatch { current } => {
                write!(f, "version mismatch: the current version is {current}")
            }
            Self::NotAnArray => f.write_str("not an array: the key's value is not a JSON array"),
            Self::Exists { what } => write!(f, "exists: the {what} exists already"),
            Self::NotFound { what } => write!(f, "not found: no such {what}"),
            Self::AlreadyFinished { unit } => write!(f, "already finished: {unit}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Dir { source, .. } | Self::Thread(source) => Some(source),
            Self::Sqlite(e) => Some(e),
            Self::Store(e) => Some(e),
            Self::Corrupt(e) => Some(e),
            _ => None,
        }
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Self::Sqlite(e)
    }
}

/// What the store's thread holds: `mcp_events`' store and a connection of its own to the
/// same file, for the other tables.
struct Db {
    events: Sqlite,
    sql: Connection,
    limits: Limits,
}

/// A request, made on the store's thread; it sends its answer itself.
type Job = Box<dyn FnOnce(&mut Db) + Send>;

/// A request to the store's thread.
enum Request {
    Run(Job),
    Close { closed: oneshot::Sender<()> },
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
    /// and migrating the database to the latest schema; resolves once it is open. `limits`
    /// bound what its requests take.
    pub(crate) async fn open(dir: &Path, limits: Limits) -> Result<Self, Error> {
        Self::open_with(dir, migrations::MIGRATIONS, limits).await
    }

    async fn open_with(
        dir: &Path,
        migrations: &'static [&'static str],
        limits: Limits,
    ) -> Result<Self, Error> {
        let (requests, taken) = mpsc::unbounded_channel();
        let (opened, open) = oneshot::channel();
        let dir = dir.to_owned();
        thread::Builder::new()
            .name("agentd-store".into())
            .spawn(move || match start(&dir, migrations, limits) {
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

    /// Sends `job`, to run on the store's thread; resolves to its answer.
    fn run<T, F>(&self, job: F) -> impl Future<Output = Result<T, Error>> + Send + use<T, F>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db) -> Result<T, Error> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        // An answer nobody waits for any more is dropped.
        let job: Job = Box::new(move |db| drop(reply.send(job(db))));
        let sent = self.requests.send(Request::Run(job)).is_ok();
        async move {
            if !sent {
                return Err(Error::Closed);
            }
            answer.await.unwrap_or(Err(Error::Closed))
        }
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

/// On the store's thread: the directory made, the database migrated, the stores opened.
fn start(dir: &Path, migrations: &[&str], limits: Limits) -> Result<Db, Error> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Dir {
        path: dir.to_owned(),
        source,
    })?;
    let path = dir.join(FILE);
    let mut sql = Connection::open(&path)?;
    migrations::migrate(&mut sql, migrations)?;
    let events = Sqlite::open_existing(&path).map_err(Error::Store)?;
    // As `mcp_events`' connection: WAL (which that one has set), synchronous commits.
    sql.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;")?;
    Ok(Db {
        events,
        sql,
        limits,
    })
}

/// On the store's thread: answers each request in turn until every handle is gone or the
/// store is closed.
fn serve(mut db: Db, mut requests: mpsc::UnboundedReceiver<Request>) {
    while let Some(request) = requests.blocking_recv() {
        match request {
            Request::Run(job) => job(&mut db),
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

/// A count or a version as SQLite keeps it (an `INTEGER`, signed).
fn to_sql(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A count or a version kept as an SQLite `INTEGER` (never negative).
fn from_sql(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// `Invalid` unless `text` is `min..=max` bytes.
fn check_len(pointer: &str, text: &str, min: usize, max: usize) -> Result<(), Error> {
    if (min..=max).contains(&text.len()) {
        Ok(())
    } else {
        Err(Error::invalid(
            pointer,
            format!("{min}..={max} bytes, not {}", text.len()),
        ))
    }
}

/// `TooLarge` when `bytes` is past `limit`.
fn check_size(what: &'static str, bytes: usize, limit: usize) -> Result<(), Error> {
    if bytes > limit {
        return Err(Error::TooLarge { what, bytes, limit });
    }
    Ok(())
}

/// A store of default limits in a directory of its own, and that directory.
#[cfg(test)]
async fn scratch() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Limits::default()).await.unwrap();
    (dir, store)
}

#[cfg(test)]
mod tests;
