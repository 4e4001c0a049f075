//! Workflow starts in `agentd run`, as a process against the reference server of either
//! era: a subscribe start armed (`start.subscribe.armed`) whose resource's change starts a
//! run; one on a server that offers no subscriptions (`start.subscribe.unsupported`); one on
//! a configured server that is not connected (`start.subscribe.no_server`); armed again
//! (reason `reload`) when a reload dials its server afresh; a subscribe that failed
//! (`start.subscribe.fail`) asked again; and, at 2026-07-28, an event start whose stream's
//! occurrence starts a run.

mod common;

use common::{Daemon, TempFile, until, until_up};
use mcp_reference_server::{Fault, Options, ReferenceServer, Times};
use serde_json::Value;

const COUNTER: &str = "demo://counter";

/// A workflow of one short wait, started by `start` (a TOML inline table).
fn workflow(name: &str, start: &str) -> String {
    format!(
        "[[workflows]]\nname = \"{name}\"\n[[workflows.starts]]\n{start}\n\
         [[workflows.steps]]\nid = \"a\"\ntype = \"wait\"\non = {{ duration = \"1ms\" }}\n"
    )
}

/// A port nothing listens on: bound, then let go.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The first `workflow.started` line of `workflow`, waiting for it (15 s at most).
fn started(daemon: &mut Daemon, workflow: &str) -> Value {
    let mut n = 1;
    loop {
        let line = daemon.wait_for_nth("workflow.started", None, n);
        if line["workflow"] == workflow {
            return line;
        }
        n += 1;
    }
}

