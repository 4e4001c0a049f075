//! Dialing a configured server as the supervisor does, and the log lines a dial makes.

use mcp_negotiate::{Catalog, Connection, Dialer, Error, Kind, Recovery};
use mcp_transport::driver::Config as TransportConfig;
use serde_json::{Value, json};

use crate::config::Server;
use crate::log::{Level, event};
use crate::metrics::Metrics;

/// Why a dial did not end with a connection.
#[derive(Debug)]
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

/// Dials one configured server with the supervisor's `clientInfo` and the server's timeout
/// and headers, and lists its tools. A lost legacy session is dialed again as `recovery`
/// says.
pub(crate) async fn connect(
    instance: &str,
    server: &Server,
    recovery: Recovery,
) -> Result<Connection, DialError> {
    let mut transport = TransportConfig::default();
    transport.headers = server.headers.clone();
    transport.silence = server.timeout;
    let kind = Kind::Supervisor {
        instance: instance.to_owned(),
    };
    let dialer = Dialer::new(&server.url, transport, kind)
        .map_err(|e| DialError::Handshake(Error::Transport(e)))?
        .with_recovery(recovery);
    Connection::connect(dialer).await.map_err(|e| match e {
        e @ Error::Negotiation(_) => DialError::Handshake(e),
        e => DialError::Catalogue(e),
    })
}

/// `mcp.connect` (with `reason` when it is not the first dial), then `mcp.tool.dropped` for
/// each tool the listing left out.
pub(crate) fn connected(
    instance: &str,
    server: &str,
    connection: &Connection,
    reason: Option<&str>,
) {
    let catalog = connection.catalog();
    let mut fields = vec![
        ("server", json!(server)),
        ("protocol", json!(connection.revision().as_str())),
        ("tools", json!(catalog.tools().len())),
    ];
    if let Some(reason) = reason {
        fields.push(("reason", json!(reason)));
    }
    event(instance, Level::Info, "mcp.connect", &fields);
    dropped(instance, server, &catalog);
}

/// `mcp.tool.dropped` for each tool a listing left out.
pub(crate) fn dropped(instance: &str, server: &str, catalog: &Catalog) {
    for dropped in catalog.dropped() {
        let reason = dropped.reason.to_string();
        event(
            instance,
            Level::Warn,
            "mcp.tool.dropped",
            &[
                ("server", json!(server)),
                ("tool", json!(mcp_wire::log_text(&dropped.tool))),
                ("reason", json!(mcp_wire::log_text(&reason))),
            ],
        );
    }
}

/// `mcp.connect.fail` (with `reason` when it is not the first dial), counted in
/// `agent_mcp_connect_failures_total` when there are metrics.
pub(crate) fn failed(
    instance: &str,
    server: &str,
    err: &str,
    reason: Option<&str>,
    metrics: Option<&Metrics>,
) {
    let mut fields: Vec<(&str, Value)> = vec![
        ("server", json!(server)),
        ("err", json!(mcp_wire::log_text(err))),
    ];
    if let Some(reason) = reason {
        fields.push(("reason", json!(reason)));
    }
    event(instance, Level::Warn, "mcp.connect.fail", &fields);
    if let Some(metrics) = metrics {
        metrics.connect_failed(server);
    }
}
