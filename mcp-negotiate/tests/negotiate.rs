//! The reference's "Negotiation" table end to end: the reference server scripted to answer
//! the probe (and `initialize`) each way, and a `Dialer` over the real transport.

use std::time::Duration;

use mcp_negotiate::{Client, Dialed, Dialer, Failed, Link, Reply, Start, Step};
use mcp_reference_server::support::accept_ada;
use mcp_reference_server::{Fault, Options, ReferenceServer, Times};
use mcp_transport::driver::Config;
use mcp_wire::Revision;
use serde_json::{Value, json};

fn supervisor(server: &ReferenceServer) -> Dialer {
    supervisor_with(server, Config::default())
}

fn supervisor_with(server: &ReferenceServer, config: Config) -> Dialer {
    let kind = Client::builder("my-client", "0.1.0").title("my-agent");
    kind.transport(config)
        .dialer(&server.url())
        .expect("a dialer")
}

async fn dial(server: &ReferenceServer) -> Result<Dialed, Failed> {
    supervisor(server).dial(Start::Probe).await
}

fn rpc(status: u16, code: i64, data: Option<Value>) -> Fault {
    Fault::RpcError {
        status,
        code,
        message: "refused".into(),
        data,
    }
}

/// Scripts the probe's answer once and dials.
async fn probe_answered(fault: Fault) -> (ReferenceServer, Result<Dialed, Failed>) {
    let server = ReferenceServer::start(Options::default()).await;
    server.script("server/discover", fault, Times::Once);
    let dialed = dial(&server).await;
    (server, dialed)
}

fn revision(dialed: &Result<Dialed, Failed>) -> Revision {
    dialed.as_ref().expect("connected").connected.revision
}

const LEGACY_DIAL: [&str; 3] = ["server/discover", "initialize", "notifications/initialized"];

#[tokio::test]
async fn a_modern_server_is_reached_by_the_probe_with_the_wire_shape_of_the_reference() {
    let server = ReferenceServer::start(Options::default()).await;
    let dialed = dial(&server).await.expect("connected");
    assert_eq!(dialed.connected.revision, Revision::V2026_07_28);
    assert!(matches!(dialed.link, Link::Modern { .. }));
    assert_eq!(server.methods(), ["server/discover"]);
    let probe = &server.log()[0];
    assert_eq!(probe.header("mcp-protocol-version"), Some("2026-07-28"));
    assert_eq!(probe.header("mcp-method"), Some("server/discover"));
    assert_eq!(probe.body["id"], json!(0));
    let meta = &probe.body["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"],
        json!({"name": "my-client", "version": "0.1.0", "title": "my-agent"})
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({})
    );
}

#[tokio::test]
async fn a_32022_naming_2026_07_28_asks_again_at_that_revision() {
    let data = json!({"supported": ["2026-07-28"], "requested": "2026-07-28"});
    let (server, dialed) = probe_answered(rpc(400, -32022, Some(data))).await;
    assert_eq!(revision(&dialed), Revision::V2026_07_28);
    assert_eq!(server.methods(), ["server/discover", "server/discover"]);
    let ids: Vec<Value> = server.log().iter().map(|l| l.body["id"].clone()).collect();
    assert_ne!(ids[0], ids[1], "a new id for the new request");
}

#[tokio::test]
async fn older_revisions_only_lead_to_initialize_at_the_newest_known() {
    let only_older = json!({"supported": ["2025-06-18", "2024-11-05"], "requested": "2026-07-28"});
    let (server, dialed) = probe_answered(rpc(400, -32022, Some(only_older))).await;
    assert_eq!(revision(&dialed), Revision::V2025_06_18);
    assert_eq!(server.methods(), LEGACY_DIAL);
    assert_eq!(
        server.log()[1].body["params"]["protocolVersion"],
        "2025-06-18"
    );

    let result = json!({"supportedVersions": ["2025-03-26", "1999-01-01"], "capabilities": {}});
    let (server, dialed) = probe_answered(Fault::Result(result)).await;
    assert_eq!(revision(&dialed), Revision::V2025_03_26);
    assert_eq!(server.methods(), LEGACY_DIAL);
}