async fn starts(options: Options) {
    let events = options.events;
    let server = ReferenceServer::start(options.clone()).await;
    let mut plain = options.clone();
    plain.subscribe = false;
    plain.events = false;
    let plain = ReferenceServer::start(plain).await;
    let dir = tempfile::tempdir().unwrap();
    let down = format!("http://127.0.0.1:{}/mcp", closed_port());
    let mut text = format!(
        "instance = \"starts\"\n[store]\npath = \"{}\"\n[lifecycle]\ndrain_timeout = \"5s\"\n\
         [[mcp.servers]]\nname = \"ref\"\nurl = \"{}\"\n\
         [[mcp.servers]]\nname = \"plain\"\nurl = \"{}\"\n\
         [[mcp.servers]]\nname = \"down\"\nurl = \"{down}\"\n",
        dir.path().display(),
        server.url(),
        plain.url(),
    );
    if events {
        text.push_str(
            "[[events.bindings]]\nserver = \"ref\"\nevent = \"ticket.created\"\n\
             into = \"tickets\"\narguments = { project = \"ops\" }\n",
        );
    }
    let on = |server: &str| format!("subscribe = {{ server = \"{server}\", uri = \"{COUNTER}\" }}");
    text.push_str(&workflow(
        "changed",
        &format!("id = \"counter\"\n{}", on("ref")),
    ));
    text.push_str(&workflow("unsubscribable", &on("plain")));
    text.push_str(&workflow("unreached", &on("down")));
    text.push_str(&workflow("ticketed", "event = { stream = \"tickets\" }"));
    let file = TempFile::new(&text);
    let mut daemon = Daemon::run(&file);
    until_up(&file);

    let armed = daemon.wait_for("start.subscribe.armed", Some("ref"));
    assert_eq!(
        (
            &armed["workflow"],
            &armed["node"],
            &armed["uri"],
            &armed["reason"]
        ),
        (
            &Value::from("changed"),
            &Value::from("counter"),
            &Value::from(COUNTER),
            &Value::from("start")
        )
    );
    let unsupported = daemon.wait_for("start.subscribe.unsupported", Some("plain"));
    assert_eq!(unsupported["level"], "error", "{unsupported}");
    assert_eq!(
        (&unsupported["workflow"], &unsupported["node"]),
        (&Value::from("unsubscribable"), &Value::from("#0"))
    );
    let no_server = daemon.wait_for("start.subscribe.no_server", Some("down"));
    assert_eq!(no_server["workflow"], "unreached", "{no_server}");

    until("subscribed", || {
        server.reaching(COUNTER) + server.listening(COUNTER) > 0
    })
    .await;
    server.touch(COUNTER).await;
    let run = started(&mut daemon, "changed");
    assert_eq!(run["by"], "start:counter", "{run}");

    if events {
        daemon.wait_for("mcp.events.armed", Some("ref"));
        server.emit("ticket.created", serde_json::json!({"id": 1}));
        let run = started(&mut daemon, "ticketed");
        assert_eq!(run["by"], "start:#0", "{run}");
    }

    // The same name at another address: dialed afresh at the reload, armed there again.
    let moved = ReferenceServer::start(options.clone()).await;
    file.write(&text.replace(&server.url(), &moved.url()));
    daemon.signal("HUP");
    let again = daemon.wait_for_nth("start.subscribe.armed", Some("ref"), 2);
    assert_eq!(again["reason"], "reload", "{again}");
    until("subscribed again", || {
        moved.reaching(COUNTER) + moved.listening(COUNTER) > 0
    })
    .await;
    moved.touch(COUNTER).await;
    let runs = |daemon: &Daemon| {
        let started = daemon.matching("workflow.started", None);
        started.filter(|(_, l)| l["workflow"] == "changed").count()
    };
    let mut n = daemon.matching("workflow.started", None).count();
    while runs(&daemon) < 2 {
        n += 1;
        daemon.wait_for_nth("workflow.started", None, n);
    }

    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_fire_at_2026_07_28() {
    let mut options = Options::default();
    options.legacy = false;
    options.events = true;
    options.poll_ms = 1000;
    starts(options).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_starts_fire_at_2025_11_25() {
    let mut options = Options::default();
    options.modern = false;
    starts(options).await;
}

/// A subscribe that fails in a way that may pass is `start.subscribe.fail` (warn), asked
/// again on the server's schedule; once it goes through it is `start.subscribe.armed`, and a
/// change starts a run. At 2025-11-25, where a subscribe is one request
/// (`resources/subscribe`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_subscribe_start_is_asked_again() {
    let mut options = Options::default();
    options.modern = false;
    let server = ReferenceServer::start(options).await;
    let busy = Fault::RpcError {
        status: 200,
        code: -32603,
        message: "busy".into(),
        data: None,
    };
    server.script("resources/subscribe", busy, Times::Once);
    let dir = tempfile::tempdir().unwrap();
    let on = format!("subscribe = {{ server = \"ref\", uri = \"{COUNTER}\" }}");
    let text = format!(
        "instance = \"starts\"\n[store]\npath = \"{}\"\n[lifecycle]\ndrain_timeout = \"5s\"\n\
         [[mcp.servers]]\nname = \"ref\"\nurl = \"{}\"\n{}",
        dir.path().display(),
        server.url(),
        workflow("changed", &on),
    );
    let file = TempFile::new(&text);
    let mut daemon = Daemon::run(&file);
    let fail = daemon.wait_for("start.subscribe.fail", Some("ref"));
    assert_eq!(fail["level"], "warn", "{fail}");
    assert_eq!(
        (&fail["workflow"], &fail["node"], &fail["uri"]),
        (
            &Value::from("changed"),
            &Value::from("#0"),
            &Value::from(COUNTER)
        )
    );
    assert!(fail["err"].as_str().unwrap().contains("busy"), "{fail}");
    until("subscribed on the schedule", || {
        server.reaching(COUNTER) > 0
    })
    .await;
    let armed = daemon.wait_for("start.subscribe.armed", Some("ref"));
    assert_eq!(armed["reason"], "start", "{armed}");
    server.touch(COUNTER).await;
    let run = started(&mut daemon, "changed");
    assert_eq!(run["by"], "start:#0", "{run}");
    daemon.terminate();
}
