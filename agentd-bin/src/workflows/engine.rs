//! The engine: one task holding the workflows in force and the runs under way ([`Runs`]),
//! taking the orders of the tools and the supervisor ([`Order`]), the outcomes of the
//! attempts it started, and its timers, on the daemon's [`Clock`](crate::clock::Clock)
//! (tokio's, so that a test whose clock is paused moves it).
//!
//! Starts ([`super::starts`]): the subscribe starts of the workflows in force are armed by
//! [`Arming`]; a change of the resource starts a run. An occurrence appended to a stream
//! starts a run of each event start on it: each start takes its stream's occurrences from
//! where it stands, the run kept with the start's new position in one transaction, at the
//! engine's start and whenever its stream is appended to; so an occurrence appended just
//! before a crash starts its run after it, and no occurrence starts two.
//!
//! Bounds ([`Bounds`]): at most `running_max` runs are under way; `workflow.run` past it is
//! refused (`too_many_runs`), a start past it waits for room, the starts served in the order
//! they came (an event start stays where it stands in its stream, a subscribe start is held
//! in the store, its change one a start, and fires at the engine's start when held). The runs
//! that ended longer than `retention` ago are pruned from the store at the engine's start and
//! every hour.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use agentd_tools::Error;
use agentd_tools::workflow::run::{Limits, Record};
use agentd_tools::workflow::{Defined, Definition, configured, unknown};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::time::sleep_until;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::arming::Arming;
use super::bounds::{Bounds, PRUNE_EVERY_MS};
use super::orders::{Appending, Order, Outcome};
use super::parts::{Agent, Servers, Tools};
use super::runs::Runs;
use super::starts::{self, Key};
use super::steps::Steps;
use crate::clock::random_bytes;
use crate::store::Store;
use crate::store::starts::Start;
use crate::telemetry::catalogue::own;

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
    /// The engine's bounds: `limits.run_concurrency`, `limits.run_retention`.
    pub(crate) bounds: Bounds,
    /// The configuration's workflows.
    pub(crate) configured: Vec<Definition>,
}

/// How many occurrences an event start reads at a time as it takes them up.
const TAKE_UP_PAGE: usize = 100;

/// How many ended runs one prune deletes; more are deleted at the engine's next turn, so
/// that its orders and timers are served between batches.
const PRUNE_BATCH: usize = 500;

/// A start waiting for room, in the order they came.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Waiting {
    /// A subscribe start whose resource changed (its input in [`Engine::deferred`]).
    Subscribe(Key),
    /// The event starts on a stream, stopped where they stand.
    Events(String),
}

