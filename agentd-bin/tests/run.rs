//! `agentd run` as a process, against reference servers and the Python SDK's server: a
//! server down at start, then refused a join (its tools unlisted), joins on the schedule; a
//! lost session is dialed again on its schedule; a listen ended by the server is logged and
//! held again; reloads add, remove and refuse; and SIGTERM drains (a legacy session is ended
//! with DELETE) and exits 0. The libraries' diagnostics are written at `--log-level debug`
//! alone.

mod common;

use std::time::{Duration, Instant};

use agentd_tests::peers;
use common::{Daemon, TempFile, config, get, until};
use mcp_reference_server::{Fault, Options, ReferenceServer, Times};

/// `later` came no sooner than `at` after `earlier` (less 100 ms, the lines' `ts` being to
/// the millisecond): a step of a schedule was waited out. How long a busy machine takes
/// beyond it is no concern here; the steps themselves are held exactly, in virtual time, by
/// the supervisor's own tests.
fn not_before(earlier: Instant, later: Instant, at: Duration) {
    let gap = later - earlier;
    assert!(
        gap + Duration::from_millis(100) >= at,
        "{gap:?}, sooner than {at:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_server_joins_changes_are_logged_and_sigterm_drains() {
    let mut legacy = Options::default();
    legacy.modern = false;
    let steady = ReferenceServer::start(legacy).await;
    let late = ReferenceServer::start(Options::default()).await;
    // Down for the first dial (the probe and the fallback both refused); then it answers
    // the handshake but not the listing of its tools; then it joins.
    late.script("server/discover", Fault::Status(503, None), Times::Once);
    late.script("initialize", Fault::Status(503, None), Times::Once);
    let unlisted = Fault::RpcError {
        status: 200,
        code: -32603,
        message: "catalogue\u{1b}[31m offline".into(),
        data: None,
    };
    late.script("tools/list", unlisted, Times::Once);
    // A port nothing listens on.
    let gone = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/mcp", listener.local_addr().unwrap())
    };
    let file = TempFile::new(&config(
        "instance = \"run\"\n[webhooks]\nlisten = \"127.0.0.1:0\"\n[lifecycle]\ndrain_timeout = \"5s\"\n",
        &[
            ("steady", steady.url()),
            ("late", late.url()),
            ("gone", gone),
        ],
    ));
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.connect", Some("steady"));
    agentd.wait_for("mcp.joined", Some("late"));

    // A failed dial, a refused join 1 s later, then the join 2 s after that.
    let fails: Vec<Instant> = agentd
        .matching("mcp.connect.fail", Some("late"))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(fails.len(), 1, "{:?}", agentd.seen);
    let refused = agentd.wait_for("mcp.join.refused", Some("late"));
    assert_eq!(refused["level"], "warn");
    let errors = refused["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{refused}");
    let error = errors[0].as_str().unwrap();
    assert!(
        error.contains("catalogue") && !error.contains('\u{1b}'),
        "{refused}"
    );
    let refused_at = agentd.when("mcp.join.refused", Some("late"));
    not_before(fails[0], refused_at, Duration::from_secs(1));
    not_before(
        refused_at,
        agentd.when("mcp.joined", Some("late")),
        Duration::from_secs(2),
    );
    let connect = agentd.wait_for("mcp.connect", Some("late"));
    assert_eq!(connect["reason"], "joined");
    assert_eq!(connect["protocol"], "2026-07-28");
    assert_eq!(connect["level"], "info");

    // The failed dials are counted on /metrics.
    let addr = agentd.listener();
    let metrics = get(&addr, "/metrics");
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    assert!(
        metrics.contains("# TYPE agent_mcp_connect_failures_total counter"),
        "{metrics}"
    );
    assert!(
        metrics.contains("agent_mcp_connect_failures_total{server=\"late\"} 1"),
        "{metrics}"
    );
    assert!(!metrics.contains("server=\"steady\""), "{metrics}");
    assert!(get(&addr, "/nope").starts_with("HTTP/1.1 404"));

    // A tool list change on the legacy server's GET stream is logged.
    until("steady's GET stream attached", || steady.get_streams() > 0).await;
    steady.change_tools().await;
    let changed = agentd.wait_for("mcp.tools_changed", Some("steady"));
    assert_eq!(changed["note"], "takes effect at the next reload");
    // It does: a reload of the same file lists the kept servers' tools again.
    let lists = |server: &ReferenceServer| {
        server
            .methods()
            .iter()
            .filter(|m| *m == "tools/list")
            .count()
    };
    let before = (lists(&steady), lists(&late));
    agentd.signal("HUP");
    until("both servers listed again", || {
        lists(&steady) > before.0 && lists(&late) > before.1
    })
    .await;

    // The late server (2026-07-28) ends the listen: logged, and held again.
    until("late's listen open", || late.listens() > 0).await;
    late.end_listens().await;
    let ended = agentd.wait_for("mcp.listen.ended", Some("late"));
    assert_eq!(ended["level"], "warn");
    assert_eq!(ended["reason"], "server");
    assert_eq!(ended["retry_ms"], 250);
    agentd.wait_for("mcp.listen.resumed", Some("late"));

    // A tool list change on the modern server's listen is logged too.
    late.change_tools().await;
    agentd.wait_for("mcp.tools_changed", Some("late"));

    // A server nothing listens on: refused at every dial, counted.
    assert!(agentd.matching("mcp.connect.fail", Some("gone")).count() >= 1);
    assert!(
        get(&addr, "/metrics").contains("agent_mcp_connect_failures_total{server=\"gone\"}"),
        "counted"
    );

    let status = agentd.terminate();
    assert!(status.success(), "{status:?}");
    assert!(
        steady.log().iter().any(|l| l.http == http::Method::DELETE),
        "the legacy session was ended"
    );
    assert_eq!(
        agentd.matching("mcp.disconnect", None).count(),
        0,
        "a shutdown is no disconnect"
    );
}

