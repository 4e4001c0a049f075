//! What every task of MCP Events shares: the daemon's instance, metrics, store and bounds
//! ([`Shared`]), and the bound on each `events/*` request.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mcp_events::Limits;
use mcp_events::binding::{Binding, Failure, Listing};
use mcp_negotiate::Client;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;

use super::hooks::Deliveries;
use crate::config::Config;
use crate::store::{self, Store};
use crate::telemetry::metrics::Metrics;

/// Each `events/*` request is bounded at this.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What every task shares.
#[derive(Debug, Clone)]
pub(super) struct Shared {
    pub(super) instance: Arc<str>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) store: Store,
    pub(super) limits: Limits,
    pub(super) reports: Reports,
}

/// What MCP Events tells the supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum Report {
    /// The store did not take a commit of MCP Events (`degraded`), or took one again after
    /// that.
    Store {
        /// Whether its last commit failed.
        degraded: bool,
    },
    /// Occurrences were appended into the instruction's stream
    /// ([`STREAM`](agentd_tools::instruction::STREAM)): the instruction is read again.
    Instruction {
        /// The server they came from.
        server: String,
        /// Their type.
        event_type: String,
    },
    /// Occurrences were appended to `stream`: the workflows' event starts on it read it.
    Appended {
        /// The stream.
        stream: String,
    },
}

/// Where MCP Events reports: each change of the store's health, once, and each commit into
/// the instruction's stream.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reports {
    to: Option<mpsc::UnboundedSender<Report>>,
    degraded: Arc<AtomicBool>,
}

impl Reports {
    /// Reports sent to `to`.
    pub(crate) fn new(to: mpsc::UnboundedSender<Report>) -> Self {
        Self {
            to: Some(to),
            degraded: Arc::default(),
        }
    }

    /// A commit was taken (`ok`) or not: a change from the last is reported.
    pub(super) fn committed(&self, ok: bool) {
        let was = self.degraded.swap(!ok, Ordering::Relaxed);
        if was == ok
            && let Some(to) = &self.to
        {
            let _ = to.send(Report::Store { degraded: !ok });
        }
    }

    /// Occurrences were appended to `stream`.
    pub(super) fn appended(&self, stream: &str) {
        if let Some(to) = &self.to {
            let stream = stream.to_owned();
            let _ = to.send(Report::Appended { stream });
        }
    }

    /// Occurrences of `event_type` from `server` were appended into the instruction's stream.
    pub(super) fn instruction(&self, server: &str, event_type: &str) {
        if let Some(to) = &self.to {
            let _ = to.send(Report::Instruction {
                server: server.to_owned(),
                event_type: event_type.to_owned(),
            });
        }
    }
}

/// A binding handed to its server's task: the machine, its deliveries, the signal that ends
/// it (a runtime subscription released), and the one that stops it (a reload, the exit).
pub(super) type Armed = (Binding, Deliveries, Ends);

/// What ends or stops a binding's task, as the task holds it.
#[derive(Debug)]
pub(super) struct Ends {
    /// Ends it: the task releases its webhook subscription and forgets its cursor, then
    /// answers on the sender it was given.
    pub(super) end: mpsc::Receiver<oneshot::Sender<()>>,
    /// Stops it where it is, its cursor kept: a request under way is abandoned, a commit
    /// under way finishes.
    pub(super) stop: CancellationToken,
    /// Dropped when the task is gone, however it went.
    pub(super) gone: oneshot::Sender<()>,
}

/// `work`, unless `stop` comes first.
pub(super) async fn unless<T>(
    stop: &CancellationToken,
    work: impl Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        biased;
        () = stop.cancelled() => None,
        done = work => Some(done),
    }
}

/// A server's connection, as its holder hands it on: `None` until the first dial answers,
/// marked changed at every re-dial.
pub(super) type Connections = watch::Receiver<Option<Arc<Client>>>;

pub(super) fn far() -> Instant {
    Instant::now() + Duration::from_secs(86_400)
}

/// A request bounded at 30 s, its failure in the machine's words.
pub(super) async fn request<T>(
    call: impl Future<Output = Result<T, mcp_negotiate::Error>>,
) -> Result<T, Failure> {
    match timeout(REQUEST_TIMEOUT, call).await {
        Err(_) => Err(Failure::Timeout),
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(mcp_negotiate::Error::Rpc(e))) => Err(Failure::Rpc(e)),
        Ok(Err(mcp_negotiate::Error::Transport(mcp_transport::Error::Reply(
            mcp_transport::reply::Failure::Status { status, .. },
        )))) => Err(Failure::Status(status)),
        Ok(Err(e)) => Err(Failure::Transport(e.to_string())),
    }
}

/// What listing a server's types last came to, shared with its bindings.
#[derive(Debug)]
pub(super) enum Listed {
    Types(Vec<mcp_wire::events::EventType>),
    MethodNotFound,
    TooLarge,
}

impl Listed {
    pub(super) fn as_listing(&self) -> Listing<'_> {
        match self {
            Self::Types(types) => Listing::Types(types),
            Self::MethodNotFound => Listing::MethodNotFound,
            Self::TooLarge => Listing::TooLarge,
        }
    }
}

/// What the server's latest listing came to, once there is one.
pub(super) type Listings = watch::Receiver<Option<Arc<Listed>>>;

/// Whether `connection` reached 2026-07-28, and whether its server declares the events
/// extension.
pub(super) fn facts(connection: &Client) -> (bool, bool) {
    (
        connection.revision().era() == mcp_wire::Era::Modern,
        connection.capabilities().events().is_some(),
    )
}

/// What MCP Events reads of a held server.
#[derive(Debug, Clone)]
pub(crate) struct Feed {
    /// Its connection: `None` until the first dial answers, marked changed at every re-dial.
    pub(crate) connections: Connections,
    /// Bumped at each `notifications/events/list_changed` the server sends.
    pub(crate) changed: watch::Receiver<u64>,
}

/// The bounds and schedules of MCP Events: the reference's, an occurrence (or a webhook
/// body) of 256 KiB and at most `store.max_value_bytes`.
pub(super) fn limits(config: &Config) -> Limits {
    let mut limits = Limits::default();
    limits.occurrence_max = limits.occurrence_max.min(config.max_value_bytes);
    limits
}

/// Why MCP Events could not start, or a binding could not be armed.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum Error {
    /// The store failed.
    Store(store::Error),
    /// No webhook secret could be made (the operating system's CSPRNG failed).
    Secret(mcp_events::Error),
    /// The runtime's threads could not be started.
    Runtime(std::io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Store(e) => e.fmt(f),
            Self::Secret(e) => write!(f, "a webhook secret: {e}"),
            Self::Runtime(e) => write!(f, "the events runtime: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Store(e) => Some(e),
            Self::Secret(e) => Some(e),
            Self::Runtime(e) => Some(e),
        }
    }
}

impl From<store::Error> for Error {
    fn from(e: store::Error) -> Self {
        Self::Store(e)
    }
}
