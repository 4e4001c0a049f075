//! The engine: one task holding every run that did not end, driving each ([`Run`]) with the
//! orders of the tools and the supervisor, the outcomes of the attempts it started, and its
//! timers, on tokio's clock (Unix milliseconds anchored at its start, so that a test whose
//! clock is paused moves it).
//!
//! Driving a run: each action it hands out is taken in turn, the run's record kept in the
//! store first whenever it changed, so that an attempt is kept as sent before it is sent.
//! An attempt runs on a task of its own and tells its outcome back; an attempt the run gives
//! up (its timeout, a cancel) is cancelled. A wait's resource is subscribed (owner
//! `workflow:<run>`) by a task of its own that tells back a failure that will not pass.
//!
//! Starts ([`super::starts`]): the subscribe starts of the workflows in force are armed by a
//! task each (owner `start:<workflow>/<node>`) at the engine's start, at each reload or
//! definition that adds one, and again on a server dialed afresh; a change of the resource
//! starts a run. An occurrence appended to a stream starts a run of each event start on it:
//! each start takes its stream's occurrences from where it stands, the run kept with the
//! start's new position in one transaction, at the engine's start and whenever its stream is
//! appended to; so an occurrence appended just before a crash starts its run after it, and
//! no occurrence starts two.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use agentd_tools::Error;
use agentd_tools::workflow::run::{
    Action, Execute, Failure, Limits, Record, Run, StepStatus, Watched,
};
use agentd_tools::workflow::{Command, Defined, Definition, configured, unknown};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::parts::{Agent, Servers, Tools, Unsubscribed};
use super::starts::{self, Key, Resource};
use super::steps::Steps;
use super::unsaved::Unsaved;
use crate::clock::{random_bytes, wall_ms};
use crate::store::Store;
use crate::store::starts::Start;
use crate::telemetry::catalogue::own;
use crate::telemetry::catalogue::subscriptions::{self, StartOf, Stuck};

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

/// How many occurrences an event start reads at a time as it takes them up.
const TAKE_UP_PAGE: usize = 100;

/// The streams told appended to and not yet taken up, each with one
/// [`Order::Appended`] on its way: the occurrences a burst of commits appends are taken up
/// at one order, not one order a commit.
pub(super) type Appending = Arc<std::sync::Mutex<BTreeSet<String>>>;

/// An order to the engine.
pub(super) enum Order {
    Configure {
        configured: Vec<Definition>,
        limits: Limits,
    },
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
    Unreachable {
        server: String,
    },
    Appended {
        stream: String,
    },
    Restored {
        answer: oneshot::Sender<()>,
    },
}

impl fmt::Debug for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Configure { .. } => "Configure",
            Self::Define { .. } => "Define",
            Self::Delete { .. } => "Delete",
            Self::Run { .. } => "Run",
            Self::Status { .. } => "Status",
            Self::Command { .. } => "Command",
            Self::Updated { .. } => "Updated",
            Self::Connected { .. } => "Connected",
            Self::Unreachable { .. } => "Unreachable",
            Self::Appended { .. } => "Appended",
            Self::Restored { .. } => "Restored",
        })
    }
}

/// The configuration's workflows, by name.
fn by_name(configured: Vec<Definition>) -> BTreeMap<String, Definition> {
    configured
        .into_iter()
        .map(|d| (d.name.clone(), d))
        .collect()
}

/// What an attempt, or a wait's subscribe, came to.
#[derive(Debug)]
struct Outcome {
    run: String,
    step: usize,
    attempt: u32,
    outcome: Result<Value, Failure>,
}

/// Unix milliseconds on tokio's clock.
#[derive(Debug, Clone, Copy)]
struct Time {
    wall_ms: i64,
    start: Instant,
}

impl Time {
    fn new() -> Self {
        Self {
            wall_ms: wall_ms(),
            start: Instant::now(),
        }
    }

    fn now_ms(&self) -> i64 {
        let since = i64::try_from(self.start.elapsed().as_millis()).unwrap_or(i64::MAX);
        self.wall_ms.saturating_add(since)
    }

    /// The instant of Unix millisecond `ms` (now, when it is past).
    fn instant(&self, ms: i64) -> Instant {
        let ahead = ms.saturating_sub(self.now_ms()).max(0);
        Instant::now() + std::time::Duration::from_millis(u64::try_from(ahead).unwrap_or(0))
    }
}

