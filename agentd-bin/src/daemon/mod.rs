//! `agentd run`: one connection per configured server, held until SIGINT or SIGTERM.
//!
//! Every server is held by a task of its own ([`server`]), all dialed at start,
//! concurrently. A server that cannot be reached or refuses is dialed again 1 s after the
//! first failure, doubling to 60 s; when it answers it has joined (`mcp.joined`). A connected
//! server's changes are watched: a tool list change is logged (`mcp.tools_changed`) and takes
//! effect at the next reload (the subagents holding the server list its tools again at their
//! next turn boundary); the listen's ups and downs are logged (`mcp.listen.*`). A
//! server that loses its session is dialed again 1 s later, doubling to 30 s, one server at
//! a time (`mcp.disconnect` and `mcp.connect` with reason `session_lost`).
//!
//! SIGHUP reloads: the file is read again; an invalid one is refused (`reload.refused`, with
//! the error) and the supervisor keeps running on the old configuration; else the servers
//! removed or changed are closed (`mcp.disconnect`, reason `reload`), the new or changed
//! ones dialed (`mcp.connect`, reason `reload`), and the others list their tools again (the
//! catalogue is rebuilt; a failed listing keeps the current one, `mcp.tools_refresh_failed`).
//!
//! The store (`store.path`) is opened at start and closed last; the control socket
//! (`<store.path>/control/agentd.sock`, [`crate::control`]) serves agentd's own tools over it
//! ([`crate::tools`]), the events tools of MCP Events, and the open questions of the human
//! gate ([`crate::human`]: made once at start, where it cancels the questions a last
//! run left open, and kept across reloads). A reload takes the new `[tools.grants]`;
//! `store.path` changes at a restart only.
//!
//! With `webhooks.listen` set, the daemon's HTTP listener serves `GET /metrics` (bound once at
//! start; a reload does not move it), and says where (`http.listening`, with the address).
//!
//! At SIGINT or SIGTERM every connection is closed inside `lifecycle.drain_timeout`, and the
//! process exits 0.
//!
//! The agent's instruction ([`Instruction`], `[instruction]`) and skills ([`Skills`],
//! `skills.sources`) are started with the servers and reach them through [`Held`]; the
//! supervisor tells them what happens: a server connected (its listing), a server that could
//! not be dialed, a subscribed resource changed, an MCP Events occurrence appended into the
//! stream `instruction`. A reload hands them the new configuration: a changed
//! `[instruction]` follows its new source, changed `skills.sources` are discovered as each
//! server is listed again.
//!
//! The supervisor is one loop ([`run`]) over what wakes it ([`Wake`]): a signal, a server
//! actor's [`Report`], a subscribed resource's change, or MCP Events' ([`events::Report`]:
//! the store's health, which the own tools' `status` tells, and occurrences for the
//! instruction). What it holds is a [`Daemon`]: started once, reloaded as a
//! diff, drained once. Each server is an actor ([`server::Handle`]) taking typed orders and
//! reporting its listings, from which the supervisor keeps its tool catalogue (served on the
//! control socket); MCP Events runs on a runtime of its own.
//!
//! The subagents ([`Subagents`]) are made at start (those a last run left running fail) and
//! run in the agent while it runs.
//!
//! With `[model]`, the agent ([`crate::agent::conversations::Agent`]) runs as a child of the
//! supervisor: started at start, its tasks on the listeners' tracker, ended at shutdown. The
//! supervisor hands it what its turns work with (the instance, the own tools, each held
//! server's listing and how its connection started, `limits.turn_timeout`) at start and again
//! at each change of the catalogue and at each reload (which also lets its turn workers go).
//! A reload that changes `[model]` starts the agent afresh over the new model (its turns
//! under way dropped), or stops it when `[model]` is gone.

