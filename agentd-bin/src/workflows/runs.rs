//! The runs under way ([`Runs`]): each a [`Run`] driven by what happens to it (a command, an
//! attempt's outcome, its timer, a change of the resource it watches), every change kept in
//! the store before what it hands out is done. They are found by their timer and by the
//! resource they watch ([`Due`]), not by looking at each.
//!
//! Driving a run: each action it hands out is taken in turn, the run's record kept in the
//! store first whenever it changed, so that an attempt is kept as sent before it is sent.
//! An attempt runs on a task of its own and tells its outcome back; an attempt the run gives
//! up (its timeout, a cancel) is cancelled. A wait's resource is subscribed by [`Waits`]. A
//! run whose change the store does not take is set back to what the store keeps
//! ([`Unsaved`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use agentd_tools::Error;
use agentd_tools::wait::Clock as _;
use agentd_tools::workflow::run::{Action, Execute, Failure, Limits, Record, Run, StepStatus};
use agentd_tools::workflow::{Command, Definition};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::due::Due;
use super::orders::Outcome;
use super::steps::Steps;
use super::unsaved::Unsaved;
use super::waits::Waits;
use crate::clock::Clock;
use crate::store::Store;
use crate::store::starts::Start;
use crate::telemetry::catalogue::own;

/// The runs under way, and what drives them.
pub(super) struct Runs {
    instance: String,
    store: Store,
    /// The bounds of the runs started from now on.
    limits: Limits,
    /// The runs that did not end, by id.
    active: BTreeMap<String, Run>,
    /// The runs of `active` by their timer and the resource they watch.
    due: Due,
    /// The attempts under way, by run, step and attempt.
    executing: BTreeMap<(String, usize, u32), CancellationToken>,
    /// The runs whose record the store did not take, set back to what it keeps.
    unsaved: Unsaved,
    /// The subscriptions of the parked waits.
    waits: Waits,
    /// Whether a run left [`Runs::running`] since [`Runs::take_freed`] last said: it ended,
    /// or a run set back is no more or cannot be resumed.
    freed: bool,
    steps: Arc<Steps>,
    outcomes: mpsc::UnboundedSender<Outcome>,
    tasks: TaskTracker,
    shutdown: CancellationToken,
    /// The time of runs: tokio's, anchored on the wall clock.
    clock: Clock,
}

impl Runs {
    /// No run under way yet: the steps' attempts run on `tasks` until `shutdown` and tell
    /// their outcomes to `outcomes`.
    pub(super) fn new(
        store: Store,
        limits: Limits,
        steps: Arc<Steps>,
        outcomes: mpsc::UnboundedSender<Outcome>,
        tasks: &TaskTracker,
        shutdown: CancellationToken,
    ) -> Self {
        let instance = steps.instance.clone();
        let waits = Waits::new(
            &instance,
            steps.servers.clone(),
            outcomes.clone(),
            tasks.clone(),
            shutdown.clone(),
        );
        Self {
            instance,
            store,
            limits,
            active: BTreeMap::new(),
            due: Due::default(),
            executing: BTreeMap::new(),
            unsaved: Unsaved::default(),
            waits,
            freed: false,
            steps,
            outcomes,
            tasks: tasks.clone(),
            clock: Clock::new(shutdown.clone()),
            shutdown,
        }
    }

    /// Resumes the runs the store holds unsettled; one whose definition no longer parses is
    /// kept failed.
    pub(super) async fn restore(&mut self) {
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
    }

    /// The runs started from now on are bound by `limits`.
    pub(super) fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Now, on the runs' clock (Unix ms).
    pub(super) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The instant of Unix millisecond `at_ms` on the runs' clock (now, when it is past).
    pub(super) fn instant(&self, at_ms: i64) -> tokio::time::Instant {
        self.clock.instant(at_ms)
    }

    /// `server` is connected: its waits parked at the restart are subscribed as it comes.
    pub(super) fn connected(&mut self, server: &str) {
        self.waits.connected(server);
    }

    /// A dial of `server` failed: its waits parked at the restart stay parked (logged).
    pub(super) fn unreachable(&mut self, server: &str) {
        self.waits.unreachable(server);
    }

    /// How many runs are under way: held, or set back to what the store keeps.
    pub(super) fn running(&self) -> usize {
        self.active.len() + self.unsaved.len()
    }

    /// Whether room was freed since it was last asked.
    pub(super) fn take_freed(&mut self) -> bool {
        std::mem::take(&mut self.freed)
    }

    /// When the next timer of a run is due, or a run set back is read back (Unix ms).
    pub(super) fn next_due(&self) -> Option<i64> {
        [self.due.next(), self.unsaved.next_due()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Starts run `id` of `definition` with `input` for `by`: kept first (with the event
    /// start's new position `from`, in one transaction), then driven; refused (`store`) when
    /// the store does not take it.
    pub(super) async fn start(
        &mut self,
        id: &str,
        definition: Definition,
        input: Value,
        by: &str,
        from: Option<(&Start, i64)>,
    ) -> Result<Record, Error> {
        let workflow = definition.name.clone();
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
        own::workflow_started(&self.instance, id, &workflow, by);
        self.active.insert(id.to_owned(), run);
        self.drive(id).await;
        self.current(id).await
    }

    /// Subscribed resource `uri` of `server` changed: the waits on it end.
    pub(super) async fn updated(&mut self, server: &str, uri: &str) {
        let now = self.clock.now_ms();
        for id in self.due.watching(server, uri) {
            let ended = self.active.get_mut(&id);
            if ended.is_some_and(|run| run.updated(server, uri, now)) {
                self.drive(&id).await;
            }
        }
    }

    /// The timers that are due go off; the runs set back that are due are read back.
    pub(super) async fn on_time(&mut self) {
        let now = self.clock.now_ms();
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

    /// A run as it stands: the engine's, else the store's.
    pub(super) async fn current(&self, id: &str) -> Result<Record, Error> {
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

    pub(super) async fn command(&mut self, id: &str, command: Command) -> Result<Record, Error> {
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

    pub(super) async fn on_outcome(&mut self, told: Outcome) {
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
            self.freed = true;
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
                self.freed = true;
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
            Err(e) => {
                own::workflow_unsaved(&self.instance, id, &format!("not resumed: {e}"));
                self.freed = true;
            }
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
    pub(super) fn resubscribe(&mut self, server: &str, reason: &'static str) {
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
