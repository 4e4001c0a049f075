//! Turn workers: the connections a turn's MCP calls go over.
//!
//! One worker connection per held server, for the whole agent: dialed at the first call a
//! turn makes to that server ([`dial::worker`]: `clientInfo` without a title, elicitation
//! declared and answered by the server's elicitor, the pool's human gate, the fixed 60 s
//! timeout), starting the way
//! the supervisor's connection reached the server (no probe for a server reached through
//! `initialize`), and kept for the calls of every turn after. Concurrent calls share it; a
//! dial that fails is made again at the next call.
//!
//! A worker is let go when the server it follows is: gone from the servers held, held by
//! another actor (a reload dialed it afresh), or at [`Workers::clear`] (a reload, the drain).
//! It is closed once the last call using it ends (a legacy session ended with DELETE), on the
//! pool's task tracker, so that the drain waits for it.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use agentd_tools::AgentMeta;
use mcp_negotiate::{Client, Start};
use mcp_transport::driver::Elicitor;
use mcp_wire::{CallToolResult, ElicitRequestParams};
use serde_json::{Map, Value};
use tokio::sync::OnceCell;
use tokio::time::{Instant, sleep_until, timeout_at};
use tokio_util::task::TaskTracker;

use crate::config::Server;
use crate::dial;

/// The server a worker follows: its configuration, the actor holding it, and how that
/// actor's connection reached it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Followed {
    /// The server's configuration.
    pub(crate) server: Server,
    /// The id of the supervisor's actor holding it.
    pub(crate) actor: u64,
    /// How the supervisor's connection started: a worker starts the same way.
    pub(crate) start: Start,
}

/// Why a call over a worker has no result.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub(crate) enum WorkerError {
    /// No server of that name is held (connected and listed).
    NotHeld,
    /// The worker could not be dialed.
    Dial(mcp_negotiate::Error),
    /// The call (its dial included) was cut at its bound: cancelled on the wire when it was
    /// made.
    Cut,
    /// The call failed.
    Call(mcp_negotiate::Error),
}

impl fmt::Display for WorkerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotHeld => f.write_str("the server is not connected"),
            Self::Dial(e) => write!(f, "the server could not be reached: {e}"),
            Self::Cut => f.write_str("the call was cut at its bound"),
            Self::Call(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for WorkerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Dial(e) | Self::Call(e) => Some(e),
            Self::NotHeld | Self::Cut => None,
        }
    }
}

/// A worker connection, closed on the pool's tracker once dropped.
#[derive(Debug)]
struct Worker {
    client: Option<Client>,
    tasks: TaskTracker,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let (Some(client), Ok(runtime)) =
            (self.client.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        self.tasks.spawn_on(
            async move {
                let _ = client.close().await;
            },
            &runtime,
        );
    }
}

/// A worker connection in use: it is closed once the last one is dropped and its server
/// let go.
#[derive(Debug, Clone)]
pub(crate) struct Connection(Arc<Worker>);

impl Connection {
    /// Its client.
    pub(crate) fn client(&self) -> Result<&Client, WorkerError> {
        self.0.client.as_ref().ok_or(WorkerError::NotHeld)
    }
}

/// One held server's worker, dialed at its first call.
#[derive(Debug, Clone)]
struct Slot {
    followed: Followed,
    worker: Arc<OnceCell<Arc<Worker>>>,
}

/// Who answers a server's elicitations on its worker, by server name.
pub(crate) type Elicitors = Arc<dyn Fn(&str) -> Arc<dyn Elicitor> + Send + Sync>;

/// The turn workers of the agent: one per held server.
pub(crate) struct Workers {
    elicitors: Elicitors,
    slots: Mutex<BTreeMap<String, Slot>>,
    tasks: TaskTracker,
}

impl fmt::Debug for Workers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("Workers")
            .field("servers", &slots.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Workers {
    /// A pool whose workers answer a server's elicitations with the elicitor `elicitors`
    /// makes for that server, closed on `tasks`.
    pub(crate) fn new(elicitors: Elicitors, tasks: TaskTracker) -> Self {
        Self {
            elicitors,
            slots: Mutex::default(),
            tasks,
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The servers held from now on, by name: the workers of the others, or of those held
    /// otherwise now, are let go.
    pub(crate) fn follow(&self, servers: &BTreeMap<String, Followed>) {
        let mut slots = self.slots();
        slots.retain(|name, slot| servers.get(name) == Some(&slot.followed));
        for (name, followed) in servers {
            slots.entry(name.clone()).or_insert_with(|| Slot {
                followed: followed.clone(),
                worker: Arc::default(),
            });
        }
    }

    /// Lets every worker go (a reload, the drain); the servers held are kept, their workers
    /// dialed again at their next call.
    pub(crate) fn clear(&self) {
        for slot in self.slots().values_mut() {
            slot.worker = Arc::default();
        }
    }

    /// The worker of `server`, dialed first when it has none, the dial bounded at `bound`
    /// ([`WorkerError::Cut`]).
    pub(crate) async fn connection(
        &self,
        server: &str,
        bound: Instant,
    ) -> Result<Connection, WorkerError> {
        let slot = self.slots().get(server).cloned();
        let Slot { followed, worker } = slot.ok_or(WorkerError::NotHeld)?;
        let dialed = worker.get_or_try_init(|| self.dial(&followed));
        let worker = timeout_at(bound, dialed)
            .await
            .map_err(|_| WorkerError::Cut)?
            .map_err(WorkerError::Dial)?;
        Ok(Connection(worker.clone()))
    }

    /// Calls `tool` of `server` with `arguments` and `meta`, over its worker (dialed first
    /// when it has none), the whole of it bounded at `bound`: a call still running then is
    /// cancelled on the wire ([`WorkerError::Cut`]).
    pub(crate) async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
        meta: &AgentMeta,
        bound: Instant,
    ) -> Result<CallToolResult, WorkerError> {
        let connection = self.connection(server, bound).await?;
        let meta = meta.to_meta();
        connection
            .client()?
            .call_tool_until(
                tool,
                Some(arguments),
                Some(&meta),
                |_| {},
                sleep_until(bound),
            )
            .await
            .map_err(|e| match e {
                mcp_negotiate::Error::Cancelled => WorkerError::Cut,
                e => WorkerError::Call(e),
            })
    }

    /// Dials a worker of `followed`.
    async fn dial(&self, followed: &Followed) -> Result<Arc<Worker>, mcp_negotiate::Error> {
        let server = &followed.server;
        let elicitor = (self.elicitors)(&server.name);
        let elicit = move |params: ElicitRequestParams| {
            let elicitor = elicitor.clone();
            async move { elicitor.elicit(params).await }
        };
        let dialer = dial::worker(server, elicit).dialer(&server.url)?;
        let client = Client::connect_with(dialer, followed.start).await?;
        Ok(Arc::new(Worker {
            client: Some(client),
            tasks: self.tasks.clone(),
        }))
    }
}

/// Elicitors that answer every question cancel, whatever the server.
#[cfg(test)]
pub(crate) fn cancelling() -> Elicitors {
    let cancel = |_: ElicitRequestParams| async {
        mcp_wire::ElicitResult::new(mcp_wire::ElicitAction::Cancel)
    };
    Arc::new(move |_: &str| -> Arc<dyn Elicitor> { Arc::new(cancel) })
}