pub(crate) mod descriptors;
mod held;
pub(crate) mod schedule;
pub(crate) mod server;
mod signals;
pub(crate) mod subscriptions;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mcp_negotiate::{Catalog, Start};
use mcp_transport::driver::Elicitor;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::held::Held;
use self::server::{Handle, Report, Shared, Stop, Update};
use self::signals::{Signal, Signals};
use crate::agent::conversations::{self, Agent, Setup};
use crate::agent::instruction::Instruction;
use crate::agent::model::chat::Chat;
use crate::agent::model::retry::Retry;
use crate::agent::model::{Model, ModelError};
use crate::agent::skills::Skills;
use crate::agent::subagents::Subagents;
use crate::agent::subagents::child::{Host, SESSION_IDLE};
use crate::agent::workers::{Elicitors, Followed};
use crate::config::{self, Config};
use crate::control::Served;
use crate::events::hooks::Routes;
use crate::events::{self, Events, Feed, Reports};
use crate::human::Gate;
use crate::store::{self, Limits, Store};
use crate::telemetry::catalogue::connections::{self, Dial};
use crate::telemetry::catalogue::own;
use crate::telemetry::metrics::Metrics;
use crate::tools::{Own, Parts};
use crate::workflows::{Bounds, Setup as Runs, Subagent, Workflows};

/// The workflow engine's bounds `config` sets: `limits.run_concurrency` and
/// `limits.run_retention`.
fn workflow_bounds(config: &Config) -> Bounds {
    Bounds {
        running_max: config.run_concurrency,
        retention: config.run_retention,
    }
}

/// Runs the supervisor until SIGINT or SIGTERM, reloading `path` at SIGHUP, then drains.
pub(crate) async fn run(config: Config, path: PathBuf) -> ExitCode {
    let Ok(mut signals) = Signals::new() else {
        eprintln!("agentd: cannot listen for signals");
        return ExitCode::FAILURE;
    };
    let mut daemon = match Daemon::start(config, path).await {
        Ok(daemon) => daemon,
        Err(e) => {
            eprintln!("agentd: {e}");
            return ExitCode::FAILURE;
        }
    };
    loop {
        match daemon.next(&mut signals).await {
            Wake::Signal(Signal::Reload) => daemon.reload().await,
            Wake::Signal(Signal::Shutdown) => break,
            Wake::Server(report) => daemon.on_report(report),
            Wake::Updated(update) => daemon.on_update(update),
            Wake::Events(report) => daemon.on_events_report(report),
        }
    }
    daemon.drain().await;
    ExitCode::SUCCESS
}

/// What wakes the supervisor.
#[derive(Debug)]
enum Wake {
    /// SIGHUP, SIGINT or SIGTERM.
    Signal(Signal),
    /// A server's actor reported.
    Server(Report),
    /// A subscribed resource changed (`None`: changes were missed).
    Updated(Option<Update>),
    /// MCP Events reported.
    Events(events::Report),
}

/// Why the daemon could not start.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum StartError {
    /// `webhooks.listen` could not be bound.
    Listen(SocketAddr, std::io::Error),
    /// The control socket could not be bound in `store.path`, or its lock taken.
    ControlSocket(PathBuf, std::io::Error),
    /// Another process holds the lock of the store in `store.path` (another `agentd run`).
    Held(PathBuf),
    /// The store could not be opened.
    Store(store::Error),
    /// MCP Events could not start (its bindings).
    Events(events::Error),
    /// The model's provider could not be made.
    Model(ModelError),
    /// `RLIMIT_NOFILE` does not hold the descriptor budget.
    Descriptors(descriptors::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Listen(addr, e) => write!(f, "cannot listen on {addr}: {e}"),
            Self::ControlSocket(dir, e) => {
                write!(
                    f,
                    "cannot bind the control socket in {}: {e}",
                    dir.display()
                )
            }
            Self::Held(dir) => write!(
                f,
                "the store in {} is held by another agentd: one daemon runs on a store",
                dir.display()
            ),
            Self::Store(e) => write!(f, "cannot open the store: {e}"),
            Self::Events(e) => write!(f, "cannot start MCP Events: {e}"),
            Self::Model(e) => write!(f, "cannot ask the model: {e}"),
            Self::Descriptors(e) => write!(f, "cannot start: {e}"),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Listen(_, e) | Self::ControlSocket(_, e) => Some(e),
            Self::Held(_) => None,
            Self::Store(e) => Some(e),
            Self::Events(e) => Some(e),
            Self::Model(e) => Some(e),
            Self::Descriptors(e) => Some(e),
        }
    }
}