/// The owner of a run's subscriptions on its servers.
fn owner(run: &str) -> String {
    format!("workflow:{run}")
}

/// A run's id: 32 hex digits, random (the trace id of its calls).
fn new_id() -> String {
    let mut bytes: [u8; 16] = random_bytes();
    if bytes == [0; 16] {
        bytes[15] = 1;
    }
    crate::agent::meta::hex(&bytes)
}

/// The engine's task.
pub(super) struct Engine {
    instance: String,
    store: Store,
    limits: Limits,
    configured: BTreeMap<String, Definition>,
    /// The runs that did not end, by id.
    active: BTreeMap<String, Run>,
    /// The attempts under way, by run, step and attempt.
    executing: BTreeMap<(String, usize, u32), CancellationToken>,
    /// The streams told appended to, not yet taken up.
    appending: Appending,
    /// The streams an event start took a whole page of, and may have more.
    behind: BTreeSet<String>,
    /// The runs whose record the store did not take, set back to what it keeps.
    unsaved: Unsaved,
    /// The subscribe of each run's wait under way: given up when the wait lets its resource
    /// go first, so that a release is never overtaken by the subscribe it undoes.
    subscribing: BTreeMap<String, CancellationToken>,
    /// The actor last listed of each server.
    actors: BTreeMap<String, u64>,
    /// The workflows made at runtime, by name (the store's).
    defined: BTreeMap<String, Definition>,
    /// The subscribe starts in force, with the token that gives up their arming.
    armed: BTreeMap<Key, (Resource, CancellationToken)>,
    /// The servers whose subscribe starts were said `start.subscribe.no_server` since they
    /// were last connected.
    unreachable: BTreeSet<String>,
    steps: Arc<Steps>,
    outcomes: mpsc::UnboundedSender<Outcome>,
    tasks: TaskTracker,
    shutdown: CancellationToken,
    time: Time,
}

impl Engine {
    /// Starts the engine of `setup` on `tasks`, taking `orders` until `shutdown`.
    pub(super) fn spawn(
        setup: Setup,
        (orders, appending): (mpsc::UnboundedReceiver<Order>, Appending),
        tools: watch::Receiver<Option<Arc<dyn Tools>>>,
        tasks: &TaskTracker,
        shutdown: CancellationToken,
    ) {
        let (outcomes, told) = mpsc::unbounded_channel();
        let engine = Self {
            steps: Arc::new(Steps {
                instance: setup.instance.clone(),
                servers: setup.servers,
                tools,
                agent: setup.agent,
            }),
            instance: setup.instance,
            store: setup.store,
            limits: setup.limits,
            configured: by_name(setup.configured),
            active: BTreeMap::new(),
            executing: BTreeMap::new(),
            appending,
            behind: BTreeSet::new(),
            unsaved: Unsaved::default(),
            subscribing: BTreeMap::new(),
            actors: BTreeMap::new(),
            defined: BTreeMap::new(),
            armed: BTreeMap::new(),
            unreachable: BTreeSet::new(),
            outcomes,
            tasks: tasks.clone(),
            shutdown,
            time: Time::new(),
        };
        tasks.spawn(engine.run(orders, told));
    }

