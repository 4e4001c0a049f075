//! A failing store, as a process: the file corrupted (reported at start, never written), the
//! database locked by another process or held by another daemon (reported at start), and writes failing while the
//! daemon runs (its file size limit lowered to nothing, then raised): a poll binding pauses
//! with cause `store_degraded`, a webhook delivery is answered 503, and once writes succeed
//! again every occurrence the server produced is in each stream exactly once.

mod common;

use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use common::{Daemon, TempFile, store_dir, tail, until, wait_for_stream};
use mcp_reference_server::{Options, ReferenceServer};
use serde_json::json;

/// The store's file inside `store.path`.
const FILE: &str = "agentd.sqlite3";

fn server_options() -> Options {
    let mut options = Options::default();
    options.events = true;
    options.legacy = false;
    options.poll_ms = 1000;
    options
}

/// A poll binding of `build.finished` into `builds`, and a webhook binding of
/// `ticket.created` into `hooks`.
fn config(url: &str, store: &Path) -> String {
    format!(
        "instance = \"faults\"\n[webhooks]\nlisten = \"127.0.0.1:0\"\n[store]\npath = \"{}\"\n\
         [lifecycle]\ndrain_timeout = \"5s\"\n[[mcp.servers]]\nname = \"ref\"\nurl = \"{url}\"\n\
         [[events.bindings]]\nserver = \"ref\"\nevent = \"build.finished\"\ninto = \"builds\"\n\
         [[events.bindings]]\nserver = \"ref\"\nevent = \"ticket.created\"\ninto = \"hooks\"\n\
         arguments = {{ project = \"ops\" }}\ndelivery = [\"webhook\"]\n\
         [[workflows]]\nname = \"tick\"\n[[workflows.steps]]\nid = \"n\"\ntype = \"wait\"\n\
         on = {{ duration = \"1s\" }}\n",
        store.display()
    )
}

/// A configuration with no server, its store in `store`.
fn bare(store: &Path) -> TempFile {
    TempFile::new(&format!(
        "instance = \"faults\"\n[store]\npath = \"{}\"\n",
        store.display()
    ))
}

/// Makes the store (runs `agentd run` until it answers, then stops it).
fn made(file: &TempFile) {
    let mut agentd = Daemon::run(file);
    common::until_up(file);
    assert!(agentd.terminate().success());
}

/// Sets the daemon's soft file size limit (`RLIMIT_FSIZE`) to `limit`, its hard limit
/// (unlimited) kept, so that no privilege is needed to raise it again.
fn fsize(pid: u32, limit: &str) {
    let set = Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--fsize={limit}:")])
        .status()
        .expect("prlimit (util-linux) runs");
    assert!(set.success(), "prlimit --fsize={limit}");
}

/// How `agentd run` ended by itself, within 15 s, and what it said, each line as text.
fn ended(agentd: &mut Daemon) -> (ExitStatus, Vec<String>) {
    let status = common::poll(Duration::from_secs(15), || {
        agentd.exited().ok_or("the daemon still runs")
    });
    agentd.drain(Duration::from_millis(500));
    let said = agentd.seen.iter().map(|(_, v)| v.to_string()).collect();
    (status, said)
}