/// What the supervisor holds: the configuration in force, one actor per server, MCP Events,
/// and the listeners.
struct Daemon {
    config: Config,
    path: PathBuf,
    metrics: Arc<Metrics>,
    /// The webhook routes the HTTP listener serves, kept by MCP Events.
    routes: Routes,
    /// Where the HTTP listener is bound, when it is.
    listening: Option<SocketAddr>,
    /// What every server's actor shares, their tasks included.
    shared: Shared,
    servers: BTreeMap<String, Handle>,
    /// What the actors report.
    reports: mpsc::UnboundedReceiver<Report>,
    /// The subscribed resources' changes.
    updates: broadcast::Receiver<Update>,
    /// The servers as the agent's parts reach them.
    held: Held,
    /// The instruction, the skills and the subagents.
    instruction: Instruction,
    skills: Skills,
    subagents: Subagents,
    /// Their tasks.
    parts: TaskTracker,
    /// Where MCP Events reports (handed to it at its start), and what it reported.
    events_reports: Reports,
    events_reported: mpsc::UnboundedReceiver<events::Report>,
    /// Whether MCP Events' last commit failed: the own tools' `status` says so.
    events_degraded: Arc<AtomicBool>,
    /// The supervisor's tool catalogue: each held server's tools as last listed (at its
    /// dial, a re-dial or a reload, never at its list_changed).
    catalogue: BTreeMap<String, Listing>,
    /// The agent, when it runs.
    agent: Option<Agent>,
    events: Option<Events>,
    /// The durable state, kept by the store's thread.
    store: Store,
    /// The questions put to people, across reloads.
    gate: Arc<Gate>,
    /// The workflows and their runs, across reloads.
    workflows: Workflows,
    /// The soft `RLIMIT_NOFILE` the daemon started with, before its raise (`None`: not
    /// known).
    nofile: Option<u64>,
    /// What the control socket serves: the own tools, the events tools of the current MCP
    /// Events.
    served: watch::Sender<Served>,
    /// The control socket's path, removed at exit.
    socket: PathBuf,
    /// The store's lock ([`crate::control::hold`]), let go last.
    _lock: nix::fcntl::Flock<std::fs::File>,
    /// Stops the listeners from accepting.
    shutdown: CancellationToken,
    /// The listeners and their connections, and the agent's tasks.
    listeners: TaskTracker,
}

/// A held server's tools as last listed, by its actor.
#[derive(Debug)]
struct Listing {
    /// The actor ([`Handle::id`]).
    id: u64,
    catalog: Arc<Catalog>,
    /// How its connection started.
    start: Start,
}

