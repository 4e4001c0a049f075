//! Workflows in the daemon: the runs of `agentd_tools::workflow` driven by one task
//! ([`engine`]), their steps executed over the supervisor's connections ([`steps`]), every
//! change kept in the store ([`crate::store::workflows`]).
//!
//! [`Workflows`] is the handle: the `workflow.*` tools call it (it implements
//! [`agentd_tools::workflow::Workflows`]), and the supervisor tells it what happens (the
//! configuration's workflows and limits at start and at each reload, a resource changed, a
//! server dialed afresh or unreachable, MCP Events occurrences appended, the own tools in
//! force). Besides `workflow.run`, the workflows' starts ([`starts`]) start runs. The
//! engine is a task of the daemon's tracker, ended at shutdown: the attempts under way are
//! cancelled there, their outcomes not kept, so that the next start sends them again (the
//! next `agent/attempt`, the same `agent/idempotency_key`) and parks its waits on resources
//! again (`wait.resubscribed`, reason `restart`).
//!
//! The daemon's parts the steps reach are traits implemented above: [`Servers`] (the held
//! servers: a connection once it is made, resource subscriptions by owner), [`Tools`] (agentd's
//! own tools, called as `Caller::workflow(run, step)`) and [`Agent`](parts::Agent) (an
//! `agent` step's model turn, run as a [`Subagent`] of the run).

mod arming;
mod bounds;
mod due;
mod engine;
mod orders;
mod owners;
mod parts;
mod runs;
mod starts;
mod steps;
mod subscribing;
#[cfg(test)]
pub(crate) mod tests;
mod unsaved;
mod waits;

use std::sync::Arc;

use agentd_tools::Error;
use agentd_tools::workflow::run::{Limits, Record};
use agentd_tools::workflow::{Command, Defined, Definition, Filter, Page};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub(crate) use self::bounds::Bounds;
pub(crate) use self::engine::Setup;
use self::orders::{Appending, Order};
#[cfg(any(test, feature = "demo"))]
pub(crate) use self::parts::NoServers;
pub(crate) use self::parts::{Boxed, Servers, Subagent, Tools, Unsubscribed};
use crate::store::Store;

/// The workflows of the daemon: what the tools call and the supervisor tells. Cloned
/// freely; an order sent once the engine ended is answered `shutting_down`.
#[derive(Debug, Clone)]
pub(crate) struct Workflows {
    orders: mpsc::UnboundedSender<Order>,
    /// The streams told appended to and not yet taken up: one order each at a time.
    appending: Appending,
    /// The own tools `tool` steps call.
    tools: Arc<watch::Sender<Option<Arc<dyn Tools>>>>,
    store: Store,
}

impl Workflows {
    /// Starts the engine of `setup` on `tasks`, until `shutdown`: it resumes the runs the
    /// store holds unsettled first.
    pub(crate) fn start(setup: Setup, tasks: &TaskTracker, shutdown: CancellationToken) -> Self {
        let (orders, ordered) = mpsc::unbounded_channel();
        let (tools, served) = watch::channel(None);
        let store = setup.store.clone();
        let appending = Appending::default();
        let told = (ordered, appending.clone());
        engine::Engine::spawn(setup, told, served, tasks, shutdown);
        Self {
            orders,
            appending,
            tools: Arc::new(tools),
            store,
        }
    }

    /// The configuration's workflows, the runs' bounds and the engine's from now on (a run
    /// under way keeps its definition and its step timeout).
    pub(crate) fn configure(&self, configured: Vec<Definition>, limits: Limits, bounds: Bounds) {
        self.tell(Order::Configure {
            configured,
            limits,
            bounds,
        });
    }

    /// The own tools `tool` steps call from now on.
    pub(crate) fn tools(&self, tools: Arc<dyn Tools>) {
        self.tools.send_replace(Some(tools));
    }

    /// Subscribed resource `uri` of `server` changed.
    pub(crate) fn updated(&self, server: &str, uri: &str) {
        let (server, uri) = (server.to_owned(), uri.to_owned());
        self.tell(Order::Updated { server, uri });
    }

    /// `server` is held by actor `actor` and listed: a wait of a server dialed afresh is
    /// subscribed again.
    pub(crate) fn connected(&self, server: &str, actor: u64) {
        let server = server.to_owned();
        self.tell(Order::Connected { server, actor });
    }

    /// A dial of `server` failed: its subscribe starts are said not to be armed.
    pub(crate) fn unreachable(&self, server: &str) {
        let server = server.to_owned();
        self.tell(Order::Unreachable { server });
    }

    /// MCP Events occurrences were appended to `stream`: each starts a run of each event
    /// start on it, from where that start stands.
    pub(crate) fn appended(&self, stream: &str) {
        let mut appending = self.appending.lock().unwrap_or_else(|e| e.into_inner());
        if appending.insert(stream.to_owned()) {
            let stream = stream.to_owned();
            self.tell(Order::Appended { stream });
        }
    }

    /// Answers once the engine has restored what the store keeps: the runs resumed, the
    /// starts armed, each event start's occurrences taken up to its stream's end (or its
    /// position kept at that end, a start not seen before).
    pub(crate) async fn restored(&self) {
        let (answer, restored) = oneshot::channel();
        self.tell(Order::Restored { answer });
        let _ = restored.await;
    }

    fn tell(&self, order: Order) {
        // Gone only at shutdown.
        let _ = self.orders.send(order);
    }

    /// Sends the order `make` makes; its answer, `shutting_down` when none comes.
    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, Error>>) -> Order,
    ) -> Result<T, Error> {
        let (answer, answered) = oneshot::channel();
        self.orders
            .send(make(answer))
            .map_err(|_| Error::ShuttingDown)?;
        answered.await.unwrap_or(Err(Error::ShuttingDown))
    }
}

impl agentd_tools::workflow::Workflows for Workflows {
    async fn create(&self, definition: Definition) -> Result<Defined, Error> {
        self.ask(|answer| Order::Define {
            definition,
            create: true,
            answer,
        })
        .await
    }

    async fn update(&self, definition: Definition) -> Result<Defined, Error> {
        self.ask(|answer| Order::Define {
            definition,
            create: false,
            answer,
        })
        .await
    }

    async fn delete(&self, name: &str) -> Result<bool, Error> {
        let name = name.to_owned();
        self.ask(|answer| Order::Delete { name, answer }).await
    }

    async fn run(&self, workflow: &str, input: Value, by: &str) -> Result<Record, Error> {
        let (workflow, by) = (workflow.to_owned(), by.to_owned());
        self.ask(|answer| Order::Run {
            workflow,
            input,
            by,
            answer,
        })
        .await
    }

    async fn status(&self, run: &str) -> Result<Record, Error> {
        let run = run.to_owned();
        self.ask(|answer| Order::Status { run, answer }).await
    }

    async fn list(&self, filter: Filter) -> Result<Page, Error> {
        // Every change is kept before it is answered: the store lists runs as they stand.
        let after = filter.after.clone().unwrap_or_default();
        self.store.runs_list(filter).await.map_err(|e| match e {
            crate::store::Error::NotFound { .. } => Error::UnknownRun { run: after },
            e => e.into_tool("workflow.list", ""),
        })
    }

    async fn command(&self, run: &str, command: Command) -> Result<Record, Error> {
        let run = run.to_owned();
        self.ask(|answer| Order::Command {
            run,
            command,
            answer,
        })
        .await
    }
}