    async fn run(
        mut self,
        mut orders: mpsc::UnboundedReceiver<Order>,
        mut told: mpsc::UnboundedReceiver<Outcome>,
    ) {
        self.restore().await;
        loop {
            let timeouts = self.active.values().filter_map(Run::poll_timeout);
            let due = timeouts.chain(self.unsaved.next_due()).min();
            let at = due.map(|ms| self.time.instant(ms));
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => break,
                Some(order) = orders.recv() => self.on_order(order).await,
                Some(outcome) = told.recv() => self.on_outcome(outcome).await,
                () = sleep_until(at.unwrap_or_else(Instant::now)), if at.is_some() => {
                    self.on_time().await;
                }
                () = std::future::ready(()), if !self.behind.is_empty() => {
                    if let Some(stream) = self.behind.pop_first() {
                        self.take_up(Some(&stream)).await;
                    }
                }
            }
        }
        // What is under way is cancelled by the shutdown; its outcome is not kept.
    }

    /// Reads the workflows the store holds and arms their starts, then resumes the runs the
    /// store holds unsettled.
    async fn restore(&mut self) {
        match self.store.workflows_defined().await {
            Ok(kept) => {
                for (name, body) in kept {
                    match Definition::parse(&name, &body) {
                        Ok(definition) => {
                            self.defined.insert(name, definition);
                        }
                        Err(e) => {
                            let err = format!("workflow {name:?} kept does not parse: {e}");
                            own::workflow_unsaved(&self.instance, "*", &err);
                        }
                    }
                }
            }
            Err(e) => {
                let err = format!("workflows not read: {e}");
                own::workflow_unsaved(&self.instance, "*", &err);
            }
        }
        self.arm("start");
        let kept = match self.store.runs_unsettled().await {
            Ok(kept) => kept,
            Err(e) => {
                own::workflow_unsaved(&self.instance, "*", &format!("runs not read: {e}"));
                return;
            }
        };
        for record in kept {
            let id = record.id.clone();
            match Run::restore(record.clone(), self.limits.value_max) {
                Ok(run) => {
                    self.active.insert(id.clone(), run);
                }
                Err(e) => {
                    // Kept failed: the definition it started with no longer parses.
                    let mut failed = record;
                    failed.status = agentd_tools::workflow::Status::Failed;
                    failed.error = Some(Failure::new("definition", e.to_string()));
                    failed.ended_ms = Some(self.time.now_ms());
                    self.save(failed).await;
                    continue;
                }
            }
            self.drive(&id).await;
        }
        self.take_up(None).await;
    }

    async fn on_order(&mut self, order: Order) {
        match order {
            Order::Configure { configured, limits } => {
                self.configured = by_name(configured);
                self.limits = limits;
                self.arm("reload");
                self.take_up(None).await;
            }
            Order::Define {
                definition,
                create,
                answer,
            } => {
                let _ = answer.send(self.define(definition, create).await);
            }
            Order::Delete { name, answer } => {
                let deleted = match self.configured.contains_key(&name) {
                    true => Err(configured("workflow.delete", &name)),
                    false => self
                        .store
                        .workflow_delete(&name)
                        .await
                        .map_err(|e| e.into_tool("workflow.delete", &name)),
                };
                if deleted.is_ok() {
                    self.defined.remove(&name);
                    self.arm("defined");
                    self.take_up(None).await;
                }
                let _ = answer.send(deleted);
            }
            Order::Run {
                workflow,
                input,
                by,
                answer,
            } => {
                let _ = answer.send(self.start(&workflow, input, &by, None).await);
            }
            Order::Status { run, answer } => {
                let record = match self.active.get(&run) {
                    Some(active) => Ok(active.record().clone()),
                    None => self.kept(&run).await,
                };
                let _ = answer.send(record);
            }
            Order::Command {
                run,
                command,
                answer,
            } => {
                let _ = answer.send(self.command(&run, command).await);
            }
            Order::Updated { server, uri } => {
                let now = self.time.now_ms();
                let ended: Vec<String> = self
                    .active
                    .iter_mut()
                    .filter_map(|(id, run)| run.updated(&server, &uri, now).then(|| id.clone()))
                    .collect();
                for id in ended {
                    self.drive(&id).await;
                }
                let fired: Vec<Key> = self
                    .armed
                    .iter()
                    .filter(|(_, (r, _))| r.server == server && r.uri == uri)
                    .map(|(key, _)| key.clone())
                    .collect();
                for (workflow, node) in fired {
                    let input = starts::updated_input(&server, &uri);
                    self.fire(&workflow, &node, input).await;
                }
            }
            Order::Connected { server, actor } => {
                self.unreachable.remove(&server);
                let before = self.actors.insert(server.clone(), actor);
                if before.is_some_and(|b| b != actor) {
                    self.resubscribe(&server, "reload");
                    self.rearm(&server, "reload");
                }
            }
            Order::Unreachable { server } => {
                if self.unreachable.insert(server.clone()) {
                    for ((workflow, node), (resource, _)) in &self.armed {
                        if resource.server == server {
                            subscriptions::start_no_server(StartOf {
                                instance: &self.instance,
                                workflow,
                                node,
                                server: &server,
                                uri: &resource.uri,
                            });
                        }
                    }
                }
            }
            Order::Appended { stream } => {
                // Taken off first: what is appended while it is taken up is told again.
                let appending = self.appending.lock();
                appending.unwrap_or_else(|e| e.into_inner()).remove(&stream);
                self.take_up(Some(&stream)).await;
            }
            // Orders are taken once the store's runs and starts are restored.
            Order::Restored { answer } => {
                let _ = answer.send(());
            }
        }
    }

    /// `workflow.create` or `workflow.update`.
    async fn define(&mut self, definition: Definition, create: bool) -> Result<Defined, Error> {
        let name = definition.name.clone();
        let tool = if create {
            "workflow.create"
        } else {
            "workflow.update"
        };
        if self.configured.contains_key(&name) {
            return Err(match create {
                true => Error::Exists {
                    what: format!("workflow {name:?} (in the configuration)"),
                },
                false => configured(tool, &name),
            });
        }
        let steps = definition.steps.len();
        let body = definition.body().clone();
        match self.store.workflow_define(&name, body, create).await {
            Ok(version) => {
                self.defined.insert(name.clone(), definition);
                self.arm("defined");
                self.take_up(None).await;
                Ok(Defined::new(&name, version, steps))
            }
            Err(crate::store::Error::Exists { .. }) => Err(Error::Exists {
                what: format!("workflow {name:?}"),
            }),
            Err(crate::store::Error::NotFound { .. }) => Err(unknown(&name)),
            Err(e) => Err(e.into_tool(tool, &name)),
        }
    }

    /// `workflow.run`: the run kept, started and driven; refused (`store`) when the store
    /// does not take it.
    /// A run an event start takes an occurrence to start is kept with that start's new
    /// position (`from`), in one transaction.
    async fn start(
        &mut self,
        workflow: &str,
        input: Value,
        by: &str,
        from: Option<(&Start, i64)>,
    ) -> Result<Record, Error> {
        let definition = match self.configured.get(workflow) {
            Some(definition) => definition.clone(),
            None => {
                let kept = self.store.workflow_get(workflow).await;
                let kept = kept.map_err(|e| e.into_tool("workflow.run", workflow))?;
                let kept = kept.ok_or_else(|| unknown(workflow))?;
                Definition::parse(workflow, &kept.body).map_err(|e| Error::Store {
                    detail: format!("workflow {workflow:?} kept does not parse: {e}"),
                })?
            }
        };
        let id = new_id();
        let run = Run::start(&id, definition, input, by, self.limits, self.time.now_ms())?;
        // Kept before anything of it is sent or told: a run the store does not take is not
        // started, and its caller hears why.
        let record = run.record().clone();
        let kept = match from {
            Some((start, position)) => self.store.run_started(record, start, position).await,
            None => self.store.run_save(record).await,
        };
        kept.map_err(|e| Error::Store {
            detail: format!("run of workflow {workflow:?} not kept: {e}"),
        })?;
        own::workflow_started(&self.instance, &id, workflow, by);
        self.active.insert(id.clone(), run);
        self.drive(&id).await;
        self.current(&id).await
    }

    /// Start `node` of `workflow` starts a run with `input`. A run it cannot start (its
    /// input does not fit the workflow's schema, the store failed) is not started; it is
    /// logged `workflow.unsaved` under run `*`.
    async fn fire(&mut self, workflow: &str, node: &str, input: Value) {
        if let Err(e) = self.start(workflow, input, &starts::by(node), None).await {
            let err = format!("start {node:?} of workflow {workflow:?}: {e}");
            own::workflow_unsaved(&self.instance, "*", &err);
        }
    }

    /// The event starts in force (on `stream`, when given) take the occurrences appended
    /// after where each stands, each starting a run kept with the start's new position, a
    /// page at a time: a stream with more is taken up again once no order or outcome waits
    /// (a burst of occurrences holds up no `workflow.run` or status behind it). An
    /// occurrence that cannot start one (its input does not fit the workflow's schema) is
    /// passed over, logged `workflow.unsaved` under run `*`; a start whose store fails
    /// stays where it stands, logged, and takes up from there at the next occurrence or
    /// restart.
    ///
    /// Without a stream (the starts in force may have changed), the positions of the starts
    /// no longer in force are forgotten first.
    async fn take_up(&mut self, stream: Option<&str>) {
        let taking = starts::events(starts::in_force(&self.configured, &self.defined));
        if stream.is_none()
            && let Err(e) = self.store.starts_keep(taking.clone()).await
        {
            let err = format!("the starts' positions not pruned: {e}");
            own::workflow_unsaved(&self.instance, "*", &err);
        }
        for start in taking {
            if stream.is_some_and(|s| s != start.stream) {
                continue;
            }
            match self.take_up_one(&start).await {
                Ok(true) => {
                    self.behind.insert(start.stream);
                }
                Ok(false) => {}
                Err(e) => {
                    let (node, workflow) = (&start.node, &start.workflow);
                    let err = format!("start {node:?} of workflow {workflow:?}: {e}");
                    own::workflow_unsaved(&self.instance, "*", &err);
                }
            }
        }
    }

    /// [`Engine::take_up`] of one start, a page of its stream: whether more may follow;
    /// why the store failed it.
    async fn take_up_one(&mut self, start: &Start) -> Result<bool, String> {
        let failed = |e: crate::store::Error| e.to_string();
        let at = self.store.start_position(start).await.map_err(failed)?;
        let read = self.store.read(&start.stream, at, TAKE_UP_PAGE).await;
        let entries = read.map_err(failed)?;
        let more = entries.len() == TAKE_UP_PAGE;
        for entry in entries {
            let input = serde_json::from_slice(&entry.bytes).unwrap_or(Value::Null);
            let by = starts::by(&start.node);
            let from = Some((start, entry.seq));
            match self.start(&start.workflow, input, &by, from).await {
                Ok(_) => {}
                Err(Error::Store { detail }) => return Err(detail),
                Err(e) => {
                    let (node, workflow) = (&start.node, &start.workflow);
                    let err = format!("start {node:?} of workflow {workflow:?}: {e}");
                    own::workflow_unsaved(&self.instance, "*", &err);
                    let passed = self.store.start_passed(start, entry.seq).await;
                    passed.map_err(failed)?;
                }
            }
        }
        Ok(more)
    }

    /// The subscribe starts in force are made those of the workflows in force: one no
    /// longer there is given up and released, one new is armed (`reason`).
    fn arm(&mut self, reason: &'static str) {
        let wanted = starts::subscribes(starts::in_force(&self.configured, &self.defined));
        let gone: Vec<Key> = self
            .armed
            .iter()
            .filter(|(key, (resource, _))| wanted.get(*key) != Some(resource))
            .map(|(key, _)| key.clone())
            .collect();
        for key in gone {
            if let Some((resource, arming)) = self.armed.remove(&key) {
                arming.cancel();
                let (servers, owner) = (self.steps.servers.clone(), starts::owner(&key));
                self.tasks.spawn(async move {
                    let _ = servers
                        .release(&resource.server, &resource.uri, &owner)
                        .await;
                });
            }
        }
        for (key, resource) in wanted {
            if !self.armed.contains_key(&key) {
                self.arm_one(key, resource, reason);
            }
        }
    }

    /// The subscribe starts on `server` are armed again (`reason`): it was dialed afresh.
    fn rearm(&mut self, server: &str, reason: &'static str) {
        let on: Vec<(Key, Resource)> = self
            .armed
            .iter()
            .filter(|(_, (r, _))| r.server == server)
            .map(|(key, (r, _))| (key.clone(), r.clone()))
            .collect();
        for (key, resource) in on {
            self.arm_one(key, resource, reason);
        }
    }

    /// Arms subscribe start `key` on a task of its own, once its server is connected: a
    /// server not configured is `start.subscribe.no_server`, one that offers no
    /// subscriptions `start.subscribe.unsupported`; one whose server is known unreachable is
    /// said `start.subscribe.no_server` at once.
    fn arm_one(&mut self, key: Key, resource: Resource, reason: &'static str) {
        let arming = self.shutdown.child_token();
        let entry = (resource.clone(), arming.clone());
        if let Some((_, before)) = self.armed.insert(key.clone(), entry) {
            before.cancel();
        }
        if self.unreachable.contains(&resource.server) {
            subscriptions::start_no_server(StartOf {
                instance: &self.instance,
                workflow: &key.0,
                node: &key.1,
                server: &resource.server,
                uri: &resource.uri,
            });
        }
        let (servers, instance) = (self.steps.servers.clone(), self.instance.clone());
        self.tasks.spawn(async move {
            let (workflow, node) = &key;
            let Resource { server, uri } = &resource;
            let of = StartOf {
                instance: &instance,
                workflow,
                node,
                server,
                uri,
            };
            let owner = starts::owner(&key);
            let subscribed = tokio::select! {
                subscribed = servers.subscribe(server, uri, &owner) => subscribed,
                () = arming.cancelled() => return,
            };
            match subscribed {
                Ok(()) => subscriptions::start_armed(of, reason),
                Err(Unsubscribed::MayPass(err)) => subscriptions::start_fail(of, &err),
                Err(e @ Unsubscribed::Unsupported) => {
                    subscriptions::start_unsupported(of, &e.to_string());
                }
                Err(Unsubscribed::Unknown) => subscriptions::start_no_server(of),
                // Let go by a reload: armed again when the server is held afresh.
                Err(Unsubscribed::Gone) => {}
            }
        });
    }

    /// A run as it stands: the engine's, else the store's.
    async fn current(&self, id: &str) -> Result<Record, Error> {
        match self.active.get(id) {
            Some(run) => Ok(run.record().clone()),
            None => self.kept(id).await,
        }
    }

    /// Run `id` as the store keeps it.
    async fn kept(&self, id: &str) -> Result<Record, Error> {
        let kept = self.store.run_get(id).await;
        kept.map_err(|e| e.into_tool("workflow.status", id))?
            .ok_or_else(|| Error::UnknownRun { run: id.to_owned() })
    }

    async fn command(&mut self, id: &str, command: Command) -> Result<Record, Error> {
        let now = self.time.now_ms();
        if self.unsaved.contains(id) {
            return Err(not_kept(id));
        }
        let Some(run) = self.active.get_mut(id) else {
            // Not under way: ended, or never started.
            let kept = self.kept(id).await?;
            return Err(Error::AlreadyFinished {
                unit: format!("run:{}", kept.id),
            });
        };
        match command {
            Command::Cancel => run.cancel(now),
            Command::Pause => run.pause(now),
            Command::Resume => run.resume(now),
            Command::Signal { name, payload } => run.signal(&name, payload, now),
            _ => Err(Error::NotBuilt {
                tool: "workflow".to_owned(),
            }),
        }?;
        self.drive(id).await;
        if self.unsaved.contains(id) {
            return Err(not_kept(id));
        }
        self.current(id).await
    }

    async fn on_outcome(&mut self, told: Outcome) {
        self.executing
            .remove(&(told.run.clone(), told.step, told.attempt));
        let now = self.time.now_ms();
        let Some(run) = self.active.get_mut(&told.run) else {
            return;
        };
        let retrying = told.outcome.as_ref().err().cloned();
        run.handle_outcome(told.step, told.attempt, told.outcome, now);
        self.said_retry(&told.run, told.step, told.attempt, retrying, now);
        self.drive(&told.run).await;
    }

    /// `workflow.retry` when step `step` of run `id` is retrying after `failure`.
    fn said_retry(&self, id: &str, step: usize, attempt: u32, failure: Option<Failure>, now: i64) {
        let (Some(run), Some(failure)) = (self.active.get(id), failure) else {
            return;
        };
        let Some(kept) = run.record().steps.get(step) else {
            return;
        };
        if kept.status == StepStatus::Retrying && kept.attempt == attempt {
            let wait = kept.due_ms.unwrap_or(now).saturating_sub(now);
            own::workflow_retry(
                &self.instance,
                id,
                &kept.id,
                attempt,
                &failure.to_string(),
                wait,
            );
        }
    }

    /// The timers that are due go off; the runs set back that are due are read back.
    async fn on_time(&mut self) {
        let now = self.time.now_ms();
        for id in self.unsaved.due(now) {
            self.read_back(&id, now).await;
        }
        let due: Vec<String> = self
            .active
            .iter()
            .filter(|(_, run)| run.poll_timeout().is_some_and(|at| at <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            if let Some(run) = self.active.get_mut(&id) {
                let step = run.record().step;
                let attempt = run.record().steps.get(step).map(|s| s.attempt);
                run.handle_timeout(now);
                let failure = run.record().steps.get(step).and_then(|s| s.error.clone());
                if let Some(attempt) = attempt {
                    self.said_retry(&id, step, attempt, failure, now);
                }
            }
            self.drive(&id).await;
        }
    }

    /// Takes every action of run `id`, its record kept first whenever it changed; a run
    /// that ended leaves the engine.
    async fn drive(&mut self, id: &str) {
        loop {
            let now = self.time.now_ms();
            let Some(run) = self.active.get_mut(id) else {
                return;
            };
            let action = run.poll_action(now);
            if run.take_changed() {
                let record = run.record().clone();
                if let Err(e) = self.store.run_save(record).await {
                    own::workflow_unsaved(&self.instance, id, &e.to_string());
                    self.set_back(id, now);
                    return;
                }
            }
            match action {
                None => break,
                Some(Action::Execute(execute)) => self.execute(id, execute),
                Some(Action::Subscribe {
                    step,
                    attempt,
                    watched,
                    again,
                }) => {
                    let reason = again.then_some("restart");
                    self.subscribe(id, step, attempt, watched, reason);
                }
                Some(Action::Release { watched }) => self.release(id, watched),
                Some(Action::Abandon { step, attempt }) => {
                    if let Some(token) = self.executing.remove(&(id.to_owned(), step, attempt)) {
                        token.cancel();
                    }
                }
                Some(_) => {}
            }
        }
        let settled = self.active.get(id).is_some_and(Run::is_settled);
        if settled && let Some(run) = self.active.remove(id) {
            self.subscribing.remove(id);
            let record = run.record();
            let err = record.error.as_ref().map(Failure::to_string);
            let status = record.status.as_str();
            own::workflow_ended(&self.instance, id, &record.workflow, status, err.as_deref());
        }
    }

    /// Run `id`, whose record the store did not take, is let go: its attempts under way
    /// and its wait's subscribe given up, to be read back from the store ([`Unsaved`]).
    fn set_back(&mut self, id: &str, now: i64) {
        self.active.remove(id);
        let mine: Vec<_> = self
            .executing
            .keys()
            .filter(|k| k.0 == id)
            .cloned()
            .collect();
        for key in mine {
            if let Some(token) = self.executing.remove(&key) {
                token.cancel();
            }
        }
        if let Some(subscribing) = self.subscribing.remove(id) {
            subscribing.cancel();
        }
        self.unsaved.set_back(id, now);
    }

    /// Reads run `id`, set back, from the store and resumes it from there, as at a restart;
    /// set back again when the store does not answer.
    async fn read_back(&mut self, id: &str, now: i64) {
        let record = match self.store.run_get(id).await {
            Ok(Some(record)) => record,
            Ok(None) => {
                self.unsaved.forget(id);
                return;
            }
            Err(e) => {
                own::workflow_unsaved(&self.instance, id, &format!("not read back: {e}"));
                self.unsaved.set_back(id, now);
                return;
            }
        };
        match Run::restore(record, self.limits.value_max) {
            Ok(run) => {
                self.active.insert(id.to_owned(), run);
                self.drive(id).await;
            }
            // Kept as it was: it parsed when it started.
            Err(e) => own::workflow_unsaved(&self.instance, id, &format!("not resumed: {e}")),
        }
        self.unsaved.resumed(id, now);
    }

    /// Keeps `record`; a failure is logged.
    async fn save(&self, record: Record) {
        let id = record.id.clone();
        if let Err(e) = self.store.run_save(record).await {
            own::workflow_unsaved(&self.instance, &id, &e.to_string());
        }
    }

    /// Starts attempt `execute` of run `id` on a task of its own.
    fn execute(&mut self, id: &str, execute: Execute) {
        let cancel = self.shutdown.child_token();
        let key = (id.to_owned(), execute.step, execute.attempt);
        self.executing.insert(key, cancel.clone());
        let (steps, told, run) = (self.steps.clone(), self.outcomes.clone(), id.to_owned());
        let deadline = self.time.instant(execute.deadline_ms);
        self.tasks.spawn(async move {
            let outcome = steps.execute(&run, &execute, deadline, &cancel).await;
            if cancel.is_cancelled() {
                // Given up, or the daemon stops: nobody wants it.
                return;
            }
            let _ = told.send(Outcome {
                run,
                step: execute.step,
                attempt: execute.attempt,
                outcome,
            });
        });
    }

    /// Subscribes `watched` for step `step` of run `id` on a task of its own: a failure that
    /// will not pass fails the wait. `reason` when it is subscribed again (logged).
    fn subscribe(
        &mut self,
        id: &str,
        step: usize,
        attempt: u32,
        watched: Watched,
        reason: Option<&'static str>,
    ) {
        let servers = self.steps.servers.clone();
        let (told, run, instance) = (self.outcomes.clone(), id.to_owned(), self.instance.clone());
        let given_up = self.shutdown.child_token();
        if let Some(before) = self.subscribing.insert(id.to_owned(), given_up.clone()) {
            before.cancel();
        }
        self.tasks.spawn(async move {
            let Watched { server, uri, .. } = &watched;
            if let Some(reason) = reason {
                parked(&*servers, &instance, server, uri, reason);
            }
            let owner = owner(&run);
            let subscribed = tokio::select! {
                subscribed = servers.subscribe(server, uri, &owner) => subscribed,
                () = given_up.cancelled() => return,
            };
            let failure = match subscribed {
                Ok(()) => {
                    if let Some(reason) = reason {
                        subscriptions::wait_resubscribed(&instance, server, uri, reason);
                    }
                    return;
                }
                Err(Unsubscribed::MayPass(err)) => {
                    if let Some(reason) = reason {
                        subscriptions::wait_resubscribe_fail(&instance, server, uri, reason, &err);
                    }
                    return;
                }
                Err(e @ (Unsubscribed::Unknown | Unsubscribed::Unsupported)) => {
                    if let Some(reason) = reason {
                        let stuck = Stuck::Failed(1);
                        let err = e.to_string();
                        subscriptions::wait_resubscribe_stuck(
                            &instance, server, uri, reason, &err, stuck,
                        );
                    }
                    let code = match e {
                        Unsubscribed::Unknown => "unknown_server",
                        _ => "unsupported",
                    };
                    Failure::new(code, e.to_string())
                }
                // Let go by a reload: subscribed again when the server is held afresh.
                Err(Unsubscribed::Gone) => return,
            };
            let _ = told.send(Outcome {
                run,
                step,
                attempt,
                outcome: Err(failure),
            });
        });
    }

    /// Every wait on `server` under way is subscribed again (`reason`).
    fn resubscribe(&mut self, server: &str, reason: &'static str) {
        let parked: Vec<(String, usize, u32, Watched)> = self
            .active
            .iter()
            .filter_map(|(id, run)| {
                let record = run.record();
                let step = record.steps.get(record.step)?;
                let watched = step.watched.as_ref()?;
                let parked = step.status == StepStatus::Waiting && watched.server == server;
                parked.then(|| (id.clone(), record.step, step.attempt, watched.clone()))
            })
            .collect();
        for (id, step, attempt, watched) in parked {
            self.subscribe(&id, step, attempt, watched, Some(reason));
        }
    }

    /// Releases `watched` of run `id` on a task of its own, its subscribe given up if it is
    /// still under way (a failure is the server task's to log and try again).
    fn release(&mut self, id: &str, watched: Watched) {
        if let Some(subscribing) = self.subscribing.remove(id) {
            subscribing.cancel();
        }
        let servers = self.steps.servers.clone();
        let owner = owner(id);
        self.tasks.spawn(async move {
            let _ = servers.release(&watched.server, &watched.uri, &owner).await;
        });
    }
}

/// A command to run `id`, set back: refused, what it would change not kept.
fn not_kept(id: &str) -> Error {
    Error::Store {
        detail: format!(
            "run {id}: a change was not kept; it goes on from what the store keeps once the \
             store reads it back"
        ),
    }
}

/// `wait.resubscribe.fail` (error, parked) when a parked wait's server is configured but not
/// connected: it is subscribed once the server is.
fn parked(servers: &dyn Servers, instance: &str, server: &str, uri: &str, reason: &str) {
    let (configured, connected) = servers.state(server);
    if configured && !connected {
        let err = "the server is not connected";
        subscriptions::wait_resubscribe_stuck(instance, server, uri, reason, err, Stuck::Parked(1));
    }
}
