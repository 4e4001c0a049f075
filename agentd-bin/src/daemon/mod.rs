//! `agentd run`: one connection per configured server, held until SIGINT or SIGTERM.
//!
//! Every server is held by a task of its own ([`held`](crate::daemon::server)), all dialed at start,
//! concurrently. A server that cannot be reached or refuses is dialed again 1 s after the
//! first failure, doubling to 60 s; when it answers it has joined (`mcp.joined`). A connected
//! server's changes are watched: a tool list change is logged (`mcp.tools_changed`) and takes
//! effect at the next reload; the listen's ups and downs are logged (`mcp.listen.*`). A
//! server that loses its session is dialed again 1 s later, doubling to 30 s, one server at
//! a time (`mcp.disconnect` and `mcp.connect` with reason `session_lost`).
//!
//! SIGHUP reloads: the file is read again; an invalid one is refused (`reload.refused`, with
//! the error) and the supervisor keeps running on the old configuration; else the servers
//! removed or changed are closed (`mcp.disconnect`, reason `reload`), the new or changed
//! ones dialed (`mcp.connect`, reason `reload`), and the others list their tools again (the
//! catalogue is rebuilt; a failed listing keeps the current one, `mcp.tools_refresh_failed`).
//!
//! With `webhooks.listen` set, the daemon's HTTP listener serves `GET /metrics` (bound once at
//! start; a reload does not move it), and says where (`http.listening`, with the address).
//!
//! At SIGINT or SIGTERM every connection is closed inside `lifecycle.drain_timeout`, and the
//! process exits 0.

pub(crate) mod schedule;
pub(crate) mod server;
mod subscriptions;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{self, Config};
use crate::daemon::server::{Handle, Shared, Stop};
use crate::events::hooks::Routes;
use crate::events::{Events, Feed};
use crate::telemetry::log::{Level, event};
use crate::telemetry::metrics::Metrics;

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
    // The listeners and their connections: stopped at shutdown, and drained with the servers.
    let shutdown = CancellationToken::new();
    let tasks = TaskTracker::new();
    let metrics = Arc::new(Metrics::default());
    let routes = Routes::default();
    // Bound first, served once the webhook routes are in place: a delivery that comes
    // early waits in the backlog instead of meeting an empty table.
    let listener = match config.listen {
        None => None,
        Some(addr) => match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => Some(listener),
            Err(e) => {
                eprintln!("agentd: cannot listen on {addr}: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    let listening = listener.as_ref().and_then(|l| l.local_addr().ok());
    // Bound before any server is dialed, so that it is there once one is connected.
    let socket = if config.grants.is_empty() {
        None
    } else {
        match crate::control::bind(&config.store_path) {
            Ok(socket) => Some(socket),
            Err(e) => {
                eprintln!(
                    "agentd: cannot bind the control socket in {}: {e}",
                    config.store_path.display()
                );
                return ExitCode::FAILURE;
            }
        }
    };
    let mut shared = Shared::new(&config.instance, metrics.clone());
    let mut held: BTreeMap<String, Handle> = config
        .servers
        .iter()
        .map(|server| {
            (
                server.name.clone(),
                Handle::start(&shared, server.clone(), None),
            )
        })
        .collect();
    let mut events =
        match Events::start(&config, listening, &feeds(&held), metrics.clone(), &routes) {
            Ok(events) => events,
            Err(e) => {
                eprintln!("agentd: cannot start MCP Events: {e}");
                if socket.is_some() {
                    let _ = std::fs::remove_file(crate::control::path(&config.store_path));
                }
                return ExitCode::FAILURE;
            }
        };
    // The events tools of whichever start of MCP Events is current, for the control socket.
    let (controls, current) = tokio::sync::watch::channel(events.as_ref().map(Events::control));
    let socket = socket.map(|socket| {
        crate::control::serve(socket, current, shutdown.clone(), tasks.clone());
        crate::control::path(&config.store_path)
    });
    if let (Some(listener), Some(bound)) = (listener, listening) {
        let instance: Arc<str> = config.instance.as_str().into();
        let prefix = crate::events::hooks::route_prefix(config.hooks_url.as_deref());
        crate::http::serve(
            listener,
            metrics.clone(),
            routes.clone(),
            prefix,
            instance,
            shutdown.clone(),
            tasks.clone(),
        );
        event(
            &config.instance,
            Level::Info,
            "http.listening",
            &[("addr", json!(bound.to_string()))],
        );
    }
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => {
                match config::load(&path, &|name| std::env::var(name).ok()) {
                    Ok(new) => {
                        // Every connection says who it is: a new name dials them all again.
                        if new.instance != config.instance {
                            shared = Shared::new(&new.instance, metrics.clone());
                            for (_, h) in std::mem::take(&mut held) {
                                drop(h.stop(Stop::Reload));
                            }
                        }
                        reload(&mut held, &new, &shared);
                        // Bindings start again on the new configuration, from their cursors;
                        // the ones dropped are forgotten with their records.
                        controls.send_replace(None);
                        if let Some(events) = events.take() {
                            let gone: Vec<_> = config
                                .bindings
                                .iter()
                                .filter(|b| !new.bindings.contains(b))
                                .cloned()
                                .collect();
                            events.stop_removing(&gone);
                        }
                        match Events::start(&new, listening, &feeds(&held), metrics.clone(), &routes) {
                            Ok(started) => {
                                events = started;
                                controls.send_replace(events.as_ref().map(Events::control));
                            }
                            Err(e) => event(&new.instance, Level::Warn, "reload.refused", &[
                                ("err", json!(format!("MCP Events: {e}"))),
                            ]),
                        }
                        config = new;
                    }
                    Err(e) => event(&config.instance, Level::Warn, "reload.refused", &[
                        ("err", json!(e.to_string())),
                    ]),
                }
            }
        }
    }
    // Nothing new is taken: the listeners stop accepting, open HTTP connections finish the
    // request they answer, and control connections close.
    shutdown.cancel();
    tasks.close();
    controls.send_replace(None);
    if let Some(events) = events {
        events.stop();
    }
    if let Some(socket) = socket {
        let _ = std::fs::remove_file(socket);
    }
    drain(
        held.into_values().map(|h| h.stop(Stop::Shutdown)),
        Some(&tasks),
        config.drain_timeout,
    )
    .await;
    ExitCode::SUCCESS
}