impl Daemon {
    /// Binds the listeners, starts an actor per server (all dialed at once) and MCP Events,
    /// then serves.
    async fn start(config: Config, path: PathBuf) -> Result<Self, StartError> {
        let nofile =
            descriptors::reserve(descriptors::budget(&config)).map_err(StartError::Descriptors)?;
        let model = config.model.as_ref().map(provider).transpose();
        let model = model.map_err(StartError::Model)?;
        let shutdown = CancellationToken::new();
        let listeners = TaskTracker::new();
        let metrics = Arc::new(Metrics::default());
        let routes = Routes::default();
        // Taken before anything is bound or the store touched: a second daemon on the same
        // store changes nothing, and says why.
        let lock = match crate::control::hold(&config.store_path) {
            Ok(Some(lock)) => lock,
            Ok(None) => return Err(StartError::Held(config.store_path.clone())),
            Err(e) => return Err(StartError::ControlSocket(config.store_path.clone(), e)),
        };
        // What calls of `exec` left when the last daemon stopped mid-call; what stays is
        // logged, and taken names are skipped by the calls' random ones.
        #[cfg(feature = "exec")]
        if let Err(e) = crate::exec::sweep(&config.store_path) {
            own::exec_sweep_fail(&config.instance, &e.to_string());
        }
        // Bound first, served once the webhook routes are in place: a delivery that comes
        // early waits in the backlog instead of meeting an empty table.
        let listener = match config.listen {
            None => None,
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| StartError::Listen(addr, e))?,
            ),
        };
        let listening = listener.as_ref().and_then(|l| l.local_addr().ok());
        // Bound before any server is dialed, so that it is there once one is connected.
        let socket = crate::control::bind(&config.store_path)
            .map_err(|e| StartError::ControlSocket(config.store_path.clone(), e))?;
        let (shared, reports) = Shared::reporting(&config.instance, metrics.clone());
        let updates = shared.updates();
        // Dialed before the store is opened: the store opens while the servers answer.
        let servers: BTreeMap<String, Handle> = config
            .servers
            .iter()
            .map(|server| {
                let handle = Handle::start(&shared, server.clone(), None);
                (server.name.clone(), handle)
            })
            .collect();
        // A start that fails from here stops the servers it dialed and unbinds the socket.
        let abandon = |servers: BTreeMap<String, Handle>| {
            shutdown.cancel();
            let _ = std::fs::remove_file(crate::control::path(&config.store_path));
            for handle in servers.into_values() {
                handle.stop(Stop::Shutdown);
            }
            shared.drain(config.drain_timeout)
        };
        let store = match Store::open(&config.store_path, Limits::from(&config)).await {
            Ok(store) => store,
            Err(e) => {
                abandon(servers).await;
                return Err(StartError::Store(e));
            }
        };
        let gate = match Gate::start(
            store.clone(),
            &config.instance,
            shutdown.clone(),
            &listeners,
        )
        .await
        {
            Ok(gate) => gate,
            Err(e) => {
                abandon(servers).await;
                store.close().await;
                return Err(StartError::Store(e));
            }
        };
        let subagents = match Subagents::start(store.clone()).await {
            Ok(subagents) => subagents,
            Err(e) => {
                abandon(servers).await;
                store.close().await;
                return Err(StartError::Store(e));
            }
        };
        let (events_to, events_reported) = mpsc::unbounded_channel();
        let events_reports = Reports::new(events_to);
        let events_degraded = Arc::new(AtomicBool::new(false));
        let held = Held::default();
        held.set(&servers);
        let workflows = Workflows::start(
            Runs {
                instance: config.instance.clone(),
                store: store.clone(),
                servers: Arc::new(held.clone()),
                agent: Arc::new(Subagent),
                limits: config.run_limits(),
                bounds: workflow_bounds(&config),
                configured: config.workflows.clone(),
            },
            &listeners,
            shutdown.clone(),
        );
        // Restored before any occurrence is taken: a start seen for the first time stands
        // at its stream's end as the store held it at the start, not after what came since.
        workflows.restored().await;
        let parts = TaskTracker::new();
        let instance = &config.instance;
        let instruction = Instruction::start(
            instance,
            config.instruction.as_ref(),
            Arc::new(held.clone()),
            &parts,
            shutdown.clone(),
        );
        let skills = Skills::start(
            instance,
            &config.skill_sources,
            Arc::new(held.clone()),
            &parts,
            shutdown.clone(),
        );
        let started = match Events::wanted(&config) {
            true => Some(
                Events::start(
                    &config,
                    store.clone(),
                    listening,
                    &feeds(&servers),
                    metrics.clone(),
                    &routes,
                    events_reports.clone(),
                )
                .await,
            ),
            false => None,
        };
        let events = match started.transpose() {
            Ok(events) => events,
            Err(e) => {
                abandon(servers).await;
                store.close().await;
                return Err(StartError::Events(e));
            }
        };
        let own = own_tools(
            &config,
            &store,
            &shutdown,
            &metrics,
            &events_degraded,
            (&gate, &instruction, &skills, &subagents, &workflows, &held),
            nofile,
        );
        workflows.tools(own.clone());
        let (served, current) = watch::channel(Served {
            tools: Some(own),
            events: events.as_ref().map(Events::control),
            catalogue: Arc::default(),
            humans: Some(gate.clone()),
            agent: None,
        });
        let (control, socket) = (socket, crate::control::path(&config.store_path));
        if let (Some(listener), Some(bound)) = (listener, listening) {
            let instance: Arc<str> = config.instance.as_str().into();
            let prefix = events::hooks::route_prefix(config.hooks_url.as_deref());
            crate::http::serve(
                listener,
                metrics.clone(),
                routes.clone(),
                prefix,
                instance,
                shutdown.clone(),
                listeners.clone(),
            );
            own::http_listening(&config.instance, bound);
        }
        let mut daemon = Self {
            config,
            path,
            metrics,
            routes,
            listening,
            shared,
            servers,
            reports,
            updates,
            held,
            instruction,
            skills,
            subagents,
            parts,
            events_reports,
            events_reported,
            events_degraded,
            catalogue: BTreeMap::new(),
            agent: None,
            events,
            store,
            gate,
            workflows,
            nofile,
            served,
            socket,
            _lock: lock,
            shutdown,
            listeners,
        };
        if let Some(model) = model {
            daemon.start_agent(model);
        }
        // Served once the agent runs: a request that came before waits in the backlog.
        let (shutdown, listeners) = (daemon.shutdown.clone(), daemon.listeners.clone());
        crate::control::serve(control, current, shutdown, listeners);
        Ok(daemon)
    }

    /// What wakes the supervisor next: a signal, or an actor's report.
    async fn next(&mut self, signals: &mut Signals) -> Wake {
        tokio::select! {
            signal = signals.next() => Wake::Signal(signal),
            Some(report) = self.reports.recv() => Wake::Server(report),
            update = self.updates.recv() => match update {
                Ok(update) => Wake::Updated(Some(update)),
                // Closed only with the supervisor, which holds the sender.
                Err(RecvError::Lagged(_) | RecvError::Closed) => Wake::Updated(None),
            },
            Some(report) = self.events_reported.recv() => Wake::Events(report),
        }
    }

    /// Takes an actor's report: a listing of a server held now enters the catalogue, and
    /// tells the instruction and the skills that the server is connected; a failed dial
    /// tells the skills; a tool list change tells the subagents, then is logged.
    fn on_report(&mut self, report: Report) {
        match report {
            Report::Listed {
                server,
                id,
                catalog,
                start,
            } => {
                if self.servers.get(&server).is_some_and(|h| h.id == id) {
                    self.instruction.connected(&server);
                    self.workflows.connected(&server, id);
                    self.skills.listed(&server);
                    let listing = Listing { id, catalog, start };
                    self.catalogue.insert(server, listing);
                    self.publish_catalogue();
                }
            }
            Report::ToolsChanged { server, id } => {
                if self.servers.get(&server).is_some_and(|h| h.id == id) {
                    self.subagents.tools_changed(&server);
                    connections::tools_changed(&self.config.instance, &server);
                }
            }
            Report::Unreachable { server, id } => {
                if self.servers.get(&server).is_some_and(|h| h.id == id) {
                    self.skills.unreachable(&server);
                    self.workflows.unreachable(&server);
                }
            }
        }
    }

    /// A subscribed resource changed, or changes were missed: the instruction is told.
    fn on_update(&mut self, update: Option<Update>) {
        match update {
            Some(Update { server, uri }) => {
                self.instruction.updated(&server, &uri);
                self.workflows.updated(&server, &uri);
            }
            None => self.instruction.missed(),
        }
    }

    /// Takes MCP Events' report: the store's health, as the own tools' `status` says it; an
    /// occurrence for the instruction, which reads it again.
    fn on_events_report(&mut self, report: events::Report) {
        match report {
            events::Report::Store { degraded } => {
                self.events_degraded.store(degraded, Ordering::Relaxed);
            }
            events::Report::Appended { stream } => {
                self.workflows.appended(&stream);
            }
            events::Report::Instruction { server, event_type } => {
                self.instruction.event(&server, &event_type);
            }
        }
    }

    /// What the control socket serves of the catalogue, and what the agent offers, from now
    /// on: the listings of the actors held now (one let go, or dialed afresh and not listed
    /// yet, is left out).
    fn publish_catalogue(&mut self) {
        let servers = &self.servers;
        self.catalogue
            .retain(|name, listing| servers.get(name).is_some_and(|h| h.id == listing.id));
        let catalogue: BTreeMap<String, Arc<Catalog>> = self
            .catalogue
            .iter()
            .map(|(name, listing)| (name.clone(), listing.catalog.clone()))
            .collect();
        let catalogue = Arc::new(catalogue);
        self.served
            .send_modify(|served| served.catalogue = catalogue);
        self.publish_setup();
    }

    /// What the agent's turns work with now: the instance, the own tools, the servers held
    /// and listed; `None` once the own tools are gone (the drain).
    fn setup(&self) -> Option<Setup> {
        let own = self.served.borrow().tools.clone()?;
        let servers = self.catalogue.iter().filter_map(|(name, listing)| {
            let handle = self.servers.get(name)?;
            let followed = Followed {
                server: handle.server.clone(),
                actor: listing.id,
                start: listing.start,
            };
            let catalog = listing.catalog.clone();
            Some((name.clone(), conversations::Held { followed, catalog }))
        });
        Some(Setup {
            instance: self.config.instance.clone(),
            own,
            servers: servers.collect(),
            turn_timeout: self.config.turn_timeout,
            budget_tokens: self.config.budget_tokens,
            instruction: self.instruction.clone(),
            skills: self.skills.clone(),
        })
    }

    /// Tells the agent, when it runs, what its turns work with from now on.
    fn publish_setup(&self) {
        if let (Some(agent), Some(setup)) = (&self.agent, self.setup()) {
            agent.set(setup);
        }
    }

    /// Starts the agent over `model` (stopping the one running, if any): its turns answer
    /// every conversation's messages, and `agentd say` is served. A server's elicitation on
    /// its worker is a question to a person (the human gate).
    fn start_agent<M: Model>(&mut self, model: M) {
        self.stop_agent();
        let Some(setup) = self.setup() else {
            return;
        };
        let (store, tasks) = (self.store.clone(), &self.listeners);
        let stop = self.shutdown.child_token();
        let gate = self.gate.clone();
        let elicitors: Elicitors =
            Arc::new(move |server: &str| -> Arc<dyn Elicitor> { Arc::new(gate.elicitor(server)) });
        let model = Arc::new(model);
        let host = Host {
            model: model.clone(),
            agent: Agent::start(model, setup, store, elicitors.clone(), tasks, stop.clone()),
            elicitors,
            tasks: tasks.clone(),
            stop,
            session_idle: SESSION_IDLE,
        };
        let agent = host.agent.clone();
        self.subagents.attach(Arc::new(host));
        let served = agent.clone();
        self.served.send_modify(|s| s.agent = Some(served));
        self.agent = Some(agent);
    }

    /// Stops the agent, if it runs: its turns under way are dropped (their history kept as
    /// far as it went), a waiting `agentd say` answers that it stopped.
    fn stop_agent(&mut self) {
        if let Some(agent) = self.agent.take() {
            agent.stop();
            self.subagents.detach();
            self.served.send_modify(|s| s.agent = None);
        }
    }

    /// Reads the configuration file again: an invalid one is refused (`reload.refused`) and
    /// the one in force stays; else the servers and bindings are diffed against it.
    async fn reload(&mut self) {
        let new = match config::load(&self.path, &|name| std::env::var(name).ok()) {
            Ok(new) => new,
            Err(e) => {
                own::reload_refused(&self.config.instance, &e.to_string());
                return;
            }
        };
        // The store is the one the daemon started with, and the listener serves the webhook
        // path it was started with.
        let fixed = if new.store_path != self.config.store_path {
            Some("store.path changes at a restart, not a reload")
        } else if events::hooks::route_prefix(new.hooks_url.as_deref())
            != events::hooks::route_prefix(self.config.hooks_url.as_deref())
        {
            Some("the path of webhooks.url changes at a restart, not a reload")
        } else {
            None
        };
        if let Some(err) = fixed {
            own::reload_refused(&self.config.instance, err);
            return;
        }
        if let Err(e) = descriptors::reserve(descriptors::budget(&new)) {
            own::reload_refused(&self.config.instance, &e.to_string());
            return;
        }
        // A changed [model] makes a new provider first: one that cannot be made refuses the
        // reload whole.
        let model_changed = new.model != self.config.model;
        let model = match &new.model {
            Some(m) if model_changed => match provider(m) {
                Ok(model) => Some(model),
                Err(e) => {
                    own::reload_refused(&self.config.instance, &format!("model: {e}"));
                    return;
                }
            },
            _ => None,
        };
        // Every connection says who it is: a new name dials them all again.
        if new.instance != self.config.instance {
            crate::telemetry::log::set_instance(&new.instance);
            self.shared = self.shared.renamed(&new.instance);
            for (_, handle) in std::mem::take(&mut self.servers) {
                handle.stop(Stop::Reload);
            }
        }
        self.diff_servers(&new);
        // MCP Events takes the new configuration as a diff; it starts at the first one that
        // gives it something to do, and runs until exit.
        match &self.events {
            Some(events) => {
                events
                    .reload(&new, self.listening, &feeds(&self.servers))
                    .await;
            }
            None if Events::wanted(&new) => match Events::start(
                &new,
                self.store.clone(),
                self.listening,
                &feeds(&self.servers),
                self.metrics.clone(),
                &self.routes,
                self.events_reports.clone(),
            )
            .await
            {
                Ok(started) => {
                    let control = started.control();
                    self.served
                        .send_modify(|served| served.events = Some(control));
                    self.events = Some(started);
                }
                Err(e) => own::reload_refused(&new.instance, &format!("MCP Events: {e}")),
            },
            None => {}
        }
        self.instruction.reload(new.instruction.as_ref());
        self.skills.reload(&new.skill_sources);
        let tools = own_tools(
            &new,
            &self.store,
            &self.shutdown,
            &self.metrics,
            &self.events_degraded,
            (
                &self.gate,
                &self.instruction,
                &self.skills,
                &self.subagents,
                &self.workflows,
                &self.held,
            ),
            self.nofile,
        );
        self.workflows.tools(tools.clone());
        self.workflows.configure(
            new.workflows.clone(),
            new.run_limits(),
            workflow_bounds(&new),
        );
        self.served.send_modify(|served| served.tools = Some(tools));
        self.config = new;
        // A changed [model] starts the agent afresh (or stops it); else its workers are dialed
        // again at their next call, as the supervisor's connections were.
        match model {
            Some(model) => self.start_agent(model),
            None if model_changed => self.stop_agent(),
            None => {
                if let Some(agent) = &self.agent {
                    agent.let_workers_go();
                }
                self.publish_setup();
            }
        }
    }

    /// Closes the servers removed or changed, dials the new or changed ones, and lists the
    /// tools of the others again: the catalogue is rebuilt.
    fn diff_servers(&mut self, new: &Config) {
        let gone: Vec<String> = self
            .servers
            .iter()
            .filter(|(name, h)| {
                !new.servers
                    .iter()
                    .any(|s| s.name == **name && *s == h.server)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            if let Some(handle) = self.servers.remove(&name) {
                // Its actor logs mcp.disconnect and closes; the drain waits for it.
                handle.stop(Stop::Reload);
            }
        }
        for server in &new.servers {
            match self.servers.get(&server.name) {
                Some(kept) => kept.relist(),
                None => {
                    let started = Handle::start(&self.shared, server.clone(), Some(Dial::Reload));
                    self.servers.insert(server.name.clone(), started);
                }
            }
        }
        self.held.set(&self.servers);
        self.publish_catalogue();
    }

    /// Takes nothing new (the listeners stop accepting, open HTTP connections finish the
    /// request they answer, control connections close, the tools' waits end), stops MCP
    /// Events, and closes every connection, inside `lifecycle.drain_timeout`; then closes
    /// the store.
    async fn drain(self) {
        let deadline = tokio::time::Instant::now() + self.config.drain_timeout;
        self.shutdown.cancel();
        self.listeners.close();
        self.served.send_replace(Served::default());
        // Turns end at the shutdown; their workers close once their calls end.
        if let Some(agent) = self.agent {
            agent.let_workers_go();
        }
        for handle in self.servers.into_values() {
            handle.stop(Stop::Shutdown);
        }
        let _ = std::fs::remove_file(&self.socket);
        let events = self.events.map(Events::stop);
        let (shared, listeners, parts) = (self.shared, self.listeners, self.parts);
        parts.close();
        let _ = tokio::time::timeout_at(deadline, async {
            let events = async {
                if let Some(events) = events {
                    events.await;
                }
            };
            tokio::join!(
                events,
                shared.drain(self.config.drain_timeout),
                listeners.wait(),
                parts.wait()
            );
        })
        .await;
        self.store.close().await;
    }
}