/// The configuration's workflows, by name.
fn by_name(configured: Vec<Definition>) -> BTreeMap<String, Definition> {
    configured
        .into_iter()
        .map(|d| (d.name.clone(), d))
        .collect()
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
    bounds: Bounds,
    configured: BTreeMap<String, Definition>,
    /// The runs under way.
    runs: Runs,
    /// The streams told appended to, not yet taken up.
    appending: Appending,
    /// The streams an event start took a whole page of, and may have more.
    behind: BTreeSet<String>,
    /// The starts waiting for room, first come first served: one is in it once, however
    /// often it comes again while it waits.
    waiting: VecDeque<Waiting>,
    /// The subscribe starts fired for want of room, each with its run's input.
    deferred: BTreeMap<Key, Value>,
    /// The actor last listed of each server.
    actors: BTreeMap<String, u64>,
    /// The workflows made at runtime, by name (the store's).
    defined: BTreeMap<String, Definition>,
    /// The subscribe starts in force.
    arming: Arming,
    /// When the ended runs past their retention are pruned next (Unix ms).
    prune_at: i64,
    shutdown: CancellationToken,
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
        let instance = setup.instance;
        let steps = Arc::new(Steps {
            instance: instance.clone(),
            servers: setup.servers.clone(),
            tools,
            agent: setup.agent,
        });
        let store = setup.store;
        let runs = Runs::new(
            store.clone(),
            setup.limits,
            steps,
            outcomes,
            tasks,
            shutdown.clone(),
        );
        let engine = Self {
            arming: Arming::new(&instance, setup.servers, tasks.clone(), shutdown.clone()),
            instance,
            store,
            bounds: setup.bounds,
            configured: by_name(setup.configured),
            runs,
            appending,
            behind: BTreeSet::new(),
            waiting: VecDeque::new(),
            deferred: BTreeMap::new(),
            actors: BTreeMap::new(),
            defined: BTreeMap::new(),
            prune_at: i64::MIN,
            shutdown,
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
            let due = self.runs.next_due().unwrap_or(i64::MAX).min(self.prune_at);
            let at = self.runs.instant(due);
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => break,
                Some(order) = orders.recv() => self.on_order(order).await,
                Some(outcome) = told.recv() => self.runs.on_outcome(outcome).await,
                () = sleep_until(at) => {
                    self.prune().await;
                    self.runs.on_time().await;
                }
                () = std::future::ready(()), if !self.behind.is_empty() => {
                    if let Some(stream) = self.behind.pop_first() {
                        self.take_up(Some(&stream)).await;
                    }
                }
            }
            if self.runs.take_freed() {
                self.room().await;
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
        self.runs.restore().await;
        // The starts held before the restart come first, the event starts behind them.
        self.restore_held().await;
        self.room().await;
        self.take_up(None).await;
    }

    /// The subscribe starts held for room before the restart wait for it again, in the
    /// order they came, each with its resource's change; those no longer in force are let go.
    async fn restore_held(&mut self) {
        let held = match self.store.starts_held().await {
            Ok(held) => held,
            Err(e) => {
                let err = format!("the starts held for room not read: {e}");
                return own::workflow_unsaved(&self.instance, "*", &err);
            }
        };
        let wanted = starts::subscribes(starts::in_force(&self.configured, &self.defined));
        for key in held {
            match wanted.get(&key) {
                Some(resource) => {
                    let input = starts::updated_input(&resource.server, &resource.uri);
                    self.deferred.insert(key.clone(), input);
                    self.waiting.push_back(Waiting::Subscribe(key));
                }
                None => self.let_go(&key).await,
            }
        }
    }

    /// Start `key` is no longer held for room in the store.
    async fn let_go(&self, (workflow, node): &Key) {
        if let Err(e) = self.store.start_let_go(workflow, node).await {
            let err = format!("start {node:?} of workflow {workflow:?} not let go: {e}");
            own::workflow_unsaved(&self.instance, "*", &err);
        }
    }

    async fn on_order(&mut self, order: Order) {
        match order {
            Order::Configure {
                configured,
                limits,
                bounds,
            } => {
                self.configured = by_name(configured);
                self.runs.set_limits(limits);
                if bounds.retention < self.bounds.retention {
                    self.prune_at = i64::MIN;
                }
                self.bounds = bounds;
                self.arm("reload");
                self.take_up(None).await;
                self.room().await;
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
                let _ = answer.send(self.runs.current(&run).await);
            }
            Order::Command {
                run,
                command,
                answer,
            } => {
                let _ = answer.send(self.runs.command(&run, command).await);
            }
            Order::Updated { server, uri } => {
                self.runs.updated(&server, &uri).await;
                for (workflow, node) in self.arming.fired(&server, &uri) {
                    let input = starts::updated_input(&server, &uri);
                    self.fire(&workflow, &node, input).await;
                }
            }
            Order::Connected { server, actor } => {
                self.runs.connected(&server);
                let before = self.actors.insert(server.clone(), actor);
                let afresh = before.is_some_and(|b| b != actor).then_some("reload");
                if let Some(reason) = afresh {
                    self.runs.resubscribe(&server, reason);
                }
                self.arming.connected(&server, afresh);
            }
            Order::Unreachable { server } => {
                self.runs.unreachable(&server);
                self.arming.unreachable(&server);
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

    /// Whether one more run may start.
    fn has_room(&self) -> bool {
        self.runs.running() < self.bounds.running_max
    }

    /// `workflow.run`: the run kept, started and driven; refused (`store`) when the store
    /// does not take it, `too_many_runs` when as many run as [`Bounds::running_max`] allows.
    /// A run an event start takes an occurrence to start is kept with that start's new
    /// position (`from`), in one transaction.
    async fn start(
        &mut self,
        workflow: &str,
        input: Value,
        by: &str,
        from: Option<(&Start, i64)>,
    ) -> Result<Record, Error> {
        self.start_as(&new_id(), workflow, input, by, from).await
    }

    /// [`Engine::start`] of run `id`.
    async fn start_as(
        &mut self,
        id: &str,
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
        if !self.has_room() {
            return Err(Error::TooManyRuns {
                max: self.bounds.running_max,
            });
        }
        self.runs.start(id, definition, input, by, from).await
    }

    /// Start `node` of `workflow` starts a run with `input`; one past the bound waits for
    /// room, behind the starts waiting already (its last input kept, one a start), held in
    /// the store meanwhile. A run it cannot start (its input does not fit the workflow's
    /// schema, the store failed) is not started: logged `workflow.unsaved` under the run's
    /// id.
    async fn fire(&mut self, workflow: &str, node: &str, input: Value) {
        if !self.has_room() {
            let key = (workflow.to_owned(), node.to_owned());
            if self.deferred.insert(key.clone(), input).is_none() {
                self.waiting.push_back(Waiting::Subscribe(key));
                if let Err(e) = self.store.start_held(workflow, node).await {
                    let err = format!("start {node:?} of workflow {workflow:?} not held: {e}");
                    own::workflow_unsaved(&self.instance, "*", &err);
                }
            }
            return;
        }
        let id = new_id();
        let by = starts::by(node);
        if let Err(e) = self.start_as(&id, workflow, input, &by, None).await {
            let err = format!("start {node:?} of workflow {workflow:?}: {e}");
            own::workflow_unsaved(&self.instance, &id, &err);
        }
    }

    /// Room was freed: the starts that waited for it start theirs, in the order they came.
    /// An event start that fills the room again goes back to the end of the line.
    async fn room(&mut self) {
        while self.has_room()
            && let Some(next) = self.waiting.pop_front()
        {
            match next {
                Waiting::Subscribe(key) => {
                    // Not there when the start is no longer in force ([`Engine::arm`]).
                    if let Some(input) = self.deferred.remove(&key) {
                        self.fire(&key.0, &key.1, input).await;
                    }
                    // Let go once its run is kept: a crash between starts it again.
                    self.let_go(&key).await;
                }
                Waiting::Events(stream) => self.take_up(Some(&stream)).await,
            }
        }
    }

    /// The event starts on `stream` wait for room, where they stand.
    fn hold(&mut self, stream: &str) {
        let held = Waiting::Events(stream.to_owned());
        if !self.waiting.contains(&held) {
            self.waiting.push_back(held);
        }
    }

    /// The event starts in force (on `stream`, when given) take the occurrences appended
    /// after where each stands, each starting a run kept with the start's new position, a
    /// page at a time: a stream with more is taken up again once no order or outcome waits
    /// (a burst of occurrences holds up no `workflow.run` or status behind it). An
    /// occurrence that cannot start one (its input does not fit the workflow's schema) is
    /// passed over, logged `workflow.unsaved` under the run's id; a start whose store fails
    /// stays where it stands, logged, and takes up from there at the next occurrence or
    /// restart. Past the bound on runs, a start stays where it stands until one ends.
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

    /// [`Engine::take_up`] of one start, a page of its stream: whether more may follow (not
    /// when it stopped for want of room); why the store failed it.
    async fn take_up_one(&mut self, start: &Start) -> Result<bool, String> {
        let failed = |e: crate::store::Error| e.to_string();
        if !self.has_room() {
            self.hold(&start.stream);
            return Ok(false);
        }
        let at = self.store.start_position(start).await.map_err(failed)?;
        let read = self.store.read(&start.stream, at, TAKE_UP_PAGE).await;
        let entries = read.map_err(failed)?;
        let more = entries.len() == TAKE_UP_PAGE;
        for entry in entries {
            let input = serde_json::from_slice(&entry.bytes).unwrap_or(Value::Null);
            let (id, by) = (new_id(), starts::by(&start.node));
            let from = Some((start, entry.seq));
            match self.start_as(&id, &start.workflow, input, &by, from).await {
                Ok(_) => {}
                Err(Error::Store { detail }) => return Err(detail),
                // Where it stands: taken up again once a run ends.
                Err(Error::TooManyRuns { .. }) => {
                    self.hold(&start.stream);
                    return Ok(false);
                }
                Err(e) => {
                    let (node, workflow) = (&start.node, &start.workflow);
                    let err = format!("start {node:?} of workflow {workflow:?}: {e}");
                    own::workflow_unsaved(&self.instance, &id, &err);
                    let passed = self.store.start_passed(start, entry.seq).await;
                    passed.map_err(failed)?;
                }
            }
        }
        Ok(more)
    }

    /// The subscribe starts in force are made those of the workflows in force (`reason`).
    fn arm(&mut self, reason: &'static str) {
        let wanted = starts::subscribes(starts::in_force(&self.configured, &self.defined));
        // A change of a resource the start no longer watches starts nothing.
        self.deferred.retain(|key, input| {
            let watched = wanted.get(key);
            watched.is_some_and(|r| starts::updated_input(&r.server, &r.uri) == *input)
        });
        self.arming.arm(wanted, reason);
    }

    /// The runs that ended before [`Bounds::retention`] ago are pruned, with their steps,
    /// when it is time (at the start, then every hour), [`PRUNE_BATCH`] at a time: while a
    /// batch is full, the next is due at once, behind the orders and outcomes waiting.
    async fn prune(&mut self) {
        let now = self.runs.now_ms();
        if self.prune_at > now {
            return;
        }
        self.prune_at = now.saturating_add(PRUNE_EVERY_MS);
        let since = self.bounds.kept_since(now);
        match self.store.runs_prune(since, PRUNE_BATCH).await {
            Ok(pruned) if pruned == PRUNE_BATCH => self.prune_at = now,
            Ok(_) => {}
            Err(e) => own::workflow_prune_fail(&self.instance, &e.to_string()),
        }
    }
}
