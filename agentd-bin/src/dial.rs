//! Dialing a configured server as the supervisor does, and the log lines a dial makes.

use std::time::Duration;

use mcp_negotiate::{Catalog, Client, ClientBuilder, Error, Recovery};
use mcp_transport::driver::{Elicitor, Unserved};

use crate::config::Server;
use crate::telemetry::catalogue::connections::{self, Dial};
use crate::telemetry::metrics::Metrics;

/// Why a dial did not end with a connection.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum DialError {
    /// No negotiated connection: the server could not be reached or refused, or the
    /// configuration cannot make a request.
    Handshake(Error),
    /// It negotiated, but its tools could not be listed.
    Catalogue(Error),
}

impl std::fmt::Display for DialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Handshake(e) | Self::Catalogue(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DialError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Handshake(e) | Self::Catalogue(e) => Some(e),
        }
    }
}

/// What agentd calls itself in `clientInfo`.
pub(crate) const CLIENT_NAME: &str = "agentd";

/// How long a person has to answer a server's elicitation; then the answer is cancel.
pub(crate) const ELICITATION_TIMEOUT: Duration = Duration::from_secs(300);

/// The fixed timeout of a turn worker's or subagent's connection.
pub(crate) const WORKER_TIMEOUT: Duration = Duration::from_secs(60);

/// agentd's `clientInfo` name and version, with the server's configured headers.
fn agentd(server: &Server) -> ClientBuilder {
    // Sampling, roots and tasks are not declared: a server request for them is dropped.
    let builder =
        Client::builder(CLIENT_NAME, env!("CARGO_PKG_VERSION")).unserved_requests(Unserved::Drop);
    server
        .headers
        .iter()
        .fold(builder, |builder, (name, value)| {
            builder.header(name, value)
        })
}

/// The supervisor's client (the reference's "What agentd says about itself"): `clientInfo`
/// with the instance as `title`, no capabilities, the server's timeout and headers, a lost
/// legacy session dialed again as `recovery` says.
pub(crate) fn supervisor(instance: &str, server: &Server, recovery: Recovery) -> ClientBuilder {
    agentd(server)
        .title(instance)
        .timeout(server.timeout)
        .recovery(recovery)
}

/// A turn worker's or subagent's client: `clientInfo` without a title, the elicitation
/// capability answered by `elicitor` (300 s per question, then cancel), a fixed 60 s
/// timeout, the server's headers.
pub(crate) fn worker(server: &Server, elicitor: impl Elicitor + 'static) -> ClientBuilder {
    agentd(server)
        .elicitation(elicitor)
        .elicitation_timeout(ELICITATION_TIMEOUT)
        .timeout(WORKER_TIMEOUT)
}

/// Dials one configured server with the supervisor's client, and lists its tools.
pub(crate) async fn connect(
    instance: &str,
    server: &Server,
    recovery: Recovery,
) -> Result<Client, DialError> {
    let dialer = supervisor(instance, server, recovery)
        .dialer(&server.url)
        .map_err(DialError::Handshake)?;
    Client::connect(dialer).await.map_err(|e| match e {
        e @ Error::Negotiation(_) => DialError::Handshake(e),
        e => DialError::Catalogue(e),
    })
}

/// `mcp.connect` (with `reason` when it is not the first dial), then `mcp.tool.dropped` for
/// each tool the listing left out.
pub(crate) fn connected(instance: &str, server: &str, connection: &Client, reason: Option<Dial>) {
    let catalog = connection.catalog();
    let protocol = connection.revision();
    let tools = catalog.tools().len();
    connections::connect(instance, server, protocol.as_str(), tools, reason);
    dropped(instance, server, &catalog);
}

/// `mcp.tool.dropped` for each tool a listing left out.
pub(crate) fn dropped(instance: &str, server: &str, catalog: &Catalog) {
    for dropped in catalog.dropped() {
        let reason = dropped.reason.to_string();
        connections::tool_dropped(instance, server, &dropped.tool, &reason);
    }
}

/// `mcp.connect.fail` (with `reason` when it is not the first dial), counted in
/// `agent_mcp_connect_failures_total` when there are metrics.
pub(crate) fn failed(
    instance: &str,
    server: &str,
    err: &str,
    reason: Option<Dial>,
    metrics: Option<&Metrics>,
) {
    connections::connect_fail(instance, server, err, reason);
    if let Some(metrics) = metrics {
        metrics.connect_failed(server);
    }
}

#[cfg(test)]
mod tests {
    use mcp_reference_server::{Fault, Options, ReferenceServer, Times};
    use mcp_wire::{ElicitAction, ElicitRequestParams, ElicitResult};
    use serde_json::json;

    use super::*;

