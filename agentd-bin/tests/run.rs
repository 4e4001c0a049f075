//! `agentd run` as a process: a server down at start joins on the schedule, a tool list
//! change is logged, and SIGTERM drains (a legacy session is ended with DELETE) and exits 0.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use agentd_tests::reference::{Fault, Options, ReferenceServer, Times};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_server_joins_changes_are_logged_and_sigterm_drains() {
    let mut legacy = Options::default();
    legacy.modern = false;
    let steady = ReferenceServer::start(legacy).await;
    let late = ReferenceServer::start(Options::default()).await;
    // Down for the first two dials: the probe and the fallback both refused.
    late.script("server/discover", Fault::Status(503, None), Times::N(2));
    late.script("initialize", Fault::Status(503, None), Times::N(2));
    let path = std::env::temp_dir().join(format!("agentd-run-{}.toml", std::process::id()));
    std::fs::write(
        &path,
        format!(
            "instance = \"run\"\n[webhooks]\nlisten = \"127.0.0.1:0\"\n[lifecycle]\ndrain_timeout = \"5s\"\n[[mcp.servers]]\nname = \"steady\"\nurl = \"{}\"\n[[mcp.servers]]\nname = \"late\"\nurl = \"{}\"\n",
            steady.url(),
            late.url()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentd"))
        .args(["run", "--config", path.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .expect("agentd starts");
    let (tx, rx) = mpsc::channel::<(Instant, Value)>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
            if tx.send((Instant::now(), value)).is_err() {
                break;
            }
        }
    });
    let mut seen: Vec<(Instant, Value)> = Vec::new();
    let wait_for = |seen: &mut Vec<(Instant, Value)>, event: &str, server: &str| {
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            let matches =
                |v: &Value| v["event"] == event && (server.is_empty() || v["server"] == server);
            if seen.iter().any(|(_, v)| matches(v)) {
                return;
            }
            if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
                seen.push(line);
            }
        }
        panic!("no {event} for {server}: {seen:?}");
    };
    wait_for(&mut seen, "mcp.connect", "steady");
    wait_for(&mut seen, "mcp.joined", "late");

    // Two failed dials of the late server, 1 s apart, then the join 2 s after the second.
    let fails: Vec<Instant> = seen
        .iter()
        .filter(|(_, v)| v["event"] == "mcp.connect.fail" && v["server"] == "late")
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(fails.len(), 2, "{seen:?}");
    let joined = seen
        .iter()
        .find(|(_, v)| v["event"] == "mcp.joined")
        .unwrap()
        .0;
    let first_gap = fails[1] - fails[0];
    let second_gap = joined - fails[1];
    assert!(
        first_gap >= Duration::from_millis(900) && first_gap < Duration::from_millis(2500),
        "{first_gap:?}"
    );
    assert!(
        second_gap >= Duration::from_millis(1900) && second_gap < Duration::from_millis(3500),
        "{second_gap:?}"
    );
    let connect = seen
        .iter()
        .find(|(_, v)| v["event"] == "mcp.connect" && v["server"] == "late")
        .unwrap();
    assert_eq!(connect.1["reason"], "joined");
    assert_eq!(connect.1["protocol"], "2026-07-28");

    // The failed dials are counted on /metrics.
    wait_for(&mut seen, "http.listening", "");
    let addr = seen
        .iter()
        .find(|(_, v)| v["event"] == "http.listening")
        .and_then(|(_, v)| v["addr"].as_str())
        .unwrap()
        .to_owned();
    let metrics = get(&addr, "/metrics");
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    assert!(
        metrics.contains("# TYPE agent_mcp_connect_failures_total counter"),
        "{metrics}"
    );
    assert!(
        metrics.contains("agent_mcp_connect_failures_total{server=\"late\"} 2"),
        "{metrics}"
    );
    assert!(!metrics.contains("server=\"steady\""), "{metrics}");
    assert!(get(&addr, "/nope").starts_with("HTTP/1.1 404"));

    // A tool list change on the legacy server's GET stream is logged.
    tokio::time::sleep(Duration::from_millis(300)).await;
    steady.change_tools().await;
    wait_for(&mut seen, "mcp.tools_changed", "steady");

    let status = terminate(&mut child);
    assert!(status.success(), "{status:?}");
    assert!(
        steady.log().iter().any(|l| l.http == http::Method::DELETE),
        "the legacy session was ended"
    );
    let _ = std::fs::remove_file(&path);
}

/// SIGHUP reloads: a removed server is closed and a new one dialed, both with reason
/// `reload`; an invalid file is refused and the supervisor keeps running on the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_adds_and_removes_servers_and_an_invalid_one_is_refused() {
    let a = ReferenceServer::start(Options::default()).await;
    let b = ReferenceServer::start(Options::default()).await;
    let path = std::env::temp_dir().join(format!("agentd-reload-{}.toml", std::process::id()));
    let write = |servers: &[(&str, String)]| {
        let mut text = String::from("instance = \"reload\"\n[lifecycle]\ndrain_timeout = \"5s\"\n");
        for (name, url) in servers {
            text.push_str(&format!(
                "[[mcp.servers]]\nname = \"{name}\"\nurl = \"{url}\"\n"
            ));
        }
        std::fs::write(&path, text).unwrap();
    };
    write(&[("a", a.url())]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentd"))
        .args(["run", "--config", path.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .expect("agentd starts");
    let (tx, rx) = mpsc::channel::<Value>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx
                .send(serde_json::from_str(&line).unwrap_or(Value::String(line)))
                .is_err()
            {
                break;
            }
        }
    });
    let mut seen: Vec<Value> = Vec::new();
    let mut wait_for = |event: &str, server: Option<&str>| -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(v) = seen
                .iter()
                .find(|v| v["event"] == event && server.is_none_or(|s| v["server"] == s))
            {
                return v.clone();
            }
            if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
                seen.push(line);
            }
        }
        panic!("no {event} for {server:?}: {seen:?}");
    };
    let hup = |pid: u32| {
        assert!(
            Command::new("kill")
                .args(["-HUP", &pid.to_string()])
                .status()
                .unwrap()
                .success()
        );
    };
    wait_for("mcp.connect", Some("a"));

    write(&[("b", b.url())]);
    hup(child.id());
    let gone = wait_for("mcp.disconnect", Some("a"));
    assert_eq!(gone["reason"], "reload");
    let added = wait_for("mcp.connect", Some("b"));
    assert_eq!(added["reason"], "reload");

    std::fs::write(&path, "instance = \"reload\"\nnot toml at all [\n").unwrap();
    hup(child.id());
    let refused = wait_for("reload.refused", None);
    assert!(
        refused["err"].as_str().unwrap().contains(":2:"),
        "{refused}"
    );
    assert!(child.try_wait().unwrap().is_none(), "still running");

    let status = terminate(&mut child);
    assert!(status.success(), "{status:?}");
    assert!(
        !seen
            .iter()
            .any(|v| v["event"] == "mcp.disconnect" && v["server"] == "b"),
        "b was kept through the refused reload"
    );
    let _ = std::fs::remove_file(&path);
}

/// A plain HTTP/1.1 GET, the whole answer as text.
fn get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut tcp = std::net::TcpStream::connect(addr).expect("the listener");
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).unwrap();
    answer
}

/// Sends SIGTERM to `child` and waits up to ten seconds for it to exit.
fn terminate(child: &mut std::process::Child) -> std::process::ExitStatus {
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "agentd did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
