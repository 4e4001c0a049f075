//! MCP Events in `agentd run`, as a process against the reference server: a poll binding
//! lists, arms and appends what the server emits (`agentd events tail` shows it), its metrics
//! on `/metrics`; and a crash: agentd killed with SIGKILL while the server emits and is
//! polled (by one binding, and by eight at once), started again, and each stream holds every
//! occurrence exactly once.

mod common;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Daemon, TempFile, get, store_dir, tail, until, wait_for_stream};
use mcp_reference_server::{Fault, Options, ReferenceServer, Times};
use serde_json::{Value, json};

fn server_options() -> Options {
    let mut options = Options::default();
    options.events = true;
    options.legacy = false;
    options.poll_ms = 1000;
    options
}

fn config(url: &str, store: &std::path::Path) -> String {
    format!(
        "instance = \"ev\"\n[webhooks]\nlisten = \"127.0.0.1:0\"\n[store]\npath = \"{}\"\n\
         [lifecycle]\ndrain_timeout = \"5s\"\n[[mcp.servers]]\nname = \"ref\"\nurl = \"{url}\"\n\
         [[events.bindings]]\nserver = \"ref\"\nevent = \"ticket.created\"\ninto = \"tickets\"\n\
         arguments = {{ project = \"ops\" }}\n",
        store.display()
    )
}

