//! The store's schema versions, its opening and closing, and what survives a reopen.

use std::sync::Arc;

use mcp_events::binding::{Batch, Record};
use mcp_events::sqlite::SCHEMA;
use rusqlite::Connection;
use serde_json::json;

use super::migrations::{MIGRATIONS, migrate};
use super::units::Outcome;
use super::*;
use agentd_tools::plan::{Status as StepStatus, Step};

/// The tables as a file made before versioning has them (user_version 0).
const UNVERSIONED: &str = "CREATE TABLE bindings (
        key TEXT PRIMARY KEY, cursor TEXT, secret TEXT, subscription TEXT);
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, stream TEXT NOT NULL, id TEXT NOT NULL,
        binding TEXT NOT NULL, body BLOB NOT NULL, UNIQUE (stream, id));
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);";

/// The tables of the latest version.
const LATEST: [&str; 17] = [
    "artifacts",
    "bindings",
    "conversation_messages",
    "conversations",
    "events",
    "finished_units",
    "inboxes",
    "memory",
    "meta",
    "plans",
    "questions",
    "subagents",
    "workflow_held",
    "workflow_runs",
    "workflow_starts",
    "workflow_steps",
    "workflows",
];

fn latest() -> i64 {
    i64::try_from(MIGRATIONS.len()).unwrap()
}

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

/// Rows of MCP Events in a file of version 1 (or 0), and what the store reads of them.
const EVENT_ROWS: &str = "INSERT INTO bindings VALUES ('b1', 'c7', 'whsec_x', 'sub_1');
     INSERT INTO events (stream, id, binding, body) VALUES ('in', 'e1', 'b1', X'7B7D');
     INSERT INTO meta VALUES ('subscriptions', '[]');";

async fn assert_event_rows(store: &Store) {
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
}

#[test]
fn an_empty_file_is_brought_to_the_latest_version() {
    let (_dir, mut db) = file();
    assert_eq!(migrate(&mut db, MIGRATIONS).unwrap(), MIGRATIONS.len());
    assert_eq!(version(&db), latest());
    assert_eq!(tables(&db), LATEST);
}

/// A file made before versioning (its tables, user_version 0) is migrated with its rows.
#[tokio::test]
async fn a_file_made_before_versioning_keeps_its_rows() {
    let (dir, db) = file();
    db.execute_batch(UNVERSIONED).unwrap();
    db.execute_batch(EVENT_ROWS).unwrap();
    assert_eq!(version(&db), 0);
    drop(db);

    let store = Store::open(dir.path(), Limits::default()).await.unwrap();
    assert_event_rows(&store).await;
    store.close().await;
    let db = Connection::open(dir.path().join(FILE)).unwrap();
    assert_eq!(version(&db), latest());
    assert_eq!(tables(&db), LATEST);
}

/// A file of version 1 is migrated with its rows, and the new tables serve at once.
#[tokio::test]
async fn a_version_1_file_keeps_its_rows() {
    let (dir, mut db) = file();
    assert_eq!(migrate(&mut db, &MIGRATIONS[..1]).unwrap(), 1);
    db.execute_batch(EVENT_ROWS).unwrap();
    drop(db);

    let store = Store::open(dir.path(), Limits::default()).await.unwrap();
    assert_event_rows(&store).await;
    assert_eq!(store.memory_set("k", json!(1), Some(0)).await.unwrap(), 1);
    store.close().await;
    let db = Connection::open(dir.path().join(FILE)).unwrap();
    assert_eq!(version(&db), latest());
}

