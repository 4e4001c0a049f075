//! The engine: one task holding every run that did not end, driving each ([`Run`]) with the
//! orders of the tools and the supervisor ([`Order`]), the outcomes of the attempts it
//! started, and its timers, on the daemon's [`Clock`] (tokio's, so that a test whose clock is
//! paused moves it). The runs under way are found by their timer and by the resource they
//! watch ([`Due`]), not by looking at each.
//!
//! Driving a run: each action it hands out is taken in turn, the run's record kept in the
//! store first whenever it changed, so that an attempt is kept as sent before it is sent.
//! An attempt runs on a task of its own and tells its outcome back; an attempt the run gives
//! up (its timeout, a cancel) is cancelled. A wait's resource is subscribed by [`Waits`].
//!
//! Starts ([`super::starts`]): the subscribe starts of the workflows in force are armed by
//! [`Arming`]; a change of the resource starts a run. An occurrence appended to a stream
//! starts a run of each event start on it: each start takes its stream's occurrences from
//! where it stands, the run kept with the start's new position in one transaction, at the
//! engine's start and whenever its stream is appended to; so an occurrence appended just
//! before a crash starts its run after it, and no occurrence starts two.
//!
//! Bounds ([`Bounds`]): at most `running_max` runs are under way; `workflow.run` past it is
//! refused (`too_many_runs`), a start past it waits for a run to end (an event start stays
//! where it stands in its stream, a subscribe start's change is kept, one a start). The runs
//! that ended longer than `retention` ago are pruned from the store at the engine's start and
//! every hour.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use agentd_tools::Error;
use agentd_tools::wait::Clock as _;
use agentd_tools::workflow::run::{Action, Execute, Failure, Limits, Record, Run, StepStatus};
use agentd_tools::workflow::{Command, Defined, Definition, configured, unknown};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::time::sleep_until;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::arming::Arming;
use super::bounds::{Bounds, PRUNE_EVERY_MS};
use super::due::Due;
use super::orders::{Appending, Order, Outcome};
use super::parts::{Agent, Servers, Tools};
use super::starts::{self, Key};
use super::steps::Steps;
use super::unsaved::Unsaved;
use super::waits::Waits;
use crate::clock::{Clock, random_bytes};
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
    /// The engine's bounds: `limits.workflow_runs`, `limits.run_retention`.
    pub(crate) bounds: Bounds,
    /// The configuration's workflows.
    pub(crate) configured: Vec<Definition>,
}