#[tokio::test]
async fn a_32022_listing_nothing_leads_to_initialize_at_2025_11_25() {
    let (server, dialed) = probe_answered(rpc(400, -32022, Some(json!({"supported": []})))).await;
    assert_eq!(revision(&dialed), Revision::V2025_11_25);
    assert_eq!(server.methods(), LEGACY_DIAL);
}

#[tokio::test]
async fn refusals_fail_the_connect_naming_the_refusal() {
    let cases = [
        rpc(400, -32020, None),
        rpc(
            400,
            -32021,
            Some(json!({"requiredCapabilities": {"elicitation": {}}})),
        ),
        Fault::Status(401, None),
        rpc(400, -32022, Some(json!({"supported": ["1999-01-01"]}))),
        Fault::Result(json!({"supportedVersions": ["3000-01-01"], "capabilities": {}})),
    ];
    for fault in cases {
        let shown = format!("{fault:?}");
        let (server, dialed) = probe_answered(fault).await;
        let failed = dialed.expect_err(&shown);
        assert_eq!(failed.refusals.len(), 1, "{shown}");
        assert!(
            failed.to_string().starts_with("server/discover refused"),
            "{failed}"
        );
        assert_eq!(
            server.methods(),
            ["server/discover"],
            "{shown}: nothing more is sent"
        );
    }
    // A server never reached.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kind = Client::builder("my-client", "0.1.0").title("a");
    let dialer = kind
        .transport(Config::default())
        .dialer(&format!("http://127.0.0.1:{port}/mcp"))
        .unwrap();
    let failed = dialer.dial(Start::Probe).await.expect_err("unreachable");
    assert!(
        matches!(failed.refusals[0].reply, Reply::Unreachable(_)),
        "{failed}"
    );
}

#[tokio::test]
async fn anything_else_leads_to_initialize_at_2025_11_25() {
    let cases = [
        rpc(404, -32601, None),
        rpc(200, -32601, None),
        Fault::Status(403, None),
        Fault::Status(400, None),
        Fault::Status(500, None),
        Fault::Status(500, Some(json!({"oops": true}))),
        Fault::Status(
            502,
            Some(json!({"jsonrpc": "2.0", "error": {"code": -32603, "message": "down"}})),
        ),
        Fault::Result(json!({})),
        Fault::Accepted,
    ];
    for fault in cases {
        let shown = format!("{fault:?}");
        let (server, dialed) = probe_answered(fault).await;
        assert_eq!(revision(&dialed), Revision::V2025_11_25, "{shown}");
        assert_eq!(server.methods(), LEGACY_DIAL, "{shown}");
        let initialize = &server.log()[1];
        assert_eq!(
            initialize.header("mcp-protocol-version"),
            None,
            "no version header on initialize"
        );
        assert_eq!(initialize.body["params"]["protocolVersion"], "2025-11-25");
    }
}

/// In virtual time: the probe is given up at the connection's timeout, not before.
#[tokio::test(start_paused = true)]
async fn a_silent_probe_falls_back_after_the_connection_timeout() {
    let server = ReferenceServer::start(Options::default()).await;
    server.script(
        "server/discover",
        Fault::Silence(Duration::from_secs(5)),
        Times::Once,
    );
    let silence = Duration::from_millis(300);
    let mut config = Config::default();
    config.silence = silence;
    let started = tokio::time::Instant::now();
    let dialed = supervisor_with(&server, config).dial(Start::Probe).await;
    assert_eq!(revision(&dialed), Revision::V2025_11_25);
    assert_eq!(started.elapsed(), silence, "bounded by the timeout");
}

