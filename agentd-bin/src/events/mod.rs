//! MCP Events in the daemon: the configured bindings and the runtime subscriptions, on a
//! runtime of four worker threads of its own (never the supervisor's): a task per server
//! lists its types over the server's held connection, and a task per binding sends its
//! requests and takes its deliveries. The pure machines are `mcp_events`' (`Lister`,
//! `Binding`, within the [`limits`] of the reference) and `agentd_tools`' (`Registry`); this
//! module sends what they ask for (each `events/*` request bounded at 30 s), commits what
//! they hand over to the store ([`crate::store`], `<store.path>/agentd.sqlite3`), and turns
//! what they report into log lines and metrics ([`report`]).
//!
//! A binding can take webhook deliveries when `webhooks.url` is set (or, without it, when the
//! listener is on loopback: `http://<its address>`): its callback is
//! `<webhooks.url>/hooks/_mcp/<key>`, its secret made once from the CSPRNG and kept in the
//! store; the receiver ([`hooks`]) hands each checked delivery to the binding's task, which
//! takes it as the binding says and answers once the store has it.
//!
//! The modules import downward: [`subscriptions`] (the bindings at work, configured and
//! made at run time) starts a task per server ([`server`]), which starts a task per binding
//! ([`binding`]); all of them share [`shared`], and say what happened through [`report`].

mod binding;
pub(crate) mod hooks;
mod report;
mod server;
mod shared;
mod subscriptions;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

pub(crate) use self::shared::{Error, Feed, Report, Reports};
use self::shared::{Shared, limits};
pub(crate) use self::subscriptions::Control;
use crate::config::Config;
use crate::store::Store;
use crate::telemetry::metrics::Metrics;
use hooks::Routes;

/// `events/*` requests run on this many worker threads of their own.
const WORKER_THREADS: usize = 4;

/// The most threads MCP Events' runtime starts for blocking work (name lookups).
const BLOCKING_THREADS: usize = 4;

/// MCP Events at work: its runtime (built once, kept until exit), the daemon's store, and
/// the bindings and runtime subscriptions of the configuration in force.
#[derive(Debug)]
pub(crate) struct Events {
    runtime: tokio::runtime::Runtime,
    control: Control,
}

impl Events {
    /// Whether `config` gives MCP Events anything to do: bindings or grants.
    pub(crate) fn wanted(config: &Config) -> bool {
        !config.bindings.is_empty() || !config.grants.is_empty()
    }

    /// Builds the runtime, and starts the bindings of `config` and the runtime subscriptions
    /// kept in `store` (the daemon's, which it keeps open), on the connections of `servers`.
    /// Fails when a binding cannot be read from the store.
    ///
    /// Not to be dropped before it resolves: the runtime it builds must not be dropped on an
    /// async thread.
    pub(crate) async fn start(
        config: &Config,
        store: Store,
        listening: Option<SocketAddr>,
        servers: &BTreeMap<String, Feed>,
        metrics: Arc<Metrics>,
        routes: &Routes,
        reports: Reports,
    ) -> Result<Self, Error> {
        routes.write().unwrap_or_else(|e| e.into_inner()).clear();
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKER_THREADS)
            .max_blocking_threads(BLOCKING_THREADS)
            .thread_name("agentd-events")
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(e) => return Err(Error::Runtime(e)),
        };
        let ctx = Shared {
            instance: config.instance.as_str().into(),
            metrics,
            store: store.clone(),
            limits: limits(config),
            reports,
        };
        let control = Control::new(ctx, runtime.handle().clone(), routes.clone());
        if let Err(e) = control.start(config, listening, servers).await {
            control.close().await;
            // Not dropped here: the caller may be on an async thread.
            runtime.shutdown_background();
            return Err(e);
        }
        runtime.spawn(control.clone().expire());
        Ok(Self { runtime, control })
    }

    /// Takes a new configuration: the bindings kept run on, the ones removed stop and are
    /// forgotten with their records (`mcp.events.removed`, reason `reload`), the new ones
    /// start; a server dialed afresh has its bindings started again on its new connection;
    /// runtime subscriptions whose server or grant is gone, or that a configured binding now
    /// is, end. `store.path` stays the one the daemon started with.
    pub(crate) async fn reload(
        &self,
        config: &Config,
        listening: Option<SocketAddr>,
        servers: &BTreeMap<String, Feed>,
    ) {
        self.control.reload(config, listening, servers).await;
    }

    /// The library calls of runtime subscriptions, for the tools.
    pub(crate) fn control(&self) -> Control {
        self.control.clone()
    }

    /// Stops every binding and the runtime, then writes an index not kept yet; the daemon
    /// closes the store after. Subscriptions are not released: the next start goes on from
    /// the stored cursors. A commit under way finishes (it is one transaction either way).
    ///
    /// The runtime is shut down before this returns, so the future it returns may be cut
    /// (a drain's bound) at any point.
    pub(crate) fn stop(self) -> impl Future<Output = ()> + use<> {
        let Self { runtime, control } = self;
        control.cancel();
        runtime.shutdown_background();
        async move { control.close().await }
    }
}

#[cfg(test)]
mod tests;