/// How many occurrences an event start reads at a time as it takes them up.
const TAKE_UP_PAGE: usize = 100;

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
    limits: Limits,
    bounds: Bounds,
    configured: BTreeMap<String, Definition>,
    /// The runs that did not end, by id.
    active: BTreeMap<String, Run>,
    /// The runs of `active` by their timer and the resource they watch.
    due: Due,
    /// The attempts under way, by run, step and attempt.
    executing: BTreeMap<(String, usize, u32), CancellationToken>,
    /// The streams told appended to, not yet taken up.
    appending: Appending,
    /// The streams an event start took a whole page of, and may have more.
    behind: BTreeSet<String>,
    /// Whether an event start stopped taking up its stream for want of room.
    held: bool,
    /// The subscribe starts fired for want of room, each with its run's input.
    deferred: BTreeMap<Key, Value>,
    /// The runs whose record the store did not take, set back to what it keeps.
    unsaved: Unsaved,
    /// The subscriptions of the parked waits.
    waits: Waits,
    /// The actor last listed of each server.
    actors: BTreeMap<String, u64>,
    /// The workflows made at runtime, by name (the store's).
    defined: BTreeMap<String, Definition>,
    /// The subscribe starts in force.
    arming: Arming,
    /// When the ended runs past their retention are pruned next (Unix ms).
    prune_at: i64,
    steps: Arc<Steps>,
    outcomes: mpsc::UnboundedSender<Outcome>,
    tasks: TaskTracker,
    shutdown: CancellationToken,
    clock: Clock,
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
        let servers = setup.servers;
        let engine = Self {
            steps: Arc::new(Steps {
                instance: instance.clone(),
                servers: servers.clone(),
                tools,
                agent: setup.agent,
            }),
            waits: Waits::new(
                &instance,
                servers.clone(),
                outcomes.clone(),
                tasks.clone(),
                shutdown.clone(),
            ),
            arming: Arming::new(&instance, servers, tasks.clone(), shutdown.clone()),
            instance,
            store: setup.store,
            limits: setup.limits,
            bounds: setup.bounds,
            configured: by_name(setup.configured),
            active: BTreeMap::new(),
            due: Due::default(),
            executing: BTreeMap::new(),
            appending,
            behind: BTreeSet::new(),
            held: false,
            deferred: BTreeMap::new(),
            unsaved: Unsaved::default(),
            actors: BTreeMap::new(),
            defined: BTreeMap::new(),
            prune_at: i64::MIN,
            outcomes,
            tasks: tasks.clone(),
            clock: Clock::new(shutdown.clone()),
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
            let due = [
                self.due.next(),
                self.unsaved.next_due(),
                Some(self.prune_at),
            ];
            let at = self
                .clock
                .instant(due.into_iter().flatten().min().unwrap_or(i64::MAX));
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => break,
                Some(order) = orders.recv() => self.on_order(order).await,
                Some(outcome) = told.recv() => self.on_outcome(outcome).await,
                () = sleep_until(at) => self.on_time().await,
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
                    failed.ended_ms = Some(self.clock.now_ms());
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
            Order::Configure {
                configured,
                limits,
                bounds,
            } => {
                self.configured = by_name(configured);
                self.limits = limits;
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
                let _ = answer.send(self.current(&run).await);
            }
            Order::Command {
                run,
                command,
                answer,
            } => {
                let _ = answer.send(self.command(&run, command).await);
            }
            Order::Updated { server, uri } => {
                let now = self.clock.now_ms();
                for id in self.due.watching(&server, &uri) {
                    let ended = self.active.get_mut(&id);
                    if ended.is_some_and(|run| run.updated(&server, &uri, now)) {
                        self.drive(&id).await;
                    }
                }
                for (workflow, node) in self.arming.fired(&server, &uri) {
                    let input = starts::updated_input(&server, &uri);
                    self.fire(&workflow, &node, input).await;
                }
            }
            Order::Connected { server, actor } => {
                self.waits.connected(&server);
                let before = self.actors.insert(server.clone(), actor);
                let afresh = before.is_some_and(|b| b != actor).then_some("reload");
                if let Some(reason) = afresh {
                    self.resubscribe(&server, reason);
                }
                self.arming.connected(&server, afresh);
            }
            Order::Unreachable { server } => {
                self.waits.unreachable(&server);
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

    /// How many runs are under way: held, or set back to what the store keeps.
    fn running(&self) -> usize {
        self.active.len() + self.unsaved.len()
    }

    /// Whether one more run may start.
    fn has_room(&self) -> bool {
        self.running() < self.bounds.running_max
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
        if !self.has_room() {
            return Err(Error::TooManyRuns {
                max: self.bounds.running_max,
            });
        }
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
        let run = Run::start(id, definition, input, by, self.limits, self.clock.now_ms())?;
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
        own::workflow_started(&self.instance, id, workflow, by);
        self.active.insert(id.to_owned(), run);
        self.drive(id).await;
        self.current(id).await
    }

    /// Start `node` of `workflow` starts a run with `input`; one past the bound waits for
    /// room (the last input of each start kept). A run it cannot start (its input does not
    /// fit the workflow's schema, the store failed) is not started: logged
    /// `workflow.unsaved` under the run's id.
    async fn fire(&mut self, workflow: &str, node: &str, input: Value) {
        if !self.has_room() {
            let key = (workflow.to_owned(), node.to_owned());
            self.deferred.insert(key, input);
            return;
        }
        let id = new_id();
        let by = starts::by(node);
        if let Err(e) = self.start_as(&id, workflow, input, &by, None).await {
            let err = format!("start {node:?} of workflow {workflow:?}: {e}");
            own::workflow_unsaved(&self.instance, &id, &err);
        }
    }

    /// A run left the engine: the starts that waited for room start theirs.
    async fn room(&mut self) {
        while self.has_room()
            && let Some(((workflow, node), input)) = self.deferred.pop_first()
        {
            let in_force = starts::subscribes(starts::in_force(&self.configured, &self.defined));
            if in_force.contains_key(&(workflow.clone(), node.clone())) {
                self.fire(&workflow, &node, input).await;
            }
        }
        if self.has_room() && std::mem::take(&mut self.held) {
            let taking = starts::events(starts::in_force(&self.configured, &self.defined));
            self.behind.extend(taking.into_iter().map(|s| s.stream));
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
            self.held = true;
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
                    self.held = true;
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
        self.deferred.retain(|key, _| wanted.contains_key(key));
        self.arming.arm(wanted, reason);
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
        let now = self.clock.now_ms();
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
        let now = self.clock.now_ms();
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

    /// The timers that are due go off; the runs set back that are due are read back; the
    /// ended runs past their retention are pruned when it is time.
    async fn on_time(&mut self) {
        let now = self.clock.now_ms();
        if self.prune_at <= now {
            self.prune_at = now.saturating_add(PRUNE_EVERY_MS);
            self.prune(now).await;
        }
        for id in self.unsaved.due(now) {
            self.read_back(&id, now).await;
        }
        for id in self.due.due(now) {
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

    /// The runs that ended before [`Bounds::retention`] ago are pruned, with their steps.
    async fn prune(&self, now: i64) {
        let since = self.bounds.kept_since(now);
        if let Err(e) = self.store.runs_prune(since).await {
            let err = format!("the ended runs not pruned: {e}");
            own::workflow_unsaved(&self.instance, "*", &err);
        }
    }

    /// Takes every action of run `id`, its record kept first whenever it changed; a run
    /// that ended leaves the engine.
    async fn drive(&mut self, id: &str) {
        loop {
            let now = self.clock.now_ms();
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
                    self.waits.subscribe(id, step, attempt, watched, reason);
                }
                Some(Action::Release { watched }) => self.waits.release(id, watched),
                Some(Action::Abandon { step, attempt }) => {
                    if let Some(token) = self.executing.remove(&(id.to_owned(), step, attempt)) {
                        token.cancel();
                    }
                }
                Some(_) => {}
            }
        }
        let Some(run) = self.active.get(id) else {
            return;
        };
        if !run.is_settled() {
            self.due.set(id, run);
            return;
        }
        if let Some(run) = self.active.remove(id) {
            self.due.forget(id);
            self.waits.forget(id, false);
            let record = run.record();
            let err = record.error.as_ref().map(Failure::to_string);
            let status = record.status.as_str();
            own::workflow_ended(&self.instance, id, &record.workflow, status, err.as_deref());
            Box::pin(self.room()).await;
        }
    }

    /// Run `id`, whose record the store did not take, is let go: its attempts under way
    /// and its wait's subscribe given up, to be read back from the store ([`Unsaved`]).
    fn set_back(&mut self, id: &str, now: i64) {
        self.active.remove(id);
        self.due.forget(id);
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
        self.waits.forget(id, true);
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
        let deadline = self.clock.instant(execute.deadline_ms);
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

    /// Every wait on `server` under way is subscribed again (`reason`).
    fn resubscribe(&mut self, server: &str, reason: &'static str) {
        for id in self.due.on_server(server) {
            let Some(run) = self.active.get(&id) else {
                continue;
            };
            let record = run.record();
            let Some(step) = record.steps.get(record.step) else {
                continue;
            };
            if let Some(watched) = step.watched.clone() {
                let (at, attempt) = (record.step, step.attempt);
                self.waits
                    .subscribe(&id, at, attempt, watched, Some(reason));
            }
        }
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