#[tokio::test]
async fn a_server_that_predates_discover_is_reached_through_initialize() {
    let mut options = Options::default();
    options.modern = false;
    let server = ReferenceServer::start(options).await;
    let dialed = dial(&server).await.expect("connected");
    assert_eq!(dialed.connected.revision, Revision::V2025_11_25);
    assert!(matches!(dialed.link, Link::Legacy(_)));
    assert_eq!(server.methods(), LEGACY_DIAL);
}

#[tokio::test]
async fn a_fallback_refused_too_names_both_refusals_and_sends_nothing_twice() {
    let server = ReferenceServer::start(Options::default()).await;
    server.script("server/discover", rpc(404, -32601, None), Times::Once);
    server.script("initialize", rpc(400, -32602, None), Times::Once);
    let failed = dial(&server).await.expect_err("both refused");
    assert_eq!(failed.refusals.len(), 2);
    let text = failed.to_string();
    assert!(
        text.contains("server/discover refused") && text.contains("initialize refused"),
        "{text}"
    );
    assert_eq!(server.methods(), ["server/discover", "initialize"]);
}

#[tokio::test]
async fn a_refused_initialize_probes_when_the_server_answered_an_rpc_error_or_a_4xx() {
    // A server that moved to 2026-07-28 refuses `initialize` (no version header: -32020).
    let mut options = Options::default();
    options.legacy = false;
    let server = ReferenceServer::start(options).await;
    let start = Start::Like(Step::Initialize {
        revision: Revision::V2025_11_25,
    });
    let dialed = supervisor(&server).dial(start).await.expect("connected");
    assert_eq!(dialed.connected.revision, Revision::V2026_07_28);
    assert_eq!(server.methods(), ["initialize", "server/discover"]);

    // A 5xx is not probed again.
    let server = ReferenceServer::start(Options::default()).await;
    server.script("initialize", Fault::Status(503, None), Times::Once);
    let failed = supervisor(&server).dial(start).await.expect_err("refused");
    assert_eq!(failed.refusals.len(), 1);
    assert_eq!(server.methods(), ["initialize"]);
}

#[tokio::test]
async fn a_redial_starts_the_way_the_connection_it_follows_got_there() {
    let server = ReferenceServer::start(Options::default()).await;
    server.script("server/discover", rpc(404, -32601, None), Times::Once);
    let dialer = supervisor(&server);
    let first = dialer.dial(Start::Probe).await.expect("connected");
    assert_eq!(
        first.connected.reached_by,
        Step::Initialize {
            revision: Revision::V2025_11_25
        }
    );
    let again = dialer
        .dial(Start::Like(first.connected.reached_by))
        .await
        .expect("re-dialed");
    assert_eq!(again.connected.revision, Revision::V2025_11_25);
    assert_eq!(
        server.methods(),
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "initialize",
            "notifications/initialized"
        ]
    );
}

#[tokio::test]
async fn a_worker_says_name_and_version_and_declares_elicitation() {
    let server = ReferenceServer::start(Options::default()).await;
    let kind = Client::builder("my-client", "0.1.0").elicitation(accept_ada);
    let dialer = kind
        .transport(Config::default())
        .dialer(&server.url())
        .unwrap();
    dialer.dial(Start::Probe).await.expect("connected");
    let meta = &server.log()[0].body["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/clientInfo"],
        json!({"name": "my-client", "version": "0.1.0"})
    );
    assert_eq!(
        meta["io.modelcontextprotocol/clientCapabilities"],
        json!({"elicitation": {"form": {}}})
    );

    // The legacy handshake of a worker: the same, in `initialize`.
    server.script("server/discover", rpc(404, -32601, None), Times::Once);
    dialer.dial(Start::Probe).await.expect("connected");
    let log = server.log();
    let initialize = log
        .iter()
        .find(|l| l.method.as_deref() == Some("initialize"))
        .unwrap();
    assert_eq!(
        initialize.body["params"]["capabilities"],
        json!({"elicitation": {"form": {}}})
    );
    assert_eq!(
        initialize.body["params"]["clientInfo"]["title"],
        Value::Null
    );
}
