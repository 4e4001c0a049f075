//! `agentd run`: one connection per configured server, held until SIGINT or SIGTERM.
//!
//! Every server is dialed at start, concurrently. A server that cannot be reached or refuses
//! is dialed again 1 s after the first failure, doubling to 60 s; when it answers it has
//! joined (`mcp.joined`). A connected server's changes are watched: a tool list change is
//! logged (`mcp.tools_changed`) and takes effect at the next reload. At SIGINT or SIGTERM
//! every connection is closed inside `lifecycle.drain_timeout`, and the process exits 0.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use mcp_negotiate::{Change, Watch};
use serde_json::json;
use tokio::task::JoinSet;

use crate::commands::connect;
use crate::config::{Config, Server};
use crate::log::{Level, event};

/// The first wait before dialing a server that was down at start.
const JOIN_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between dials of a server that was down at start.
const JOIN_MAX: Duration = Duration::from_secs(60);

/// Runs the supervisor until a signal, then drains.
pub(crate) async fn run(config: Config) -> ExitCode {
    let config = Arc::new(config);
    let (closing, closed) = tokio::sync::watch::channel(false);
    let mut servers = JoinSet::new();
    for server in config.servers.iter().cloned() {
        servers.spawn(hold(config.clone(), server, closed.clone()));
    }
    wait_for_signal().await;
    let _ = closing.send(true);
    // What is not closed by the drain timeout is dropped with the process.
    let _ = tokio::time::timeout(config.drain_timeout, async {
        while servers.join_next().await.is_some() {}
    })
    .await;
    ExitCode::SUCCESS
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// Holds one server: dials it (again, on the join schedule, while it is down), watches it,
/// and closes it when the supervisor closes.
async fn hold(config: Arc<Config>, server: Server, mut closed: tokio::sync::watch::Receiver<bool>) {
    let instance = config.instance.as_str();
    let mut wait = JOIN_FIRST;
    let mut first = true;
    let connection = loop {
        match connect(instance, &server).await {
            Ok(connection) => break Arc::new(connection),
            Err(e) => {
                let mut fields = vec![
                    ("server", json!(server.name)),
                    ("err", json!(mcp_wire::log_text(&e))),
                ];
                if !first {
                    fields.push(("reason", json!("joined")));
                }
                event(instance, Level::Warn, "mcp.connect.fail", &fields);
                first = false;
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    _ = closed.changed() => return,
                }
                wait = (wait * 2).min(JOIN_MAX);
            }
        }
    };
    let tools = connection.catalog().tools().len();
    let mut fields = vec![
        ("server", json!(server.name)),
        ("protocol", json!(connection.revision().as_str())),
        ("tools", json!(tools)),
    ];
    if !first {
        fields.push(("reason", json!("joined")));
    }
    event(instance, Level::Info, "mcp.connect", &fields);
    if !first {
        event(
            instance,
            Level::Info,
            "mcp.joined",
            &[("server", json!(server.name))],
        );
    }
    let mut watch = Watch::new(connection.clone());
    loop {
        tokio::select! {
            change = watch.next() => match change {
                Ok(Some(Change::ToolsChanged)) => event(instance, Level::Info, "mcp.tools_changed", &[
                    ("server", json!(server.name)),
                    ("note", json!("takes effect at the next reload")),
                ]),
                Ok(Some(_)) => {}
                // No push channel, or it failed: nothing more to watch on this connection.
                Ok(None) | Err(_) => {
                    let _ = closed.changed().await;
                    break;
                }
            },
            _ = closed.changed() => break,
        }
    }
    let _ = connection.close().await;
}