/// A legacy server forgets its sessions: `mcp.disconnect` (warn, session_lost), a first
/// re-dial 1 s later that the server leaves unanswered (cut at the 2 s bound), a second 2 s
/// after it that succeeds (`mcp.connect`, reason session_lost), and the GET stream is held
/// again on the new session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_session_is_dialed_again_on_its_schedule() {
    let mut legacy = Options::default();
    legacy.modern = false;
    legacy.keepalive = Some(Duration::from_millis(100));
    let server = ReferenceServer::start(legacy).await;
    let file = TempFile::new(&config(
        "instance = \"lost\"\n[webhooks]\nlisten = \"127.0.0.1:0\"\n[lifecycle]\ndrain_timeout = \"5s\"\n",
        &[("old", server.url())],
    ));
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.connect", Some("old"));
    let gets = || {
        server
            .log()
            .iter()
            .filter(|l| l.http == http::Method::GET)
            .count()
    };
    until("the GET stream asked for", || gets() > 0).await;
    server.script(
        "initialize",
        Fault::Silence(Duration::from_secs(10)),
        Times::Once,
    );
    // Back from the lost session, the server lists one tool.
    server.script(
        "tools/list",
        Fault::Result(serde_json::json!({"tools": [
            {"name": "only", "inputSchema": {"type": "object"}},
        ]})),
        Times::Once,
    );
    server.expire_sessions();

    let lost = agentd.wait_for("mcp.disconnect", Some("old"));
    assert_eq!(lost["level"], "warn");
    assert_eq!(lost["reason"], "session_lost");
    let fail = agentd.wait_for("mcp.connect.fail", Some("old"));
    assert_eq!(fail["reason"], "session_lost");
    assert_eq!(fail["err"], "no answer within 2s", "{fail}");
    let back = agentd.wait_for_nth("mcp.connect", Some("old"), 2);
    assert_eq!(back["reason"], "session_lost");
    assert_eq!(back["protocol"], "2025-11-25");
    assert_eq!(back["tools"], 1, "the count listed again: {back}");
    // 1 s of backoff, then the 2 s bound.
    not_before(
        agentd.when("mcp.disconnect", Some("old")),
        agentd.when("mcp.connect.fail", Some("old")),
        Duration::from_secs(3),
    );
    let reconnected = agentd
        .matching("mcp.connect", Some("old"))
        .nth(1)
        .unwrap()
        .0;
    not_before(
        agentd.when("mcp.connect.fail", Some("old")),
        reconnected,
        Duration::from_secs(2),
    );
    let methods = server.methods();
    assert_eq!(
        methods.iter().filter(|m| *m == "initialize").count(),
        3,
        "dialed, refused once, dialed again: {methods:?}"
    );
    // The GET stream is opened again on the new session.
    let sessions = || {
        server
            .log()
            .iter()
            .filter(|l| l.http == http::Method::GET)
            .filter_map(|l| l.header("mcp-session-id").map(str::to_owned))
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    until("a GET stream on the new session", || sessions() >= 2).await;
    let metrics = get(&agentd.listener(), "/metrics");
    assert!(
        metrics.contains("agent_mcp_connect_failures_total{server=\"old\"} 1"),
        "{metrics}"
    );
    assert!(agentd.terminate().success());
}