fn wait_for_records(file: &TempFile, n: usize) -> Vec<Value> {
    wait_for_stream(file, "tickets", n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_binding_appends_what_the_server_emits() {
    let server = ReferenceServer::start(server_options()).await;
    let dir = store_dir("events");
    let file = TempFile::new(&config(&server.url(), dir.path()));
    let mut agentd = Daemon::run(&file);
    let listed = agentd.wait_for("mcp.events.listed", Some("ref"));
    assert_eq!(listed["types"], 2);
    let armed = agentd.wait_for("mcp.events.armed", Some("ref"));
    assert_eq!(
        (
            &armed["event_type"],
            &armed["mode"],
            &armed["cursor_present"]
        ),
        (&json!("ticket.created"), &json!("poll"), &json!(false))
    );
    server.emit("ticket.created", json!({"id": 1}));
    server.emit("build.finished", json!({"ok": true}));
    server.emit("ticket.created", json!({"no_id": 2}));
    let records = wait_for_records(&file, 2);
    assert_eq!(records.len(), 2, "{records:?}");
    assert_eq!(records[0]["id"], "mcp/ref/ticket.created/evt-1");
    assert_eq!(records[0]["source"], "mcp:ref");
    assert_eq!(records[0]["stream"], "tickets");
    assert_eq!(records[0]["data"]["payload"], json!({"id": 1}));
    assert_eq!(records[1]["data"]["schema_ok"], false);
    let mismatch = agentd.wait_for("mcp.events.schema_mismatch", Some("ref"));
    assert_eq!(mismatch["event_id"], "evt-3");
    assert_eq!(mismatch["level"], "warn");

    let metrics = get(&agentd.listener(), "/metrics");
    for line in [
        "agent_mcp_events_total{server=\"ref\",event=\"ticket.created\",mode=\"poll\",outcome=\"appended\"} 2",
        "agent_mcp_events_total{server=\"ref\",event=\"ticket.created\",mode=\"poll\",outcome=\"schema_mismatch\"} 1",
        "agent_mcp_events_requests_total{server=\"ref\",method=\"events/list\",outcome=\"ok\"} 1",
        "# TYPE agent_mcp_event_lag_ms gauge",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    assert!(
        metrics.contains("method=\"events/poll\",outcome=\"ok\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("agent_subscriptions_active{kind=\"event\",mode=\"poll\"} 1"),
        "{metrics}"
    );

    // The server's types change: listed again.
    server.change_events().await;
    agentd.wait_for("mcp.events.list_changed", Some("ref"));
    agentd.wait_for_nth("mcp.events.listed", Some("ref"), 2);

    // A reload without the binding forgets it, and its records.
    let text = config(&server.url(), dir.path());
    file.write(&text[..text.find("[[events.bindings]]").unwrap()]);
    agentd.signal("HUP");
    let removed = agentd.wait_for("mcp.events.removed", Some("ref"));
    assert_eq!(
        (&removed["event_type"], &removed["reason"]),
        (&json!("ticket.created"), &json!("reload"))
    );
    assert!(tail(&file, "tickets").is_empty());
    // Stopped: no longer live.
    let addr = agentd.listener();
    until("the stopped binding no longer counted live", || {
        get(&addr, "/metrics")
            .contains("agent_subscriptions_active{kind=\"event\",mode=\"poll\"} 0")
    })
    .await;
    assert!(agentd.terminate().success());
    drop(dir);
}

/// MCP Events' runtime is built once: a reload that adds a binding keeps the threads of its
/// four workers, the binding kept goes on appending (decided afresh and armed again on the
/// listing the reload asks for), and the one added arms; a binding changed under the same
/// key starts again from its cursor, its records kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_diffs_the_bindings_on_the_same_runtime() {
    let server = ReferenceServer::start(server_options()).await;
    let dir = store_dir("reload");
    let text = config(&server.url(), dir.path());
    let file = TempFile::new(&text);
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.events.armed", Some("ref"));
    let workers = agentd.threads("agentd-events");
    assert_eq!(workers.len(), 4, "{workers:?}");
    server.emit("ticket.created", json!({"id": 1}));
    wait_for_records(&file, 1);

    let builds = "[[events.bindings]]\nserver = \"ref\"\nevent = \"build.finished\"\n\
                  into = \"builds\"\n";
    file.write(&format!("{text}{builds}"));
    agentd.signal("HUP");
    let listed = agentd.wait_for_nth("mcp.events.listed", Some("ref"), 2);
    assert_eq!(listed["types"], 2, "listed again after the reload");
    let added = agentd
        .wait_for_nth("mcp.events.armed", Some("ref"), 3)
        .clone();
    let armed: Vec<Value> = agentd
        .matching("mcp.events.armed", Some("ref"))
        .map(|(_, v)| v["event_type"].clone())
        .collect();
    assert!(
        armed.contains(&json!("build.finished")),
        "{armed:?} (last {added})"
    );
    server.emit("ticket.created", json!({"id": 2}));
    server.emit("build.finished", json!({"ok": true}));
    assert_eq!(wait_for_records(&file, 2).len(), 2);
    assert_eq!(wait_for_stream(&file, "builds", 1).len(), 1);
    assert_eq!(agentd.threads("agentd-events"), workers, "the same runtime");

    // A binding changed under the same key (its rate) starts again from its cursor: nothing
    // is removed, its records stay, and what comes next is appended after them.
    file.write(&format!("{text}max_per_minute = 100\n{builds}"));
    agentd.signal("HUP");
    agentd.wait_for_nth("mcp.events.listed", Some("ref"), 3);
    let armed = agentd.matching("mcp.events.armed", Some("ref")).count();
    agentd.wait_for_nth("mcp.events.armed", Some("ref"), armed + 1);
    let restarted = agentd
        .matching("mcp.events.armed", Some("ref"))
        .filter(|(_, v)| v["event_type"] == "ticket.created")
        .last()
        .map(|(_, v)| v["cursor_present"].clone());
    server.emit("ticket.created", json!({"id": 3}));
    assert_eq!(wait_for_records(&file, 3).len(), 3);
    assert!(agentd.matching("mcp.events.removed", None).next().is_none());
    assert_eq!(agentd.threads("agentd-events"), workers, "the same runtime");
    assert!(agentd.terminate().success());
    assert_eq!(
        restarted,
        Some(json!(true)),
        "started again from its cursor"
    );
    drop(dir);
}

/// A store that does not take MCP Events' commits is told to the supervisor, and the own
/// tools' `status` says the store is degraded until a commit is taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_refusing_commits_is_degraded_in_status() {
    let server = ReferenceServer::start(server_options()).await;
    let dir = store_dir("degraded");
    let file = TempFile::new(&config(&server.url(), dir.path()));
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.events.armed", Some("ref"));
    let degraded = || {
        let out = Command::new(env!("CARGO_BIN_EXE_agentd"))
            .args(["tool", "call", "status", "--config", file.to_str().unwrap()])
            .output()
            .expect("agentd runs");
        let status: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("status: {}", String::from_utf8_lossy(&out.stderr)));
        status["store"]["degraded"].clone()
    };
    assert_eq!(degraded(), json!(false));

    let db = rusqlite::Connection::open(dir.path().join("agentd.sqlite3")).unwrap();
    db.execute_batch("ALTER TABLE events RENAME TO events_away")
        .unwrap();
    server.emit("ticket.created", json!({"id": 1}));
    let paused = agentd.wait_for("mcp.events.paused", Some("ref"));
    assert_eq!(paused["cause"], "store_degraded", "{paused}");
    until("status says the store is degraded", || {
        degraded() == json!(true)
    })
    .await;

    db.execute_batch("ALTER TABLE events_away RENAME TO events")
        .unwrap();
    agentd.wait_for("mcp.events.resumed", Some("ref"));
    assert_eq!(wait_for_records(&file, 1).len(), 1);
    until("status says the store is well again", || {
        degraded() == json!(false)
    })
    .await;
    assert!(agentd.terminate().success());
    drop(dir);
}

/// `agent_mcp_events_requests_total` means one thing for every method: `ok` the server
/// answered with a result, `refused` with a JSON-RPC error (in a 200 or in a 400 alike),
/// `failed` no answer (here a 503 without a JSON-RPC error). Every method is counted by one
/// function; `events/list` and `events/poll` show it here, `events/subscribe` in the
/// envelope test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_outcomes_mean_the_same_for_every_method() {
    let server = ReferenceServer::start(server_options()).await;
    let busy = |status| Fault::RpcError {
        status,
        code: -32603,
        message: "busy".into(),
        data: None,
    };
    server.script("events/list", busy(200), Times::Once);
    server.script("events/poll", busy(200), Times::Once);
    server.script("events/poll", busy(400), Times::Once);
    server.script("events/poll", Fault::Status(503, None), Times::Once);
    let dir = store_dir("requests");
    let file = TempFile::new(&config(&server.url(), dir.path()));
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.events.list.fail", Some("ref"));
    agentd.wait_for_nth("mcp.events.poll.fail", Some("ref"), 3);
    agentd.wait_for("mcp.events.armed", Some("ref"));
    let metrics = get(&agentd.listener(), "/metrics");
    for line in [
        "agent_mcp_events_requests_total{server=\"ref\",method=\"events/list\",outcome=\"refused\"} 1",
        "agent_mcp_events_requests_total{server=\"ref\",method=\"events/list\",outcome=\"ok\"} 1",
        "agent_mcp_events_requests_total{server=\"ref\",method=\"events/poll\",outcome=\"refused\"} 2",
        "agent_mcp_events_requests_total{server=\"ref\",method=\"events/poll\",outcome=\"failed\"} 1",
        "agent_mcp_events_requests_total{server=\"ref\",method=\"events/poll\",outcome=\"ok\"}",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    assert!(
        !metrics.contains("events/list\",outcome=\"failed\""),
        "{metrics}"
    );
    assert!(agentd.terminate().success());
    drop(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigkill_every_occurrence_is_in_the_stream_exactly_once() {
    crash(&["tickets"]).await;
}

/// The crash with 16 bindings polling at once, their commits grouped in transactions
/// of the store while agentd is killed: each stream holds every occurrence exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigkill_many_bindings_keep_every_occurrence_exactly_once() {
    let streams: Vec<String> = (0..16).map(|n| format!("tickets-{n}")).collect();
    crash(&streams.iter().map(String::as_str).collect::<Vec<_>>()).await;
}

/// agentd killed with SIGKILL while the server emits and a poll binding for each of
/// `streams` polls, started again: each stream holds every occurrence exactly once, in order.
async fn crash(streams: &[&str]) {
    let server = Arc::new(ReferenceServer::start(server_options()).await);
    let dir = store_dir("crash");
    let mut text = config(&server.url(), dir.path());
    text.truncate(text.find("[[events.bindings]]").unwrap());
    for stream in streams {
        text += &format!(
            "[[events.bindings]]\nserver = \"ref\"\nevent = \"ticket.created\"\n\
             into = \"{stream}\"\narguments = {{ project = \"ops\" }}\n"
        );
    }
    let file = TempFile::new(&text);
    let mut agentd = Daemon::run(&file);
    agentd.wait_for_nth("mcp.events.armed", Some("ref"), streams.len());
    // The server emits on, one every 100 ms, all through the crash and the restart; past
    // the 20th it waits for the crash, so that some are emitted while agentd is down.
    let (crashed, on_crash) = tokio::sync::oneshot::channel::<()>();
    let emitted = Arc::new(AtomicUsize::new(0));
    let emitter = {
        let (server, emitted) = (server.clone(), emitted.clone());
        tokio::spawn(async move {
            let mut on_crash = on_crash;
            for i in 0..40 {
                if i == 20 {
                    let _ = (&mut on_crash).await;
                }
                server.emit("ticket.created", json!({"id": i}));
                emitted.store(i + 1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    wait_for_stream(&file, streams[0], 1);
    agentd.kill();
    let _ = crashed.send(());
    let down = emitted.load(Ordering::SeqCst);
    until("an occurrence emitted while agentd is down", || {
        emitted.load(Ordering::SeqCst) > down
    })
    .await;
    let mut again = Daemon::run(&file);
    for n in 1..=streams.len() {
        let armed = again.wait_for_nth("mcp.events.armed", Some("ref"), n);
        assert_eq!(
            armed["cursor_present"], true,
            "it goes on from the stored cursor"
        );
    }
    emitter.await.unwrap();
    let expected: Vec<String> = (1..=40)
        .map(|n| format!("mcp/ref/ticket.created/evt-{n}"))
        .collect();
    for stream in streams {
        let records = wait_for_stream(&file, stream, 40);
        let ids: Vec<&str> = records.iter().map(|r| r["id"].as_str().unwrap()).collect();
        assert_eq!(
            ids, expected,
            "every occurrence once, in order, in {stream}"
        );
    }
    assert!(again.terminate().success());
    drop(dir);
}

/// A raw HTTP/1.1 request to the daemon's listener: the status line's code.
fn send(addr: &str, head: &str, body: &[u8]) -> u16 {
    common::raw(addr, head, body)
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_binding_is_verified_armed_and_takes_signed_deliveries() {
    let server = ReferenceServer::start(server_options()).await;
    let dir = store_dir("webhook");
    let text = config(&server.url(), dir.path()) + "delivery = [\"webhook\", \"poll\"]\n";
    let file = TempFile::new(&text);
    let mut agentd = Daemon::run(&file);
    let armed = agentd.wait_for("mcp.events.armed", Some("ref"));
    assert_eq!(armed["mode"], "webhook", "{armed}");
    let delivered = server.delivered();
    assert_eq!(
        delivered.first().map(|(id, status)| (id.as_str(), *status)),
        Some(("msg_verify_sub_1", 200)),
        "the challenge was answered: {delivered:?}"
    );
    server.emit("ticket.created", json!({"id": 7}));
    server.emit("ticket.created", json!({"id": 8}));
    // Deliveries race each other: their order is the server's best effort.
    let records = wait_for_records(&file, 2);
    let mut ids: Vec<&str> = records.iter().map(|r| r["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        [
            "mcp/ref/ticket.created/evt-1",
            "mcp/ref/ticket.created/evt-2"
        ]
    );
    assert!(
        records
            .iter()
            .any(|r| r["data"]["payload"] == json!({"id": 8}))
    );
    until("the challenge and both deliveries answered 200", || {
        server.delivered().iter().filter(|(_, s)| *s == 200).count() >= 3
    })
    .await;

    // What the receiver refuses, before the body is used.
    let addr = agentd.listener();
    let key = mcp_events::binding::key_of(
        "ref",
        "ticket.created",
        "tickets",
        json!({"project": "ops"}).as_object().unwrap(),
    );
    let path = format!("/hooks/_mcp/{key}");
    let body = br#"{"eventId":"evt-9","name":"ticket.created","timestamp":"2026-11-30T06:00:00Z","data":{"id":9}}"#;
    let post = |path: &str, headers: &str, len: usize| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n{headers}Content-Length: {len}\r\n\r\n"
        )
    };
    let forged = "webhook-id: evt-9\r\nwebhook-timestamp: 1796018400\r\nwebhook-signature: v1,AAAA\r\nX-MCP-Subscription-Id: sub_1\r\n";
    assert_eq!(send(&addr, &post(&path, forged, body.len()), body), 401);
    let denied = agentd.wait_for("mcp.events.hook.denied", Some("ref"));
    assert_eq!(denied["event_type"], "ticket.created");
    assert_eq!(
        send(&addr, &post("/hooks/_mcp/bnope", forged, body.len()), body),
        410
    );
    assert_eq!(
        send(
            &addr,
            &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
            b""
        ),
        405
    );
    // Over 256 KiB: answered 413 from the declared length, the body never sent. At the
    // bound the body is read and checked (and this one is forged: 401).
    assert_eq!(send(&addr, &post(&path, forged, 256 * 1024 + 1), b""), 413);
    let at_bound = vec![b' '; 256 * 1024];
    assert_eq!(
        send(&addr, &post(&path, forged, at_bound.len()), &at_bound),
        401
    );

    let metrics = get(&addr, "/metrics");
    assert!(
        metrics.contains(
            "agent_mcp_events_total{server=\"ref\",event=\"ticket.created\",mode=\"webhook\",outcome=\"appended\"} 2"
        ),
        "{metrics}"
    );
    assert!(agentd.terminate().success());
    assert_eq!(
        tail(&file, "tickets").len(),
        2,
        "the forged one was not appended"
    );
    drop(dir);
}

/// A store that keeps smaller values bounds the webhook body too: at `store.max_value_bytes`
/// the body is read and checked (forged here: 401), one byte past it is 413 from the declared
/// length, the body never sent. A path that only holds the route further in is no route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_body_is_bounded_by_the_stores_value_size() {
    let server = ReferenceServer::start(server_options()).await;
    let dir = store_dir("small-values");
    let text = config(&server.url(), dir.path())
        .replace("[store]\n", "[store]\nmax_value_bytes = 1024\n")
        + "delivery = [\"webhook\"]\n";
    let file = TempFile::new(&text);
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.events.armed", Some("ref"));
    let addr = agentd.listener();
    let key = mcp_events::binding::key_of(
        "ref",
        "ticket.created",
        "tickets",
        json!({"project": "ops"}).as_object().unwrap(),
    );
    let head = |path: &str, len: usize| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
             Content-Type: application/json\r\nwebhook-id: evt-9\r\n\
             webhook-timestamp: 1796018400\r\nwebhook-signature: v1,AAAA\r\n\
             X-MCP-Subscription-Id: sub_1\r\nContent-Length: {len}\r\n\r\n"
        )
    };
    let path = format!("/hooks/_mcp/{key}");
    let at_bound = vec![b' '; 1024];
    assert_eq!(send(&addr, &head(&path, at_bound.len()), &at_bound), 401);
    assert_eq!(send(&addr, &head(&path, 1025), b""), 413);
    // Routes are matched from the start of the path.
    assert_eq!(send(&addr, &head(&format!("/x{path}"), 2), b"{}"), 404);
    assert!(agentd.terminate().success());
    drop(dir);
}

/// A signed delivery naming a subscription that is not the binding's (an old one, still
/// delivering) is answered 410 and not appended; the binding's own are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_for_another_subscription_is_gone() {
    let server = ReferenceServer::start(server_options()).await;
    let dir = store_dir("other-subscription");
    let text = config(&server.url(), dir.path()) + "delivery = [\"webhook\"]\n";
    let file = TempFile::new(&text);
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.events.armed", Some("ref"));
    let stale = server.emit_as("ticket.created", json!({"id": 1}), "sub_old");
    until("the stale delivery answered", || {
        server.delivered().iter().any(|(id, _)| *id == stale)
    })
    .await;
    let answered: Vec<u16> = server
        .delivered()
        .iter()
        .filter(|(id, _)| *id == stale)
        .map(|(_, status)| *status)
        .collect();
    assert_eq!(answered, [410], "final at once");
    server.emit("ticket.created", json!({"id": 2}));
    let records = wait_for_records(&file, 1);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["data"]["payload"], json!({"id": 2}));
    assert!(agentd.terminate().success());
    drop(dir);
}

/// A webhook binding bounded at one occurrence a minute: the first is appended, the next are
/// answered 429 with `Retry-After` (the server delivers them again later), and intake is
/// logged paused for its rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_rate_is_answered_429() {
    let server = ReferenceServer::start(server_options()).await;
    let dir = store_dir("rate");
    let text = config(&server.url(), dir.path()) + "delivery = [\"webhook\"]\nmax_per_minute = 1\n";
    let file = TempFile::new(&text);
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.events.armed", Some("ref"));
    server.emit("ticket.created", json!({"id": 1}));
    wait_for_records(&file, 1);
    server.emit("ticket.created", json!({"id": 2}));
    let paused = agentd.wait_for("mcp.events.paused", Some("ref"));
    assert_eq!(paused["cause"], "rate");
    until("evt-2 answered 429", || {
        server
            .delivered()
            .iter()
            .any(|(id, s)| id == "evt-2" && *s == 429)
    })
    .await;
    assert_eq!(tail(&file, "tickets").len(), 1);
    let metrics = get(&agentd.listener(), "/metrics");
    assert!(
        metrics.contains("outcome=\"refused_pressure\"}"),
        "{metrics}"
    );
    assert!(agentd.terminate().success());
    drop(dir);
}

