//! Durable appends from many bindings at once: 16 bindings (threads) each commit batches of
//! one 1 KiB record (a webhook delivery) and wait for the outcome before their next, through
//! one thread that owns the store (SQLite, WAL, `synchronous = FULL`) — the design of a
//! daemon's store thread. Measured four ways in the same run, on the same file:
//!
//! - `one by one`: the store's thread commits each batch in a transaction of its own
//!   ([`Store::commit`]), one sync per batch;
//! - `queued`: it takes a batch with those queued behind it (up to 64, no waiting), writes
//!   each as it is taken and commits them in one transaction ([`Sqlite::group`]), one sync
//!   per group, the WAL checkpointed at SQLite's default of 1,000 pages;
//! - `window`: it gathers them by [`GroupPolicy::default`] (a group smaller than the last
//!   waits up to 200 µs for as many), still at 1,000 pages;
//! - `group`: by that policy, the WAL checkpointed at 10,000 pages, as a daemon's store
//!   would.
//!
//! Each round measures one by one first, then the other three in an order that turns from
//! round to round, the WAL checkpointed before each measurement, after one of `group` not
//! shown (in which the WAL's file grows to its largest size). Run with
//! `cargo bench -p mcp-events --features sqlite --bench group`; it prints the occurrences per
//! second of each, round by round, and the ratios to one by one.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use mcp_events::binding::{Batch, Record};
use mcp_events::group::{Gathering, GroupPolicy};
use mcp_events::sqlite::Sqlite;
use mcp_events::store::{Store, StoreError};

/// Bindings delivering at once.
const BINDINGS: usize = 16;
/// How long each measurement runs.
const RUN: Duration = Duration::from_secs(2);
/// Measurements of each way, alternated.
const ROUNDS: usize = 3;

/// A batch to commit and where its outcome goes.
struct Commit {
    binding: String,
    batch: Batch,
    reply: mpsc::SyncSender<Result<usize, StoreError>>,
}

/// How the store's thread commits.
#[derive(Clone, Copy)]
enum Way {
    OneByOne,
    Queued,
    Window,
    Group,
}

impl Way {
    /// How it gathers batches (none for one by one) and the WAL pages it checkpoints at.
    fn setup(self) -> (Option<GroupPolicy>, u32) {
        match self {
            Self::OneByOne => (None, 1_000),
            Self::Queued => (Some(GroupPolicy::new(64, Duration::ZERO)), 1_000),
            Self::Window => (Some(GroupPolicy::default()), 1_000),
            Self::Group => (Some(GroupPolicy::default()), 10_000),
        }
    }
}

/// The store's thread: commits what comes, in groups or one by one, until every binding is
/// done. How many transactions it committed.
fn serve(store: &mut Sqlite, requests: mpsc::Receiver<Commit>, way: Way) -> usize {
    let (policy, pages) = way.setup();
    store.set_checkpoint_pages(pages).unwrap();
    let mut gathering = policy.map(Gathering::new);
    let mut transactions = 0;
    while let Ok(first) = requests.recv() {
        transactions += 1;
        let Some(gathering) = &mut gathering else {
            let outcome = store.commit(&first.binding, &first.binding, &first.batch);
            let _ = first.reply.send(outcome);
            continue;
        };
        // As a daemon's store thread: each batch written as it is taken.
        let take = |wait: Option<Duration>| match wait {
            None => requests.try_recv().ok(),
            Some(wait) => requests.recv_timeout(wait).ok(),
        };
        let mut group = store.group();
        let mut replies = Vec::new();
        let add = |commit: Commit| {
            group.append(&commit.binding, &commit.binding, &commit.batch);
            replies.push(commit.reply);
        };
        gathering.gather(first, take, Instant::now, add);
        for (reply, outcome) in replies.into_iter().zip(group.commit()) {
            let _ = reply.send(outcome);
        }
    }
    transactions
}

/// One measurement: occurrences per second, and batches per transaction.
fn measure(store: &mut Sqlite, way: Way, round: usize) -> (f64, f64) {
    let (requests, taken) = mpsc::channel::<Commit>();
    let stop = AtomicBool::new(false);
    let body = vec![b'x'; 1024];
    let started = Instant::now();
    let (appended, transactions): (usize, usize) = thread::scope(|scope| {
        let bindings: Vec<_> = (0..BINDINGS)
            .map(|b| {
                let (requests, stop, body) = (requests.clone(), &stop, &body);
                scope.spawn(move || {
                    let binding = format!("b{b}");
                    let (reply, outcome) = mpsc::sync_channel(1);
                    let mut appended = 0;
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let id = format!("{}-{round}-{n}", way as u8);
                        let batch = Batch {
                            records: vec![Record {
                                id: format!("mcp/s/t/{id}"),
                                event_id: id.clone(),
                                bytes: body.clone(),
                            }],
                            cursor: Some(id),
                        };
                        let commit = Commit {
                            binding: binding.clone(),
                            batch,
                            reply: reply.clone(),
                        };
                        requests.send(commit).unwrap();
                        appended += outcome.recv().unwrap().unwrap();
                    }
                    appended
                })
            })
            .collect();
        drop(requests);
        let server = scope.spawn(move || serve(store, taken, way));
        thread::sleep(RUN);
        stop.store(true, Ordering::Relaxed);
        let appended = bindings.into_iter().map(|b| b.join().unwrap()).sum();
        (appended, server.join().unwrap())
    });
    let appended = appended as f64;
    (
        appended / started.elapsed().as_secs_f64(),
        appended / transactions as f64,
    )
}

/// The grouped ways, in the order their columns are printed.
const GROUPED: [(&str, Way); 3] = [
    ("queued", Way::Queued),
    ("window", Way::Window),
    ("group", Way::Group),
];

/// Checkpoints the WAL of the store in `file` whole, from a connection of its own, so that
/// no measurement copies pages another wrote: the next commit writes the WAL from its start
/// again (its file keeps its size, so that no measurement pays for growing it).
fn settle(file: &Path) {
    let db = rusqlite::Connection::open(file).unwrap();
    db.execute_batch("PRAGMA wal_checkpoint(RESTART);").unwrap();
}

fn main() {
    let dir = std::env::temp_dir().join(format!("mcp-events-group-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("store.sqlite3");
    let mut store = Sqlite::open(&file).unwrap();
    println!("{BINDINGS} bindings, batches of 1 (1 KiB), each awaited; {RUN:?} per measurement");
    // Once first, not shown: the WAL grows to the largest size a way takes it to.
    measure(&mut store, Way::Group, ROUNDS);
    println!("occurrences/s (batches a transaction), and ratios to one by one");
    for round in 0..ROUNDS {
        settle(&file);
        let (one, _) = measure(&mut store, Way::OneByOne, round);
        // The grouped ways in an order that turns from round to round.
        let mut measured = [(0.0, 0.0); GROUPED.len()];
        for k in 0..GROUPED.len() {
            let i = (k + round) % GROUPED.len();
            settle(&file);
            measured[i] = measure(&mut store, GROUPED[i].1, round);
        }
        print!("round {round}: one by one {one:>5.0}");
        for ((name, _), (rate, size)) in GROUPED.iter().zip(measured) {
            print!("   {name} {rate:>5.0} ({size:>4.1}) {:.2}x", rate / one);
        }
        println!();
    }
    drop(store);
    let _ = std::fs::remove_dir_all(dir);
}