/// Two legacy servers forget their sessions at once; each leaves its first re-dial
/// unanswered. The re-dials take turns: the second server's starts when the first's ended,
/// so their failures are the length of one unanswered dial apart, not simultaneous.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_sessions_are_dialed_again_one_server_at_a_time() {
    let mut legacy = Options::default();
    legacy.modern = false;
    legacy.keepalive = Some(Duration::from_millis(100));
    let a = ReferenceServer::start(legacy.clone()).await;
    let b = ReferenceServer::start(legacy).await;
    let file = TempFile::new(&config(
        "instance = \"turns\"\n[lifecycle]\ndrain_timeout = \"5s\"\n",
        &[("a", a.url()), ("b", b.url())],
    ));
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.connect", Some("a"));
    agentd.wait_for("mcp.connect", Some("b"));
    until("both GET streams attached", || {
        a.get_streams() > 0 && b.get_streams() > 0
    })
    .await;
    let silent = Fault::Silence(Duration::from_millis(1500));
    a.script("initialize", silent.clone(), Times::Once);
    b.script("initialize", silent, Times::Once);
    a.expire_sessions();
    b.expire_sessions();
    let fail_a = agentd.wait_for("mcp.connect.fail", Some("a"));
    let fail_b = agentd.wait_for("mcp.connect.fail", Some("b"));
    assert_eq!(
        (fail_a["reason"].as_str(), fail_b["reason"].as_str()),
        (Some("session_lost"), Some("session_lost"))
    );
    let (ta, tb) = (
        agentd.when("mcp.connect.fail", Some("a")),
        agentd.when("mcp.connect.fail", Some("b")),
    );
    let apart = if ta > tb { ta - tb } else { tb - ta };
    assert!(apart >= Duration::from_millis(1300), "{apart:?} apart");
    agentd.wait_for_nth("mcp.connect", Some("a"), 2);
    agentd.wait_for_nth("mcp.connect", Some("b"), 2);
    assert!(agentd.terminate().success());
}

/// SIGHUP reloads: a removed server is closed and a new one dialed, both with reason
/// `reload`; a server whose address changed is closed and dialed again; an invalid file is
/// refused and the supervisor keeps running on the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_adds_and_removes_servers_and_an_invalid_one_is_refused() {
    let a = ReferenceServer::start(Options::default()).await;
    let b = ReferenceServer::start(Options::default()).await;
    let store = tempfile::tempdir().unwrap();
    let head = format!(
        "instance = \"reload\"\n[store]\npath = \"{}\"\n[lifecycle]\ndrain_timeout = \"5s\"\n",
        store.path().display()
    );
    let head = head.as_str();
    let file = TempFile::new(&config(head, &[("a", a.url())]));
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.connect", Some("a"));
    // The supervisor's catalogue holds a's tools once it has listed them.
    until("a's tools in the catalogue", || {
        held_tools(&file).contains("a/add\t")
    })
    .await;

    file.write(&config(head, &[("b", b.url())]));
    agentd.signal("HUP");
    let gone = agentd.wait_for("mcp.disconnect", Some("a"));
    assert_eq!(gone["reason"], "reload");
    assert_eq!(gone["level"], "info");
    let added = agentd.wait_for("mcp.connect", Some("b"));
    assert_eq!(added["reason"], "reload");
    // Rebuilt at the reload: b's tools, not a's.
    until("b's tools, and not a's, in the catalogue", || {
        let tools = held_tools(&file);
        tools.contains("b/add\t") && !tools.contains("a/")
    })
    .await;

    // The same name at another address: closed and dialed again, both for the reload.
    let c = ReferenceServer::start(Options::default()).await;
    file.write(&config(head, &[("b", c.url())]));
    agentd.signal("HUP");
    let moved = agentd.wait_for_nth("mcp.disconnect", Some("b"), 1);
    assert_eq!(moved["reason"], "reload");
    let again = agentd.wait_for_nth("mcp.connect", Some("b"), 2);
    assert_eq!(again["reason"], "reload");
    assert!(c.methods().iter().any(|m| m == "server/discover"));

    file.write("instance = \"reload\"\nnot toml at all [\n");
    agentd.signal("HUP");
    let refused = agentd.wait_for("reload.refused", None);
    assert!(
        refused["err"].as_str().unwrap().contains(":2:"),
        "{refused}"
    );
    // Valid TOML, refused by validation: a header the client sets itself.
    let reserved = format!(
        "{head}[[mcp.servers]]\nname = \"b\"\nurl = \"{}\"\nheaders = {{ Mcp-Session-Id = \"x\" }}\n",
        c.url()
    );
    file.write(&reserved);
    agentd.signal("HUP");
    let refused = agentd.wait_for_nth("reload.refused", None, 2);
    assert!(
        refused["err"].as_str().unwrap().contains("Mcp-Session-Id"),
        "{refused}"
    );
    assert!(agentd.is_running());

    let status = agentd.terminate();
    assert!(status.success(), "{status:?}");
    assert_eq!(
        agentd.matching("mcp.disconnect", Some("b")).count(),
        1,
        "b was kept through the refused reload"
    );
    // No daemon: `agentd tools --running` says so, exit 3.
    file.write(&config(head, &[]));
    let out = tools_running(&file);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}

