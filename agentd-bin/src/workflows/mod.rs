//! Workflows in the daemon: the runs of `agentd_tools::workflow` driven by one task
//! ([`engine`]), their steps executed over the supervisor's connections ([`steps`]), every
//! change kept in the store ([`crate::store::workflows`]).
//!
//! [`Workflows`] is the handle: the `workflow.*` tools call it (it implements
//! [`agentd_tools::workflow::Workflows`]), and the supervisor tells it what happens (the
//! configuration's workflows and limits at start and at each reload, a resource changed, a
//! server dialed afresh, the own tools in force). The engine is a task of the daemon's
//! tracker, ended at shutdown: the attempts under way are cancelled there, their outcomes not
//! kept, so that the next start sends them again (the next `agent/attempt`, the same
//! `agent/idempotency_key`) and parks its waits on resources again (`wait.resubscribed`,
//! reason `restart`).
//!
//! The daemon's parts the steps reach are traits implemented above: [`Servers`] (the held
//! servers: a connection once it is made, resource subscriptions by owner), [`Tools`] (agentd's
//! own tools, called as `Caller::workflow(run, step)`) and [`Agent`] (an `agent` step's model
//! turn; [`NoSubagents`] refuses it `not_available` until subagents run in this build).

mod engine;
mod steps;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use agentd_tools::workflow::run::{Failure, Limits, Record};
use agentd_tools::workflow::{Command, Defined, Definition, Filter, Page};
use agentd_tools::{Caller, Error};
use mcp_negotiate::Client;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::store::Store;

/// A boxed future, as the traits of the daemon's parts answer.
pub(crate) type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a wait's resource is not subscribed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unsubscribed {
    /// No server of that name is configured.
    Unknown,
    /// The server offers no subscriptions.
    Unsupported,
    /// The server is no longer held (a reload let it go).
    Gone,
    /// It failed in a way that may pass: the server's task asks again on its schedule.
    MayPass(String),
}

impl fmt::Display for Unsubscribed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown => f.write_str("no server of that name is configured"),
            Self::Unsupported => f.write_str("the server offers no subscriptions"),
            Self::Gone => f.write_str("the server is no longer held"),
            Self::MayPass(err) => f.write_str(err),
        }
    }
}

/// The held servers, as the steps reach them.
pub(crate) trait Servers: fmt::Debug + Send + Sync + 'static {
    /// The connection to `server`, once it is connected; `None` when no server of that name
    /// is configured (or it was let go while waiting).
    fn connection<'a>(&'a self, server: &'a str) -> Boxed<'a, Option<Arc<Client>>>;

    /// Whether `server` is configured, and whether it is connected now.
    fn state(&self, server: &str) -> (bool, bool);

    /// `owner` wants `uri` of `server` subscribed: once the server is connected (a server
    /// that offers no subscriptions is [`Unsubscribed::Unsupported`]).
    fn subscribe<'a>(
        &'a self,
        server: &'a str,
        uri: &'a str,
        owner: &'a str,
    ) -> Boxed<'a, Result<(), Unsubscribed>>;

    /// `owner` lets `uri` of `server` go.
    fn release<'a>(
        &'a self,
        server: &'a str,
        uri: &'a str,
        owner: &'a str,
    ) -> Boxed<'a, Result<(), Unsubscribed>>;
}

/// agentd's own tools, as a `tool` step calls them.
pub(crate) trait Tools: fmt::Debug + Send + Sync {
    /// Calls `name` for `caller` with `arguments`.
    fn call<'a>(
        &'a self,
        caller: &'a Caller,
        name: &'a str,
        arguments: Value,
    ) -> Boxed<'a, Result<Value, Error>>;
}

/// An `agent` step's model turn.
pub(crate) trait Agent: fmt::Debug + Send + Sync {
    /// The answer to `prompt`, for step `step` of run `run`: the step's output.
    fn answer<'a>(
        &'a self,
        run: &'a str,
        step: &'a str,
        prompt: &'a str,
    ) -> Boxed<'a, Result<Value, Failure>>;
}

/// No subagents in this build: an `agent` step fails `not_available`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NoSubagents;

impl Agent for NoSubagents {
    fn answer<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a str,
    ) -> Boxed<'a, Result<Value, Failure>> {
        Box::pin(async {
            Err(Failure::new(
                "not_available",
                "an agent step runs as a subagent, and subagents do not run in this build",
            ))
        })
    }
}

