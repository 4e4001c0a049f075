//! `agentd run`: one connection per configured server, held until SIGINT or SIGTERM.
//!
//! Every server is dialed at start, concurrently. A server that cannot be reached or refuses
//! is dialed again 1 s after the first failure, doubling to 60 s; when it answers it has
//! joined (`mcp.joined`). A connected server's changes are watched: a tool list change is
//! logged (`mcp.tools_changed`) and takes effect at the next reload.
//!
//! SIGHUP reloads: the file is read again; an invalid one is refused (`reload.refused`, with
//! the error) and the supervisor keeps running on the old configuration; else the servers
//! removed or changed are closed (`mcp.disconnect`, reason `reload`), and the new or changed
//! ones dialed (`mcp.connect`, reason `reload`); the others are left as they are.
//!
//! With `webhooks.listen` set, the daemon's HTTP listener serves `GET /metrics` (bound once at
//! start; a reload does not move it), and says where (`http.listening`, with the address).
//!
//! At SIGINT or SIGTERM every connection is closed inside `lifecycle.drain_timeout`, and the
//! process exits 0.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use mcp_negotiate::{Change, Watch};
use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::commands::connect;
use crate::config::{self, Config, Server};
use crate::log::{Level, event};
use crate::metrics::Metrics;

/// The first wait before dialing a server that was down at start.
const JOIN_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between dials of a server that was down at start.
const JOIN_MAX: Duration = Duration::from_secs(60);

/// Why a held server is let go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Running,
    Shutdown,
    Reload,
}

/// One held server.
struct Held {
    server: Server,
    stop: watch::Sender<Stop>,
    task: JoinHandle<()>,
}

/// Runs the supervisor until SIGINT or SIGTERM, reloading `path` at SIGHUP, then drains.
pub(crate) async fn run(config: Config, path: PathBuf) -> ExitCode {
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        eprintln!("agentd: cannot listen for signals");
        return ExitCode::FAILURE;
    };
    let mut config = config;
    let metrics = Arc::new(Metrics::default());
    if let Some(addr) = config.listen {
        match crate::http::serve(addr, metrics.clone()).await {
            Ok(bound) => event(
                &config.instance,
                Level::Info,
                "http.listening",
                &[("addr", json!(bound.to_string()))],
            ),
            Err(e) => {
                eprintln!("agentd: cannot listen on {addr}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let mut held: BTreeMap<String, Held> = BTreeMap::new();
    for server in &config.servers {
        held.insert(
            server.name.clone(),
            hold(&config.instance, server.clone(), None, &metrics),
        );
    }
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => {
                match config::load(&path, &|name| std::env::var(name).ok()) {
                    Ok(new) => {
                        reload(&mut held, &new, &metrics);
                        config = new;
                    }
                    Err(e) => event(&config.instance, Level::Warn, "reload.refused", &[
                        ("err", json!(e.to_string())),
                    ]),
                }
            }
        }
    }
    let tasks: Vec<JoinHandle<()>> = held
        .into_values()
        .map(|h| {
            let _ = h.stop.send(Stop::Shutdown);
            h.task
        })
        .collect();
    // What is not closed by the drain timeout is dropped with the process.
    let _ = tokio::time::timeout(config.drain_timeout, async {
        for task in tasks {
            let _ = task.await;
        }
    })
    .await;
    ExitCode::SUCCESS
}

/// Closes the servers removed or changed, and dials the new or changed ones.
fn reload(held: &mut BTreeMap<String, Held>, new: &Config, metrics: &Arc<Metrics>) {
    held.retain(|name, h| {
        let keep = new
            .servers
            .iter()
            .any(|s| s.name == *name && *s == h.server);
        if !keep {
            let _ = h.stop.send(Stop::Reload);
        }
        keep
    });
    for server in &new.servers {
        if !held.contains_key(&server.name) {
            held.insert(
                server.name.clone(),
                hold(&new.instance, server.clone(), Some("reload"), metrics),
            );
        }
    }
}

fn hold(
    instance: &str,
    server: Server,
    reason: Option<&'static str>,
    metrics: &Arc<Metrics>,
) -> Held {
    let (stop, stopped) = watch::channel(Stop::Running);
    let task = tokio::spawn(held_server(
        instance.to_owned(),
        server.clone(),
        reason,
        stopped,
        metrics.clone(),
    ));
    Held { server, stop, task }
}

/// Holds one server: dials it (again, on the join schedule, while it is down), watches it,
/// and closes it when told to.
async fn held_server(
    instance: String,
    server: Server,
    reason: Option<&'static str>,
    mut stop: watch::Receiver<Stop>,
    metrics: Arc<Metrics>,
) {
    let instance = instance.as_str();
    let mut wait = JOIN_FIRST;
    let mut joined = false;
    let connection = loop {
        match connect(instance, &server).await {
            Ok(connection) => break Arc::new(connection),
            Err(e) => {
                let mut fields = vec![
                    ("server", json!(server.name)),
                    ("err", json!(mcp_wire::log_text(&e))),
                ];
                if let Some(reason) = reason.or(joined.then_some("joined")) {
                    fields.push(("reason", json!(reason)));
                }
                event(instance, Level::Warn, "mcp.connect.fail", &fields);
                metrics.connect_failed(&server.name);
                joined = true;
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    _ = stop.changed() => return,
                }
                wait = (wait * 2).min(JOIN_MAX);
            }
        }
    };
    let mut fields = vec![
        ("server", json!(server.name)),
        ("protocol", json!(connection.revision().as_str())),
        ("tools", json!(connection.catalog().tools().len())),
    ];
    if let Some(reason) = reason.or(joined.then_some("joined")) {
        fields.push(("reason", json!(reason)));
    }
    event(instance, Level::Info, "mcp.connect", &fields);
    if joined {
        event(
            instance,
            Level::Info,
            "mcp.joined",
            &[("server", json!(server.name))],
        );
    }
    let mut watch = Watch::new(connection.clone());
    let mut watching = true;
    while *stop.borrow() == Stop::Running {
        tokio::select! {
            change = watch.next(), if watching => match change {
                Ok(Some(Change::ToolsChanged)) => event(instance, Level::Info, "mcp.tools_changed", &[
                    ("server", json!(server.name)),
                    ("note", json!("takes effect at the next reload")),
                ]),
                Ok(Some(_)) => {}
                // No push channel, or it failed: nothing more to watch on this connection.
                Ok(None) | Err(_) => watching = false,
            },
            _ = stop.changed() => {}
        }
    }
    if *stop.borrow() == Stop::Reload {
        event(
            instance,
            Level::Info,
            "mcp.disconnect",
            &[("server", json!(server.name)), ("reason", json!("reload"))],
        );
    }
    let _ = connection.close().await;
}