/// A file of version 2 is migrated with its rows, and the questions serve at once.
#[tokio::test]
async fn a_version_2_file_keeps_its_rows() {
    let (dir, mut db) = file();
    assert_eq!(migrate(&mut db, &MIGRATIONS[..2]).unwrap(), 2);
    db.execute_batch("INSERT INTO memory VALUES ('m', '[1]', 3);")
        .unwrap();
    drop(db);

    let store = Store::open(dir.path(), Limits::default()).await.unwrap();
    let kept = store.memory_get("m").await.unwrap();
    assert_eq!((kept.value, kept.version), (json!([1]), 3));
    let origin = agentd_tools::human::Origin::ask_human("operator");
    store
        .question_open(1, &origin, "?", &json!({}), 1)
        .await
        .unwrap();
    assert_eq!(store.questions_open().await.unwrap().len(), 1);
    store.close().await;
    let db = Connection::open(dir.path().join(FILE)).unwrap();
    assert_eq!(version(&db), latest());
    assert_eq!(tables(&db), LATEST);
}

/// A file of version 5 is migrated with its inboxes: each message keeps its id (its place in
/// its conversation's inbox), reads go from an id on, and the next message follows the last.
#[tokio::test]
async fn a_version_5_file_keeps_its_inbox_ids() {
    let (dir, mut db) = file();
    assert_eq!(migrate(&mut db, &MIGRATIONS[..5]).unwrap(), 5);
    db.execute_batch(
        "INSERT INTO inboxes (conversation, sender, text, at) VALUES
             ('a', 'operator', 'a1', 1), ('b', 'operator', 'b1', 2),
             ('a', 'operator', 'a2', 3), ('a', 'operator', 'a3', 4);
         INSERT INTO conversations (id, turns, taken, tokens) VALUES ('a', 1, 1, 0);",
    )
    .unwrap();
    drop(db);

    let store = Store::open(dir.path(), Limits::default()).await.unwrap();
    let read = |conversation: &'static str, after| {
        let read = store.messages(conversation, after, 10);
        async move {
            let read = read.await.unwrap().into_iter();
            read.map(|m| (m.id, m.text)).collect::<Vec<_>>()
        }
    };
    let texts = |ids: &[(u64, &str)]| -> Vec<(u64, String)> {
        ids.iter().map(|(id, t)| (*id, (*t).to_owned())).collect()
    };
    assert_eq!(read("a", 1).await, texts(&[(2, "a2"), (3, "a3")]));
    assert_eq!(read("b", 0).await, texts(&[(1, "b1")]));
    assert_eq!(store.conversations_waiting().await.unwrap(), ["a", "b"]);
    assert_eq!(
        store.message_send("a", "operator", "a4", 5).await.unwrap(),
        4
    );
    assert_eq!(
        store.message_send("c", "operator", "c1", 6).await.unwrap(),
        1
    );
    assert_eq!(read("a", 3).await, texts(&[(4, "a4")]));
    store.close().await;
    let db = Connection::open(dir.path().join(FILE)).unwrap();
    assert_eq!(version(&db), latest());
    let unique = db.execute(
        "INSERT INTO inboxes (conversation, id, sender, text, at) VALUES ('a', 4, 'u', 'x', 7)",
        [],
    );
    assert!(unique.is_err(), "one message per id");
}