/// The server's control envelopes and delivery status: a `gap` (logged, counted, its cursor
/// kept), a `terminated` that may pass (armed again), a suspended and throttled delivery
/// status (logged, armed again), and a `terminated` -32024 (refused for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envelopes_and_delivery_status_are_taken_as_the_sep_says() {
    let server = ReferenceServer::start(server_options()).await;
    let dir = store_dir("envelopes");
    let text = config(&server.url(), dir.path()) + "delivery = [\"webhook\"]\n";
    let file = TempFile::new(&text);
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.events.armed", Some("ref"));

    server.envelope("ticket.created", json!({"type": "gap", "cursor": "c0"}));
    let gap = agentd.wait_for("mcp.events.gap", Some("ref"));
    assert_eq!(
        (&gap["cause"], &gap["level"]),
        (&json!("truncated"), &json!("warn"))
    );

    server.delivery_status(Some(json!({
        "active": false, "lastError": "http_5xx", "throttled": true, "retryAfterMs": 1000
    })));
    let ended = json!({"type": "terminated", "error": {"code": -32603, "message": "restart"}});
    server.envelope("ticket.created", ended);
    let terminated = agentd.wait_for("mcp.events.terminated", Some("ref"));
    assert_eq!(
        (&terminated["code"], &terminated["level"]),
        (&json!(-32603), &json!("error"))
    );
    let suspended = agentd.wait_for("mcp.events.delivery_suspended", Some("ref"));
    assert_eq!(suspended["last_error"], "http_5xx");
    assert_eq!(suspended["active"], false);
    let throttled = agentd.wait_for("mcp.events.throttled", Some("ref"));
    assert_eq!(throttled["retry_after_ms"], 1000);
    server.delivery_status(None);
    // Armed again after the suspension: agentd has taken the answer of a third subscribe.
    let addr = agentd.listener();
    let taken = "agent_mcp_events_requests_total{server=\"ref\",method=\"events/subscribe\",outcome=\"ok\"} 3";
    until("armed again after the suspension", || {
        get(&addr, "/metrics").contains(taken)
    })
    .await;

    let revoked = json!({"type": "terminated", "error": {"code": -32024, "message": "revoked"}});
    server.envelope("ticket.created", revoked);
    let refused = agentd.wait_for("mcp.events.refused", Some("ref"));
    assert_eq!(
        (&refused["reason"], &refused["level"]),
        (&json!("forbidden"), &json!("error"))
    );
    // Refused: no longer live.
    until("the refused binding no longer counted live", || {
        get(&addr, "/metrics")
            .contains("agent_subscriptions_active{kind=\"event\",mode=\"webhook\"} 0")
    })
    .await;
    let metrics = get(&addr, "/metrics");
    assert!(
        metrics.contains(
            "agent_mcp_event_gaps_total{server=\"ref\",event=\"ticket.created\",cause=\"truncated\"} 1"
        ),
        "{metrics}"
    );
    assert!(agentd.terminate().success());
    drop(dir);
}