    fn server() -> Server {
        Server {
            name: "s".into(),
            url: "http://127.0.0.1:9/mcp".into(),
            timeout: Duration::from_secs(5),
            headers: vec![("Authorization".into(), "Bearer t".into())],
            tags: Default::default(),
        }
    }

    #[test]
    fn the_supervisor_names_its_instance_and_declares_nothing() {
        let dialer = supervisor("my-agent", &server(), Recovery::ByOwner)
            .dialer("http://127.0.0.1:9/mcp")
            .unwrap();
        assert_eq!(dialer.client_info().name, "agentd");
        assert_eq!(dialer.client_info().title.as_deref(), Some("my-agent"));
        assert!(dialer.capabilities().as_map().is_empty());
        assert_eq!(dialer.features().unserved(), Unserved::Drop);
        assert_eq!(dialer.timeout(), Duration::from_secs(5));
        assert_eq!(dialer.recovery(), Recovery::ByOwner);
    }

    #[test]
    fn a_worker_declares_elicitation_and_waits_60_seconds_whatever_the_server_says() {
        let decline = |_: ElicitRequestParams| async { ElicitResult::new(ElicitAction::Decline) };
        let dialer = worker(&server(), decline)
            .dialer("http://127.0.0.1:9/mcp")
            .unwrap();
        assert_eq!(dialer.client_info().name, "agentd");
        assert_eq!(dialer.client_info().title, None);
        assert!(dialer.capabilities().elicitation_form());
        assert_eq!(dialer.features().unserved(), Unserved::Drop);
        assert_eq!(dialer.timeout(), WORKER_TIMEOUT);
        assert_eq!(WORKER_TIMEOUT, Duration::from_secs(60));
    }

    /// The server requests agentd declares nothing for.
    const UNDECLARED: [(&str, &str); 3] = [
        (
            "sampling/createMessage",
            r#"{"messages": [], "maxTokens": 10}"#,
        ),
        ("roots/list", "{}"),
        ("tasks/get", r#"{"taskId": "t-1"}"#),
    ];

    /// Both presets: the supervisor's and a worker's.
    fn presets() -> [(&'static str, ClientBuilder); 2] {
        let decline = |_: ElicitRequestParams| async { ElicitResult::new(ElicitAction::Decline) };
        [
            ("supervisor", supervisor("t", &server(), Recovery::ByOwner)),
            ("worker", worker(&server(), decline)),
        ]
    }

    /// In virtual time: at 2025-11-25 a server's sampling, roots and tasks requests, on the
    /// stream of a call, are dropped, not answered -32601; the call goes on.
    #[tokio::test(start_paused = true)]
    async fn undeclared_server_requests_are_dropped_on_a_legacy_connection() {
        let mut options = Options::default();
        options.modern = false;
        let server = ReferenceServer::start(options).await;
        for (preset, builder) in presets() {
            let client = builder.connect(&server.url()).await.expect("connected");
            for (method, params) in UNDECLARED {
                let params: serde_json::Value = serde_json::from_str(params).unwrap();
                let arguments = json!({"method": method, "params": params, "wait_ms": 1000});
                let result = client.call_tool("ask", arguments).await;
                let result = result.unwrap_or_else(|e| panic!("{preset} {method}: {e}"));
                let text = serde_json::to_value(&result).unwrap()["content"][0]["text"].clone();
                assert_eq!(text, "no answer", "{preset} {method}");
            }
        }
        let log = server.log();
        let mut answers = log
            .iter()
            .filter(|l| l.body.get("id").is_some() && l.method.is_none());
        assert!(answers.next().is_none(), "{log:?}");
    }

    /// At 2026-07-28 the same requests in an `input_required` round cannot be answered: the
    /// call fails, naming the method, and is not retried.
    #[tokio::test(start_paused = true)]
    async fn undeclared_input_requests_are_unanswerable_on_a_modern_connection() {
        let server = ReferenceServer::start(Options::default()).await;
        for (preset, builder) in presets() {
            let client = builder.connect(&server.url()).await.expect("connected");
            assert_eq!(client.revision().era(), mcp_wire::Era::Modern);
            for (method, params) in UNDECLARED {
                let params: serde_json::Value = serde_json::from_str(params).unwrap();
                let asked = json!({
                    "resultType": "input_required",
                    "inputRequests": {"q": {"method": method, "params": params}},
                    "requestState": "s",
                });
                server.script("tools/call", Fault::Result(asked), Times::Once);
                let calls = || {
                    let methods = server.methods();
                    methods.iter().filter(|m| *m == "tools/call").count()
                };
                let before = calls();
                let result = client.call_tool("ask", json!({})).await;
                assert_eq!(
                    result.map(|_| ()),
                    Err(Error::Unanswerable {
                        method: method.into()
                    }),
                    "{preset} {method}"
                );
                assert_eq!(calls(), before + 1, "{preset} {method}: not retried");
            }
        }
    }
}
