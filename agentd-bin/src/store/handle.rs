//! The store's thread and its handle: requests sent in order, answered one at a time, but
//! for MCP Events' commits, which are answered in groups.

use std::path::Path;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use mcp_events::binding::Batch;
use mcp_events::group::{Gathering, GroupPolicy};
use mcp_events::sqlite::Sqlite;
use rusqlite::Connection;
use tokio::sync::{broadcast, oneshot};

use super::db::{Db, Delivered, Limits};
use super::error::Error;
use super::migrations;

/// The database file, inside `store.path`.
pub(crate) const FILE: &str = "agentd.sqlite3";

/// A request, made on the store's thread; it sends its answer itself.
type Job = Box<dyn FnOnce(&mut Db) + Send>;

/// The WAL pages after which a commit, on either connection, checkpoints the WAL into the
/// database: 10,000 (about 40 MiB, which the `-wal` file keeps on disk once reached) rather
/// than SQLite's 1,000, for the pages that MCP Events' commits write again and again are
/// copied once per checkpoint ([`Sqlite::set_checkpoint_pages`]).
const CHECKPOINT_PAGES: u32 = 10_000;

/// A request to the store's thread.
enum Request {
    Run(Job),
    Commit(Commit),
    Close { closed: oneshot::Sender<()> },
}

/// A batch of MCP Events to commit, and where its outcome goes.
struct Commit {
    binding: String,
    stream: String,
    batch: Arc<Batch>,
    reply: oneshot::Sender<Result<usize, Error>>,
}

/// The handle of the store's thread. Each method sends its request when called (so requests
/// are answered in the order of the calls, whenever they are awaited) and resolves to the
/// answer; dropping the future drops only the answer.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    requests: mpsc::Sender<Request>,
    /// Tells each message appended to an inbox.
    delivered: broadcast::Sender<Delivered>,
}

/// How many deliveries wait for the slowest listener; one that falls further behind is told
/// it lagged ([`broadcast::error::RecvError::Lagged`]).
const DELIVERIES: usize = 1024;

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
        let (requests, taken) = mpsc::channel();
        let (opened, open) = oneshot::channel();
        let delivered = broadcast::Sender::new(DELIVERIES);
        let dir = dir.to_owned();
        let telling = delivered.clone();
        thread::Builder::new()
            .name("agentd-store".into())
            .spawn(move || match start(&dir, migrations, limits, telling) {
                Ok(db) => {
                    let _ = opened.send(Ok(()));
                    serve(db, taken);
                }
                Err(e) => drop(opened.send(Err(e))),
            })
            .map_err(Error::Thread)?;
        open.await.unwrap_or(Err(Error::Closed))?;
        Ok(Self {
            requests,
            delivered,
        })
    }

    /// The messages appended to an inbox from now on, each told once it is written.
    pub(crate) fn delivered(&self) -> broadcast::Receiver<Delivered> {
        self.delivered.subscribe()
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
        self.ask(Request::Run(job), answer)
    }

    /// Sends `batch`, to be committed for `binding` to `stream` with the commits queued
    /// next to it or coming within the group's wait; resolves to how many records it
    /// appended, once their transaction is committed.
    pub(super) fn commit_batch(
        &self,
        binding: String,
        stream: String,
        batch: Arc<Batch>,
    ) -> impl Future<Output = Result<usize, Error>> + Send + use<> {
        let (reply, answer) = oneshot::channel();
        let commit = Commit {
            binding,
            stream,
            batch,
            reply,
        };
        self.ask(Request::Commit(commit), answer)
    }

    /// Sends `request`; resolves to what comes on `answer`.
    fn ask<T>(
        &self,
        request: Request,
        answer: oneshot::Receiver<Result<T, Error>>,
    ) -> impl Future<Output = Result<T, Error>> + Send + use<T>
    where
        T: Send + 'static,
    {
        let sent = self.requests.send(request).is_ok();
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
fn start(
    dir: &Path,
    migrations: &[&str],
    limits: Limits,
    delivered: broadcast::Sender<Delivered>,
) -> Result<Db, Error> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Dir {
        path: dir.to_owned(),
        source,
    })?;
    let path = dir.join(FILE);
    let at = |source| Error::Open {
        path: path.clone(),
        source,
    };
    let mut sql = Connection::open(&path).map_err(at)?;
    migrations::migrate(&mut sql, migrations).map_err(|e| match e {
        Error::Sqlite(source) => at(source),
        e => e,
    })?;
    let mut events = Sqlite::open_existing(&path).map_err(Error::Store)?;
    events
        .set_checkpoint_pages(CHECKPOINT_PAGES)
        .map_err(Error::Store)?;
    // As `mcp_events`' connection: WAL (which that one has set), synchronous commits.
    sql.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
         PRAGMA wal_autocheckpoint = {CHECKPOINT_PAGES};"
    ))
    .map_err(at)?;
    Ok(Db {
        events,
        sql,
        limits,
        delivered,
    })
}

/// On the store's thread: answers each request in turn until every handle is gone or the
/// store is closed.
///
/// A commit is taken with the commits queued behind it, gathered by
/// [`GroupPolicy::default`] (up to 64; a group smaller than the last one waits up to 200 µs
/// for as many), and no further than the first request of another kind, which keeps its
/// place after them. Each batch is written as it is taken, all in one transaction
/// ([`Sqlite::group`]), and each is answered once that transaction's `COMMIT` has returned.
fn serve(mut db: Db, requests: mpsc::Receiver<Request>) {
    let mut gathering = Gathering::new(GroupPolicy::default());
    let mut next = None;
    while let Some(request) = next.take().or_else(|| requests.recv().ok()) {
        match request {
            Request::Run(job) => job(&mut db),
            Request::Commit(first) => {
                let take = |wait: Option<Duration>| {
                    let request = match wait {
                        None => requests.try_recv().ok(),
                        Some(wait) => requests.recv_timeout(wait).ok(),
                    };
                    match request? {
                        Request::Commit(commit) => Some(commit),
                        other => {
                            next = Some(other);
                            None
                        }
                    }
                };
                let mut group = db.events.group();
                let mut replies = Vec::new();
                let add = |commit: Commit| {
                    group.append(&commit.binding, &commit.stream, &commit.batch);
                    replies.push(commit.reply);
                };
                gathering.gather(first, take, Instant::now, add);
                for (reply, outcome) in replies.into_iter().zip(group.commit()) {
                    // An answer nobody waits for any more is dropped.
                    let _ = reply.send(outcome.map_err(Error::Store));
                }
            }
            Request::Close { closed } => {
                // Nothing more is taken: what was sent meanwhile is dropped unanswered with
                // the queue (its callers hear `Closed`), and what is sent after fails.
                drop(requests);
                drop(db);
                let _ = closed.send(());
                return;
            }
        }
    }
}