/// No server at all: every one unknown (the demo's turn, tests).
#[cfg(any(test, feature = "demo"))]
#[derive(Debug)]
pub(crate) struct NoServers;

#[cfg(any(test, feature = "demo"))]
impl Servers for NoServers {
    fn connection<'a>(&'a self, _: &'a str) -> Boxed<'a, Option<Arc<Client>>> {
        Box::pin(async { None })
    }

    fn state(&self, _: &str) -> (bool, bool) {
        (false, false)
    }

    fn subscribe<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a str,
    ) -> Boxed<'a, Result<(), Unsubscribed>> {
        Box::pin(async { Err(Unsubscribed::Unknown) })
    }

    fn release<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a str,
    ) -> Boxed<'a, Result<(), Unsubscribed>> {
        Box::pin(async { Err(Unsubscribed::Unknown) })
    }
}

/// What the engine starts with.
#[derive(Debug)]
pub(crate) struct Setup {
    /// The instance (`agent/instance`, the log lines').
    pub(crate) instance: String,
    /// Where runs and definitions are kept.
    pub(crate) store: Store,
    /// The held servers.
    pub(crate) servers: Arc<dyn Servers>,
    /// The `agent` steps' turns.
    pub(crate) agent: Arc<dyn Agent>,
    /// The runs' bounds: `limits.step_timeout`, `store.max_value_bytes`.
    pub(crate) limits: Limits,
    /// The configuration's workflows.
    pub(crate) configured: Vec<Definition>,
}

/// An order to the engine.
enum Order {
    Configure {
        configured: Vec<Definition>,
        limits: Limits,
    },
    Tools(Arc<dyn Tools>),
    Define {
        definition: Definition,
        create: bool,
        answer: oneshot::Sender<Result<Defined, Error>>,
    },
    Delete {
        name: String,
        answer: oneshot::Sender<Result<bool, Error>>,
    },
    Run {
        workflow: String,
        input: Value,
        by: String,
        answer: oneshot::Sender<Result<Record, Error>>,
    },
    Status {
        run: String,
        answer: oneshot::Sender<Result<Record, Error>>,
    },
    Command {
        run: String,
        command: Command,
        answer: oneshot::Sender<Result<Record, Error>>,
    },
    Updated {
        server: String,
        uri: String,
    },
    Connected {
        server: String,
        actor: u64,
    },
}

/// The workflows of the daemon: what the tools call and the supervisor tells. Cloned
/// freely; an order sent once the engine ended is answered `shutting_down`.
#[derive(Debug, Clone)]
pub(crate) struct Workflows {
    orders: mpsc::UnboundedSender<Order>,
    store: Store,
}

impl fmt::Debug for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Configure { .. } => "Configure",
            Self::Tools(_) => "Tools",
            Self::Define { .. } => "Define",
            Self::Delete { .. } => "Delete",
            Self::Run { .. } => "Run",
            Self::Status { .. } => "Status",
            Self::Command { .. } => "Command",
            Self::Updated { .. } => "Updated",
            Self::Connected { .. } => "Connected",
        })
    }
}

impl Workflows {
    /// Starts the engine of `setup` on `tasks`, until `shutdown`: it resumes the runs the
    /// store holds unsettled first.
    pub(crate) fn start(setup: Setup, tasks: &TaskTracker, shutdown: CancellationToken) -> Self {
        let (orders, ordered) = mpsc::unbounded_channel();
        let store = setup.store.clone();
        engine::Engine::spawn(setup, ordered, tasks, shutdown);
        Self { orders, store }
    }

    /// The configuration's workflows and the runs' bounds from now on (a run under way
    /// keeps its definition and its step timeout).
    pub(crate) fn configure(&self, configured: Vec<Definition>, limits: Limits) {
        self.tell(Order::Configure { configured, limits });
    }

    /// The own tools `tool` steps call from now on.
    pub(crate) fn tools(&self, tools: Arc<dyn Tools>) {
        self.tell(Order::Tools(tools));
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

/// The configuration's workflows, by name.
fn by_name(configured: Vec<Definition>) -> BTreeMap<String, Definition> {
    configured
        .into_iter()
        .map(|d| (d.name.clone(), d))
        .collect()
}
