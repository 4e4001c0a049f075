//! Durable appends from many bindings at once: 16 bindings (threads) each commit batches of
//! one 1 KiB record (a webhook delivery) and wait for the outcome before their next, through
//! one thread that owns the store (SQLite, WAL, `synchronous = FULL`) — the design of a
//! daemon's store thread. Measured two ways in the same run, on the same file:
//!
//! - `one by one`: the store's thread commits each batch in a transaction of its own
//!   ([`Store::commit`]), one sync per batch;
//! - `group`: it takes a batch with those queued behind it (up to 64) and commits them in one
//!   transaction ([`Sqlite::commit_group`]), one sync per group.
//!
//! Run with `cargo bench -p mcp-events --features sqlite --bench group`; it prints the
//! occurrences per second of each, round by round, and the ratio.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use mcp_events::binding::{Batch, Record};
use mcp_events::sqlite::Sqlite;
use mcp_events::store::{Store, StoreError};

/// Bindings delivering at once.
const BINDINGS: usize = 16;
/// The most batches in one group.
const GROUP: usize = 64;
/// How long each measurement runs.
const RUN: Duration = Duration::from_secs(3);
/// Measurements of each way, alternated.
const ROUNDS: usize = 3;

/// A batch to commit and where its outcome goes.
struct Commit {
    binding: String,
    batch: Batch,
    reply: mpsc::SyncSender<Result<usize, StoreError>>,
}

/// The store's thread: commits what comes, in groups or one by one, until every binding is
/// done. How many transactions it committed.
fn serve(store: &mut Sqlite, requests: mpsc::Receiver<Commit>, group: bool) -> usize {
    let mut transactions = 0;
    while let Ok(first) = requests.recv() {
        let mut commits = vec![first];
        while group && commits.len() < GROUP {
            match requests.try_recv() {
                Ok(commit) => commits.push(commit),
                Err(_) => break,
            }
        }
        let outcomes = if group {
            let batches: Vec<_> = commits
                .iter()
                .map(|c| (c.binding.as_str(), c.binding.as_str(), &c.batch))
                .collect();
            transactions += 1;
            store.commit_group(&batches)
        } else {
            transactions += commits.len();
            commits
                .iter()
                .map(|c| store.commit(&c.binding, &c.binding, &c.batch))
                .collect()
        };
        for (commit, outcome) in commits.into_iter().zip(outcomes) {
            let _ = commit.reply.send(outcome);
        }
    }
    transactions
}

/// One measurement: occurrences per second, and batches per transaction.
fn measure(store: &mut Sqlite, group: bool, round: usize) -> (f64, f64) {
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
                        let id = format!("{group}-{round}-{n}");
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
        let server = scope.spawn(move || serve(store, taken, group));
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

fn main() {
    let dir = std::env::temp_dir().join(format!("mcp-events-group-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut store = Sqlite::open(&dir.join("store.sqlite3")).unwrap();
    println!("{BINDINGS} bindings, batches of 1 (1 KiB), each awaited; {RUN:?} per measurement");
    for round in 0..ROUNDS {
        let (one, _) = measure(&mut store, false, round);
        let (group, size) = measure(&mut store, true, round);
        println!(
            "round {round}: one by one {one:>7.0}/s   group {group:>7.0}/s \
             ({size:.1} batches a transaction)   ratio {:.2}",
            group / one
        );
    }
    drop(store);
    let _ = std::fs::remove_dir_all(dir);
}