#[test]
fn a_corrupted_file_is_reported_at_start_and_left_as_it_is() {
    let dir = store_dir("corrupt");
    let file = bare(dir.path());
    made(&file);
    let path = dir.path().join(FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[..100].copy_from_slice(&[0x5a; 100]);
    std::fs::write(&path, &bytes).unwrap();

    let (status, said) = ended(&mut Daemon::run(&file));
    assert_eq!(status.code(), Some(1), "{said:#?}");
    assert!(
        said.iter()
            .any(|l| l.contains(&format!("{}: file is not a database", path.display()))),
        "the cause is named: {said:#?}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "the file is untouched"
    );
    let wal = dir.path().join(format!("{FILE}-wal"));
    assert!(
        std::fs::metadata(&wal).map_or(true, |m| m.len() == 0),
        "nothing was written beside it"
    );
}

#[test]
fn a_database_locked_by_another_process_is_reported_at_start() {
    let dir = store_dir("locked");
    let file = bare(dir.path());
    made(&file);
    let lock = rusqlite::Connection::open(dir.path().join(FILE)).unwrap();
    lock.execute_batch("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE;")
        .unwrap();

    let (status, said) = ended(&mut Daemon::run(&file));
    assert_eq!(status.code(), Some(1), "{said:#?}");
    assert!(
        said.iter().any(|l| l.contains(&format!(
            "{}: database is locked",
            dir.path().join(FILE).display()
        ))),
        "the cause is named: {said:#?}"
    );
    drop(lock);
    let mut agentd = Daemon::run(&file);
    common::until_up(&file);
    assert!(
        agentd.terminate().success(),
        "it starts once the lock is gone"
    );
}

/// A second `agentd run` on a store another one runs on refuses to start, and the first
/// keeps its control socket.
#[test]
fn a_second_daemon_on_the_same_store_is_refused_at_start() {
    let dir = store_dir("second");
    let file = bare(dir.path());
    let mut first = Daemon::run(&file);
    common::until_up(&file);
    let (status, said) = ended(&mut Daemon::run(&file));
    assert_eq!(status.code(), Some(1), "{said:#?}");
    let held = format!(
        "the store in {} is held by another agentd",
        dir.path().display()
    );
    assert!(said.iter().any(|l| l.contains(&held)), "{said:#?}");
    common::until_up(&file);
    assert!(first.terminate().success());
    // Let go at exit: the next one starts.
    let mut next = Daemon::run(&file);
    common::until_up(&file);
    assert!(next.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_failing_pause_intake_and_lose_nothing_when_they_succeed_again() {
    let server = ReferenceServer::start(server_options()).await;
    let dir = store_dir("full");
    let file = TempFile::new(&config(&server.url(), dir.path()));
    // Past the limit a write fails with EFBIG, as on a full disk with ENOSPC; SIGXFSZ,
    // which a full disk does not send, is ignored.
    let mut agentd = Daemon::run_after(&file, "trap '' XFSZ; exec \"$@\"");
    agentd.wait_for_nth("mcp.events.armed", Some("ref"), 2);
    server.emit("build.finished", json!({"n": 1}));
    server.emit("ticket.created", json!({"id": 2}));
    wait_for_stream(&file, "builds", 1);
    wait_for_stream(&file, "hooks", 1);

    fsize(agentd.pid(), "0");
    // The poll binding first: its pause comes at its next poll.
    server.emit("build.finished", json!({"n": 3}));
    server.emit("build.finished", json!({"n": 4}));
    let paused = agentd.wait_for("mcp.events.paused", Some("ref"));
    assert_eq!(
        (&paused["event_type"], &paused["cause"]),
        (&json!("build.finished"), &json!("store_degraded"))
    );
    // Then the webhook binding's deliveries, while the server still sends them again.
    server.emit("ticket.created", json!({"id": 5}));
    server.emit("ticket.created", json!({"id": 6}));
    until("each webhook delivery was answered 503", || {
        let delivered = server.delivered();
        ["evt-5", "evt-6"]
            .iter()
            .all(|id| delivered.iter().any(|(d, s)| d == id && *s == 503))
    })
    .await;
    let paused = agentd.wait_for_nth("mcp.events.paused", Some("ref"), 2);
    assert_eq!(
        (&paused["event_type"], &paused["cause"]),
        (&json!("ticket.created"), &json!("store_degraded"))
    );
    assert!(agentd.is_running(), "the daemon keeps running");
    // A workflow run the store does not take is refused, not started.
    let refused = common::agentd_async(&file, &["workflow", "run", "tick"]).await;
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("not kept"), "{said}");

    fsize(agentd.pid(), "unlimited");
    agentd.wait_for_nth("mcp.events.resumed", Some("ref"), 2);
    let started = common::agentd_async(&file, &["workflow", "run", "tick"]).await;
    assert!(started.status.success(), "{started:?}");
    server.emit("build.finished", json!({"n": 7}));
    server.emit("ticket.created", json!({"id": 8}));
    for (stream, event, ns) in [
        ("builds", "build.finished", [1, 3, 4, 7]),
        ("hooks", "ticket.created", [2, 5, 6, 8]),
    ] {
        let records = wait_for_stream(&file, stream, 4);
        let mut ids: Vec<&str> = records.iter().map(|r| r["id"].as_str().unwrap()).collect();
        ids.sort_unstable();
        let all: Vec<String> = ns
            .iter()
            .map(|n| format!("mcp/ref/{event}/evt-{n}"))
            .collect();
        assert_eq!(ids, all, "{stream}: each once");
    }
    assert!(agentd.terminate().success());
    // Each binding paused once however often the store failed it, and resumed once.
    for event in ["mcp.events.paused", "mcp.events.resumed"] {
        let mut lines: Vec<_> = agentd
            .matching(event, Some("ref"))
            .map(|(_, v)| (v["event_type"].clone(), v["cause"].clone()))
            .collect();
        lines.sort_by_key(|(t, _)| t.to_string());
        let degraded = json!("store_degraded");
        assert_eq!(
            lines,
            [
                (json!("build.finished"), degraded.clone()),
                (json!("ticket.created"), degraded)
            ],
            "{event}"
        );
    }
    for stream in ["builds", "hooks"] {
        assert_eq!(tail(&file, stream).len(), 4, "{stream}: nothing more");
    }
    drop(dir);
}