#[test]
fn the_latest_version_is_left_as_it_is() {
    let (_dir, mut db) = file();
    migrate(&mut db, MIGRATIONS).unwrap();
    db.execute_batch(
        "INSERT INTO meta VALUES ('k', 'v');
         INSERT INTO memory VALUES ('m', '[1]', 3);",
    )
    .unwrap();
    assert_eq!(migrate(&mut db, MIGRATIONS).unwrap(), MIGRATIONS.len());
    let kept: String = db
        .query_row("SELECT value FROM meta WHERE key = 'k'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(kept, "v");
    let kept: (String, i64) = db
        .query_row("SELECT value, version FROM memory", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(kept, ("[1]".to_owned(), 3));
}

/// A file of a later build is refused, untouched, and the store does not open on it.
#[tokio::test]
async fn a_later_version_is_refused() {
    let (dir, db) = file();
    let later = latest() + 1;
    db.pragma_update(None, "user_version", later).unwrap();
    drop(db);
    let refused = Store::open(dir.path(), Limits::default())
        .await
        .unwrap_err();
    assert!(
        matches!(refused, Error::Version { found, known } if found == later && known == MIGRATIONS.len()),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("later agentd"), "{refused}");
    assert_eq!(refused.code(), "store");
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
    // Through the store, too: opening fails with it, naming the file.
    let failed = Store::open_with(dir.path(), BROKEN, Limits::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&failed, Error::Open { path, .. } if *path == dir.path().join(FILE)),
        "{failed:?}"
    );
}

/// Requests sent before the close are answered; after it, the store is closed.
#[tokio::test]
async fn a_closed_store_answers_closed() {
    let (dir, store) = scratch().await;
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
    let set = store.memory_set("k", json!("v"), None);
    let other = store.clone();
    other.close().await;
    assert_eq!(committed.await.unwrap(), 1);
    assert_eq!(set.await.unwrap(), 1);
    assert!(matches!(store.load("b1").await, Err(Error::Closed)));
    assert!(matches!(store.memory_get("k").await, Err(Error::Closed)));
    store.close().await;

    // What was committed is there for the next open.
    let store = Store::open(dir.path(), Limits::default()).await.unwrap();
    assert_eq!(
        store.load("b1").await.unwrap().cursor.as_deref(),
        Some("c1")
    );
}

/// Every kind of durable state is there after the store is closed and the file opened again
/// by another `Store::open`.
#[tokio::test]
async fn durable_state_survives_a_reopen() {
    let (dir, store) = scratch().await;
    store.memory_set("k", json!({"a": 1}), None).await.unwrap();
    store.memory_push("q", json!(1)).await.unwrap();
    store
        .artifact_create("run:r", "out.txt", "text/plain", b"hi".to_vec())
        .await
        .unwrap();
    let steps = vec![Step::new("one", StepStatus::Pending)];
    store.plan_create("run:r", steps.clone()).await.unwrap();
    let id = store
        .message_send("c1", "operator", "hello", 1)
        .await
        .unwrap();
    store.finish("run:r", Outcome::Done, "ok", 1).await.unwrap();
    let turn = store.turn_start("c1", id, &[json!({"role": "user"})], 2);
    assert_eq!(turn.await.unwrap(), 1);
    let answer = json!({"role": "assistant", "text": "hi"});
    store
        .conversation_append("c1", 1, &answer, 3)
        .await
        .unwrap();
    store.conversation_tokens("c1", 12).await.unwrap();
    store.close().await;

    let store = Store::open(dir.path(), Limits::default()).await.unwrap();
    let got = store.memory_get("k").await.unwrap();
    assert_eq!((got.value, got.version), (json!({"a": 1}), 1));
    assert_eq!(store.memory_shift("q").await.unwrap().value, Some(json!(1)));
    let artifact = store.artifact_get("run:r", "out.txt").await.unwrap();
    assert_eq!(artifact.content, b"hi");
    let plan = store.plan_get("run:r").await.unwrap().unwrap();
    assert_eq!((plan.steps, plan.version), (steps, 1));
    let messages = store.messages("c1", 0, 10).await.unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!((messages[0].id, messages[0].text.as_str()), (id, "hello"));
    let finished = store.finished("run:r").await.unwrap().unwrap();
    assert_eq!(finished.status, Outcome::Done);
    assert!(matches!(
        store.finish("run:r", Outcome::Failed, "", 1).await,
        Err(Error::AlreadyFinished { .. })
    ));
    let c1 = store.conversation("c1").await.unwrap().unwrap();
    assert_eq!((c1.turns, c1.taken, c1.tokens), (1, id, 12));
    let history = store.conversation_history::<serde_json::Value>("c1", 0, 10);
    let history: Vec<_> = history
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.message)
        .collect();
    assert_eq!(history, [json!({"role": "user"}), answer]);
    assert!(store.conversations_waiting().await.unwrap().is_empty());
    store.close().await;
}