/// The agent's parts the own tools act on.
type Agentry<'a> = (
    &'a Arc<Gate>,
    &'a Instruction,
    &'a Skills,
    &'a Subagents,
    &'a Workflows,
    &'a Held,
);

/// The own tools of `config` over `store` and the agent's parts (asking people through
/// `gate`), their waits ending at `shutdown`; `exec`'s commands given back the soft
/// `RLIMIT_NOFILE` of `nofile`.
fn own_tools(
    config: &Config,
    store: &Store,
    shutdown: &CancellationToken,
    metrics: &Arc<Metrics>,
    events_degraded: &Arc<AtomicBool>,
    (gate, instruction, skills, subagents, workflows, held): Agentry<'_>,
    nofile: Option<u64>,
) -> Arc<Own> {
    Arc::new(Own::new(
        store.clone(),
        config,
        shutdown.clone(),
        metrics.clone(),
        events_degraded.clone(),
        Parts {
            humans: gate.clone(),
            instruction: instruction.clone(),
            skills: skills.clone(),
            subagents: subagents.clone(),
            workflows: workflows.clone(),
            servers: Arc::new(held.clone()),
            nofile,
        },
    ))
}

/// What MCP Events reads of each server.
fn feeds(servers: &BTreeMap<String, Handle>) -> BTreeMap<String, Feed> {
    servers
        .iter()
        .map(|(name, h)| (name.clone(), h.feed()))
        .collect()
}

/// The provider of `model`, retrying as the reference says.
fn provider(model: &config::Model) -> Result<Chat, ModelError> {
    Chat::new(model, Retry::default(), crate::clock::random)
}