/// Two bindings of one server: the first poll the server gets is left unanswered (past the
/// 30 s bound of a request), and the other binding is armed meanwhile, before that poll
/// failed: each binding has a task of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_binding_holds_up_no_other() {
    let server = ReferenceServer::start(server_options()).await;
    server.script(
        "events/poll",
        Fault::Silence(Duration::from_secs(3600)),
        Times::Once,
    );
    let dir = store_dir("slow");
    let text = config(&server.url(), dir.path())
        + "[[events.bindings]]\nserver = \"ref\"\nevent = \"ticket.created\"\ninto = \"other\"\n";
    let file = TempFile::new(&text);
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.events.listed", Some("ref"));
    agentd.wait_for("mcp.events.armed", Some("ref"));
    assert_eq!(
        agentd.matching("mcp.events.poll.fail", None).count(),
        0,
        "armed while the other binding's poll is unanswered: {:?}",
        agentd.seen
    );
    assert!(agentd.terminate().success());
    drop(dir);
}

/// `agentd events call`, as `owner` of `kind`: the tool's result, or the error it printed.
fn events_call(
    file: &TempFile,
    who: (&str, &str),
    tool: &str,
    args: Value,
) -> Result<Value, String> {
    let out = Command::new(env!("CARGO_BIN_EXE_agentd"))
        .args(["events", "call", "--config", file.to_str().unwrap()])
        .args(["--owner", who.0, "--kind", who.1, tool, &args.to_string()])
        .output()
        .expect("agentd runs");
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).expect("a JSON result"))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_subscriptions_are_checked_made_audited_expired_and_restored() {
    let server = ReferenceServer::start(server_options()).await;
    let dir = store_dir("runtime");
    let text = format!(
        "instance = \"ev\"\n[webhooks]\nlisten = \"127.0.0.1:0\"\n[store]\npath = \"{}\"\n\
         [lifecycle]\ndrain_timeout = \"5s\"\n[[mcp.servers]]\nname = \"ref\"\nurl = \"{}\"\n\
         [[events.grants]]\nowner = \"root\"\nlive = 2\ntools = true\n\
         [[events.grants]]\nowner = \"nightly\"\n",
        dir.path().display(),
        server.url()
    );
    let file = TempFile::new(&text);
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.connect", Some("ref"));
    let root = ("root", "root");
    let private = std::fs::metadata(dir.path().join("control"))
        .unwrap()
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&private) & 0o777,
        0o700
    );

    let listed = events_call(&file, root, "events.list", json!({"server": "ref"})).unwrap();
    assert_eq!(listed["types"][0]["name"], "ticket.created", "{listed}");
    // Refused before anything is made: by the listing, the schema, the caller and its grant.
    let wanted = |event: &str, into: &str, arguments: Value| json!({"server": "ref", "event": event, "into": into, "arguments": arguments});
    for (who, args, says) in [
        (
            root,
            wanted("ticket.closed", "inbox", json!({})),
            "unknown_event",
        ),
        (
            root,
            wanted("ticket.created", "inbox", json!({"project": 7})),
            "invalid_arguments",
        ),
        (
            root,
            wanted("ticket.created", "agentd.audit", json!({})),
            "agentd.audit",
        ),
        (
            ("root", "subagent"),
            wanted("ticket.created", "inbox", json!({})),
            "not offered",
        ),
        (
            ("nightly", "workflow"),
            wanted("ticket.created", "inbox", json!({})),
            "not offered",
        ),
        (
            ("nobody", "root"),
            wanted("ticket.created", "inbox", json!({})),
            "not offered",
        ),
    ] {
        let err = events_call(&file, who, "events.subscribe", args).unwrap_err();
        assert!(err.contains(says), "{says}: {err}");
    }
    let err = events_call(&file, root, "events.list", json!({"server": "nope"})).unwrap_err();
    assert!(err.contains("no server is named"), "{err}");

    // A poll subscription: made, logged, armed, appending.
    let made = events_call(
        &file,
        root,
        "events.subscribe",
        wanted("ticket.created", "inbox", json!({"project": "ops"})),
    )
    .unwrap();
    let id = made["subscription"]["id"].as_str().unwrap().to_owned();
    let subscribed = agentd.wait_for("mcp.events.subscribed", Some("ref"));
    assert_eq!(
        (
            &subscribed["owner"],
            &subscribed["reason"],
            &subscribed["subscription"]
        ),
        (&json!("root"), &json!("requested"), &json!(id))
    );
    assert_eq!(subscribed["event_type"], "ticket.created");
    assert_eq!(
        agentd.wait_for("mcp.events.armed", Some("ref"))["mode"],
        "poll"
    );
    server.emit("ticket.created", json!({"id": 1}));
    let records = wait_for_stream(&file, "inbox", 1);
    assert_eq!(records[0]["data"]["subscription"], json!(id));

    // A webhook one living 4 s: its lifetime ends it, and its server subscription is released.
    let mut short = wanted("ticket.created", "short", json!({}));
    short["delivery"] = json!(["webhook"]);
    short["lifetime_s"] = json!(4);
    let short = events_call(&file, root, "events.subscribe", short).unwrap();
    let armed = agentd.wait_for_nth("mcp.events.armed", Some("ref"), 2);
    assert_eq!(armed["mode"], "webhook");
    // The grant allows two.
    let err = events_call(
        &file,
        root,
        "events.subscribe",
        wanted("ticket.created", "third", json!({})),
    )
    .unwrap_err();
    assert!(err.contains("subscriptions are live"), "{err}");
    let expired = agentd.wait_for("mcp.events.unsubscribed", Some("ref"));
    assert_eq!(
        (&expired["reason"], &expired["subscription"]),
        (&json!("expired"), &short["subscription"]["id"])
    );
    until("the expired subscription released on the server", || {
        server.methods().iter().any(|m| m == "events/unsubscribe")
    })
    .await;
    let mine = events_call(&file, root, "events.subscriptions", json!({})).unwrap();
    assert_eq!(mine["subscriptions"].as_array().unwrap().len(), 1, "{mine}");
    let theirs = events_call(
        &file,
        ("nightly", "root"),
        "events.subscriptions",
        json!({}),
    );
    assert!(theirs.unwrap_err().contains("not offered"));

    // Kept across a restart: armed again from its cursor, without being made again.
    assert!(agentd.terminate().success());
    let mut agentd = Daemon::run(&file);
    let armed = agentd.wait_for("mcp.events.armed", Some("ref"));
    assert_eq!(armed["cursor_present"], true, "{armed}");
    server.emit("ticket.created", json!({"id": 2}));
    assert_eq!(wait_for_stream(&file, "inbox", 2).len(), 2);
    assert!(
        agentd
            .matching("mcp.events.subscribed", None)
            .next()
            .is_none()
    );

    // A webhook one, released by its owner: the server's subscription ends before the call
    // returns.
    let mut hooked = wanted("ticket.created", "hooked", json!({}));
    hooked["delivery"] = json!(["webhook"]);
    let hooked = events_call(&file, root, "events.subscribe", hooked).unwrap();
    let armed = agentd.wait_for_nth("mcp.events.armed", Some("ref"), 2);
    assert_eq!(armed["mode"], "webhook");
    let released = |server: &ReferenceServer| {
        let methods = server.methods();
        methods
            .iter()
            .filter(|m| *m == "events/unsubscribe")
            .count()
    };
    assert_eq!(released(&server), 1);
    let id_of = |made: &Value| json!({"subscription": made["subscription"]["id"]});
    events_call(&file, root, "events.unsubscribe", id_of(&hooked)).unwrap();
    assert_eq!(released(&server), 2);
    let gone = agentd.wait_for("mcp.events.unsubscribed", Some("ref"));
    assert_eq!(
        (&gone["reason"], &gone["subscription"], &gone["event_type"]),
        (
            &json!("requested"),
            &hooked["subscription"]["id"],
            &json!("ticket.created")
        )
    );

    // Released by its owner; its records stay.
    let ended = events_call(
        &file,
        root,
        "events.unsubscribe",
        json!({"subscription": id}),
    )
    .unwrap();
    assert_eq!(ended["subscription"]["id"], json!(id));
    let released = agentd.wait_for_nth("mcp.events.unsubscribed", Some("ref"), 2);
    assert_eq!(
        (&released["reason"], &released["subscription"]),
        (&json!("requested"), &json!(id))
    );
    let err = events_call(
        &file,
        root,
        "events.unsubscribe",
        json!({"subscription": id}),
    );
    assert!(err.unwrap_err().contains("no such subscription"));
    assert_eq!(tail(&file, "inbox").len(), 2);

    // An index that cannot be written: the subscription lives on, and the write is made
    // again (here, before a reload).
    let db = rusqlite::Connection::open(dir.path().join("agentd.sqlite3")).unwrap();
    db.execute_batch("ALTER TABLE meta RENAME TO meta_away")
        .unwrap();
    let late = events_call(
        &file,
        root,
        "events.subscribe",
        wanted("ticket.created", "late", json!({})),
    )
    .unwrap();
    let failed = agentd.wait_for("mcp.events.index.failed", None);
    assert_eq!(failed["subscriptions"], 1, "{failed}");
    assert_eq!(failed["level"], "warn");
    db.execute_batch("ALTER TABLE meta_away RENAME TO meta")
        .unwrap();

    // A reload that takes root's grant away ends root's subscriptions.
    file.write(&text.replace(
        "owner = \"root\"\nlive = 2\ntools = true\n",
        "owner = \"ops\"\n",
    ));
    agentd.signal("HUP");
    let gone = agentd.wait_for_nth("mcp.events.unsubscribed", Some("ref"), 3);
    assert_eq!(
        (&gone["reason"], &gone["subscription"]),
        (&json!("grant_removed"), &late["subscription"]["id"])
    );

    // Every change is audited, with the index, in order.
    let audit: Vec<(Value, Value)> = tail(&file, "agentd.audit")
        .into_iter()
        .map(|r| (r["action"].clone(), r["reason"].clone()))
        .collect();
    assert_eq!(
        audit,
        [
            (json!("subscribed"), json!("requested")),
            (json!("subscribed"), json!("requested")),
            (json!("unsubscribed"), json!("expired")),
            (json!("subscribed"), json!("requested")),
            (json!("unsubscribed"), json!("requested")),
            (json!("unsubscribed"), json!("requested")),
            (json!("subscribed"), json!("requested")),
            (json!("unsubscribed"), json!("grant_removed")),
        ]
    );
    assert!(agentd.terminate().success());
    assert!(
        !dir.path().join("control/agentd.sock").exists(),
        "the socket is removed at exit"
    );
    drop(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_replaced_by_a_configured_binding_keeps_its_cursor() {
    let server = ReferenceServer::start(server_options()).await;
    let dir = store_dir("configured");
    let text = format!(
        "instance = \"ev\"\n[store]\npath = \"{}\"\n[lifecycle]\ndrain_timeout = \"5s\"\n\
         [[mcp.servers]]\nname = \"ref\"\nurl = \"{}\"\n\
         [[events.grants]]\nowner = \"root\"\ntools = true\n",
        dir.path().display(),
        server.url()
    );
    let file = TempFile::new(&text);
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.connect", Some("ref"));
    let args = json!({"server": "ref", "event": "ticket.created", "into": "tickets",
                      "arguments": {"project": "ops"}});
    let made = events_call(&file, ("root", "root"), "events.subscribe", args).unwrap();
    // A first poll without a cursor starts from now.
    agentd.wait_for("mcp.events.armed", Some("ref"));
    server.emit("ticket.created", json!({"id": 1}));
    assert_eq!(wait_for_records(&file, 1).len(), 1);

    // The same binding, configured: the subscription ends, the binding keeps its cursor.
    let binding = "[[events.bindings]]\nserver = \"ref\"\nevent = \"ticket.created\"\n\
                   into = \"tickets\"\narguments = { project = \"ops\" }\n";
    let polls = || -> Vec<Value> {
        let log = server.log();
        log.iter()
            .filter(|l| l.method.as_deref() == Some("events/poll"))
            .map(|l| l.body["params"].clone())
            .collect()
    };
    let before = polls().len();
    file.write(&format!("{text}{binding}"));
    agentd.signal("HUP");
    let ended = agentd.wait_for("mcp.events.unsubscribed", Some("ref"));
    assert_eq!(
        (&ended["reason"], &ended["subscription"]),
        (&json!("configured"), &made["subscription"]["id"])
    );
    let armed = agentd.wait_for_nth("mcp.events.armed", Some("ref"), 2);
    assert_eq!(armed["cursor_present"], true, "{armed}");
    // Every poll since goes on from the subscription's cursor (past evt-1): none starts
    // from now.
    let after = polls();
    assert!(
        after.len() > before && after[before..].iter().all(|p| p["cursor"] == "c1"),
        "{:?}",
        &after[before..]
    );
    server.emit("ticket.created", json!({"id": 2}));
    let records = wait_for_records(&file, 2);
    assert_eq!(records.len(), 2, "{records:?}");
    assert!(agentd.terminate().success());
    drop(dir);
}

/// A daemon under SIGTERM with all three stalls: a server that never answers its close, a
/// webhook sender stalled half-way through its headers and a control connection that never
/// sends its request.
struct Stalled {
    agentd: Daemon,
    server: ReferenceServer,
    /// The HTTP listener's address.
    addr: String,
    /// Whether the daemon still ran once both stalled connections had ended.
    drained_after: bool,
    _dir: tempfile::TempDir,
}

/// Starts a daemon whose drain is bounded at `drain_timeout`, stalls it three ways, sends
/// SIGTERM, and checks that the listener closed both stalled connections.
async fn stalled_at_sigterm(drain_timeout: &str) -> Stalled {
    use std::io::{Read, Write};

    let mut legacy = Options::default();
    legacy.modern = false;
    let server = ReferenceServer::start(legacy).await;
    server.script(
        "DELETE",
        Fault::Silence(Duration::from_secs(120)),
        Times::Once,
    );
    let dir = store_dir("drain");
    let text = format!(
        "instance = \"drain\"\n[webhooks]\nlisten = \"127.0.0.1:0\"\n[store]\npath = \"{}\"\n\
         [lifecycle]\ndrain_timeout = \"{drain_timeout}\"\n[[mcp.servers]]\nname = \"slow\"\n\
         url = \"{}\"\n[[events.grants]]\nowner = \"root\"\n",
        dir.path().display(),
        server.url()
    );
    let file = TempFile::new(&text);
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.connect", Some("slow"));
    let addr = agentd.listener();

    let mut sender = std::net::TcpStream::connect(&addr).unwrap();
    sender
        .write_all(b"POST /hooks/_mcp/nobody HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let mut control =
        std::os::unix::net::UnixStream::connect(dir.path().join("control/agentd.sock")).unwrap();

    agentd.signal("TERM");
    // Both connections end, however long the drain still waits for the server's close.
    let bound = Some(Duration::from_secs(30));
    sender.set_read_timeout(bound).unwrap();
    control.set_read_timeout(bound).unwrap();
    let mut rest = Vec::new();
    assert!(
        ended(control.read_to_end(&mut rest)),
        "the control connection ended"
    );
    assert!(
        ended(sender.read_to_end(&mut rest)),
        "the sender's connection ended"
    );
    // Ended at once, not at the end of the drain: the close waits on the server for 5 s.
    let drained_after = agentd.is_running();
    until("the close sent", || {
        server.log().iter().any(|l| l.http == http::Method::DELETE)
    })
    .await;
    Stalled {
        agentd,
        server,
        addr,
        drained_after,
        _dir: dir,
    }
}

/// Whether a read met the end of a connection: closed (EOF) or reset; a read that times out
/// is a connection left open.
fn ended(read: std::io::Result<usize>) -> bool {
    match read {
        Ok(_) => true,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// SIGTERM with all three stalls: while the drain still waits for the server, the listener
/// has closed both stalled connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_closes_stalled_connections() {
    let mut stalled = stalled_at_sigterm("120s").await;
    assert!(
        stalled.drained_after,
        "still draining when the connections ended: the server has not answered"
    );
    stalled.agentd.kill();
    drop(stalled.server);
}

/// SIGTERM with all three stalls inside a 2 s `lifecycle.drain_timeout`: the listener takes
/// no new connection, and the process exits 0 on its own though the server never answers
/// its close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_ends_on_its_own_inside_its_bound() {
    use std::io::{Read, Write};

    let mut stalled = stalled_at_sigterm("2s").await;
    // Refused, or taken by a listener that no longer serves and closed unanswered.
    if let Ok(mut late) = std::net::TcpStream::connect(&stalled.addr) {
        let _ = late.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        late.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut answer = Vec::new();
        assert!(
            ended(late.read_to_end(&mut answer)),
            "the late connection ended"
        );
        assert!(
            answer.is_empty(),
            "unanswered: {}",
            String::from_utf8_lossy(&answer)
        );
    }
    let bound = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = stalled.agentd.exited() {
            break status;
        }
        assert!(Instant::now() < bound, "agentd did not exit on its own");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status:?}");
}