/// A batch of one record, `<binding>/<n>`, with the cursor `c<n>`.
fn one(binding: &str, n: usize) -> Arc<Batch> {
    Arc::new(Batch {
        records: vec![Record {
            id: format!("mcp/s/t/{binding}/{n}"),
            event_id: format!("{n}"),
            bytes: format!("{binding}/{n}").into_bytes(),
        }],
        cursor: Some(format!("c{n}")),
    })
}

/// The bodies of `stream`'s records, oldest first.
async fn bodies(store: &Store, stream: &str) -> Vec<String> {
    let entries = store.read(stream, 0, 1000).await.unwrap();
    entries
        .into_iter()
        .map(|e| String::from_utf8(e.bytes).unwrap())
        .collect()
}

/// Many bindings committing at once, each awaiting its answer before its next batch: every
/// commit answered, each stream holding exactly its binding's records, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_commits_are_each_answered_and_kept_once() {
    let (_dir, store) = scratch().await;
    let tasks: Vec<_> = (0..16)
        .map(|b| {
            let store = store.clone();
            tokio::spawn(async move {
                let binding = format!("b{b}");
                for n in 0..20 {
                    let batch = one(&binding, n);
                    assert_eq!(store.commit(&binding, &binding, batch).await.unwrap(), 1);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    for b in 0..16 {
        let binding = format!("b{b}");
        let expected: Vec<String> = (0..20).map(|n| format!("{binding}/{n}")).collect();
        assert_eq!(bodies(&store, &binding).await, expected);
        let stored = store.load(&binding).await.unwrap();
        assert_eq!(stored.cursor.as_deref(), Some("c19"));
    }
}

/// Runs a job that holds the store's thread until the returned sender is used (or dropped),
/// so that what is sent meanwhile is queued together.
fn hold(store: &Store) -> (std::sync::mpsc::Sender<()>, impl Future<Output = ()>) {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let job = store.run(move |_| {
        let _ = held.recv();
        Ok(())
    });
    (release, async move { job.await.unwrap() })
}

/// A group smaller than the last one may wait for more commits, but it ends at a request of
/// another kind, which keeps its place after it: the read queued behind a lone commit (after
/// a group of three) sees it.
#[tokio::test]
async fn a_request_behind_a_smaller_group_keeps_its_place() {
    let (_dir, store) = scratch().await;
    let (release, held) = hold(&store);
    let three: Vec<_> = (0..3)
        .map(|n| store.commit("b", "in", one("b", n)))
        .collect();
    release.send(()).unwrap();
    held.await;
    for committed in three {
        assert_eq!(committed.await.unwrap(), 1);
    }
    let (release, held) = hold(&store);
    let lone = store.commit("b", "in", one("b", 3));
    let read = store.read("in", 0, 100);
    release.send(()).unwrap();
    held.await;
    assert_eq!(lone.await.unwrap(), 1);
    assert_eq!(read.await.unwrap().len(), 4);
}

/// Commits queued together are committed together, but never past a request of another
/// kind queued between them: a read sent between two commits sees the first, not the second.
#[tokio::test]
async fn a_request_between_commits_keeps_its_place() {
    let (_dir, store) = scratch().await;
    // The thread held until everything below is queued.
    let (release, held) = hold(&store);
    let before: Vec<_> = (0..3)
        .map(|n| store.commit("b", "in", one("b", n)))
        .collect();
    let read = store.read("in", 0, 100);
    let after = store.commit("b", "in", one("b", 3));
    release.send(()).unwrap();
    held.await;
    for committed in before {
        assert_eq!(committed.await.unwrap(), 1);
    }
    let read: Vec<_> = read.await.unwrap().into_iter().map(|e| e.bytes).collect();
    assert_eq!(read, [b"b/0".to_vec(), b"b/1".to_vec(), b"b/2".to_vec()]);
    assert_eq!(after.await.unwrap(), 1);
    assert_eq!(bodies(&store, "in").await.len(), 4);
}