/// `agentd tools --running`: what the running daemon's catalogue holds.
fn tools_running(file: &TempFile) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_agentd"))
        .args(["tools", "--running", "--config", file.to_str().unwrap()])
        .output()
        .expect("agentd runs")
}

/// The lines of `agentd tools --running`, empty when it failed.
fn held_tools(file: &TempFile) -> String {
    let out = tools_running(file);
    match out.status.success() {
        true => String::from_utf8_lossy(&out.stdout).into_owned(),
        false => String::new(),
    }
}

/// The Python SDK's server, stateful and stateless: each held at 2026-07-28 with its five
/// tools; one added by a reload; SIGTERM drains and exits 0. The drain is given a minute, so
/// that a process that exits while `terminate` waits (at most 10 s) has drained, not given up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_server_is_held_reloaded_and_drained() {
    let stateful = peers::python(false);
    let stateless = peers::python_stateless(true);
    let head = "instance = \"py\"\n[lifecycle]\ndrain_timeout = \"60s\"\n";
    let file = TempFile::new(&config(head, &[("py", stateful.url.clone())]));
    let mut agentd = Daemon::run(&file);
    let connect = agentd.wait_for("mcp.connect", Some("py"));
    assert_eq!(connect["protocol"], "2026-07-28", "{connect}");
    assert_eq!(connect["tools"], 6, "{connect}");
    assert!(connect.get("reason").is_none(), "{connect}");

    file.write(&config(
        head,
        &[
            ("py", stateful.url.clone()),
            ("py-stateless", stateless.url.clone()),
        ],
    ));
    agentd.signal("HUP");
    let added = agentd.wait_for("mcp.connect", Some("py-stateless"));
    assert_eq!(added["reason"], "reload");
    assert_eq!(added["protocol"], "2026-07-28", "{added}");

    let status = agentd.terminate();
    assert!(status.success(), "{status:?}");
    assert_eq!(
        agentd.matching("mcp.connect.fail", None).count(),
        0,
        "{:?}",
        agentd.seen
    );
    assert_eq!(agentd.matching("mcp.disconnect", None).count(), 0);
    drop((stateful, stateless));
}

/// A server that does not answer the close: the drain gives up at `lifecycle.drain_timeout`
/// (1 s: not sooner, and long before the 30 s the server keeps silent, which `terminate`
/// does not wait for) and the process exits 0 all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_is_bounded_by_its_timeout() {
    let mut legacy = Options::default();
    legacy.modern = false;
    let server = ReferenceServer::start(legacy).await;
    server.script(
        "DELETE",
        Fault::Silence(Duration::from_secs(30)),
        Times::Once,
    );
    let file = TempFile::new(&config(
        "instance = \"drain\"\n[lifecycle]\ndrain_timeout = \"1s\"\n",
        &[("slow", server.url())],
    ));
    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.connect", Some("slow"));
    let started = Instant::now();
    let status = agentd.terminate();
    let took = started.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(server.log().iter().any(|l| l.http == http::Method::DELETE));
}

/// At `--log-level debug` the libraries' diagnostics are written in the same NDJSON, their
/// target as `event`; at the default level none is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn library_diagnostics_are_written_at_debug_alone() {
    let server = ReferenceServer::start(Options::default()).await;
    let file = TempFile::new(&config("instance = \"logs\"\n", &[("s", server.url())]));
    let diagnostics = |agentd: &Daemon| -> Vec<serde_json::Value> {
        let lines = agentd.seen.iter().map(|(_, line)| line.clone());
        lines
            .filter(|l| l["level"] == "debug" || l["level"] == "trace")
            .collect()
    };

    let mut agentd = Daemon::run_with(&file, &["--log-level", "debug"]);
    agentd.wait_for("mcp.connect", Some("s"));
    let negotiated = diagnostics(&agentd)
        .into_iter()
        .find(|l| l["event"] == "mcp_negotiate::dial" && l["message"] == "negotiated")
        .unwrap_or_else(|| panic!("no negotiation line: {:#?}", agentd.seen));
    assert_eq!(negotiated["instance"], "logs");
    assert!(negotiated["revision"].is_string(), "{negotiated}");
    let keys: Vec<&str> = negotiated
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for key in ["ts", "level", "event", "instance", "message"] {
        assert!(keys.contains(&key), "{negotiated}");
    }
    assert!(agentd.terminate().success());

    let mut agentd = Daemon::run(&file);
    agentd.wait_for("mcp.connect", Some("s"));
    assert!(agentd.terminate().success());
    assert_eq!(diagnostics(&agentd), Vec::<serde_json::Value>::new());
    assert!(
        agentd
            .seen
            .iter()
            .all(|(_, l)| l["event"].as_str().is_some_and(|e| !e.contains("::"))),
        "{:#?}",
        agentd.seen
    );
}
