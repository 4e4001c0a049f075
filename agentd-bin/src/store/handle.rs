//! The store's thread and its handle: requests sent in order, answered one at a time.

use std::path::Path;
use std::thread;

use mcp_events::sqlite::Sqlite;
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use super::db::{Db, Limits};
use super::error::Error;
use super::migrations;

/// The database file, inside `store.path`.
pub(crate) const FILE: &str = "agentd.sqlite3";

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

    pub(super) async fn open_with(
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
    pub(super) fn run<T, F>(
        &self,
        job: F,
    ) -> impl Future<Output = Result<T, Error>> + Send + use<T, F>
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