/// Waits for the server tasks to close their connections and for the listeners' tasks (a
/// closed tracker) to end, inside `bound` (`lifecycle.drain_timeout`); what is not done by
/// then is dropped with the process.
pub(crate) async fn drain(
    servers: impl Iterator<Item = JoinHandle<()>>,
    listeners: Option<&TaskTracker>,
    bound: Duration,
) {
    let servers: Vec<JoinHandle<()>> = servers.collect();
    let _ = tokio::time::timeout(bound, async {
        for task in servers {
            let _ = task.await;
        }
        if let Some(listeners) = listeners {
            listeners.wait().await;
        }
    })
    .await;
}

/// Closes the servers removed or changed, dials the new or changed ones, and lists the
/// tools of the others again: the catalogue is rebuilt.
fn reload(held: &mut BTreeMap<String, Handle>, new: &Config, shared: &Shared) {
    let gone: Vec<String> = held
        .iter()
        .filter(|(name, h)| {
            !new.servers
                .iter()
                .any(|s| s.name == **name && *s == h.server)
        })
        .map(|(name, _)| name.clone())
        .collect();
    for name in gone {
        if let Some(h) = held.remove(&name) {
            // The task logs mcp.disconnect and closes; it is not waited for.
            drop(h.stop(Stop::Reload));
        }
    }
    for server in &new.servers {
        match held.get(&server.name) {
            Some(kept) => kept.relist(),
            None => {
                let started = Handle::start(shared, server.clone(), Some("reload"));
                held.insert(server.name.clone(), started);
            }
        }
    }
}

/// What MCP Events reads of each held server.
fn feeds(servers: &BTreeMap<String, Handle>) -> BTreeMap<String, Feed> {
    servers
        .iter()
        .map(|(name, h)| (name.clone(), h.feed()))
        .collect()
}
