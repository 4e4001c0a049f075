//! Workflows in memory ([`Runs`]): the reference semantics of [`Workflows`](super::Workflows)
//! and the service of tests. Nothing executes a step here: an attempt handed out waits in
//! [`Runs::executions`] until a test tells its outcome ([`Runs::complete`]); a wait's
//! resource is listed in [`Runs::subscribed`] until released; time moves when told
//! ([`Runs::tick`]).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

use super::definition::Definition;
use super::run::{Action, Execute, Failure, Limits, Record, Run, Watched};
use super::service::{Command, Defined, Filter, Page, configured, unknown};
use crate::Error;

/// Workflows and their runs in memory, run ids `run-1`, `run-2`, … in the order started.
#[derive(Debug)]
pub struct Runs {
    limits: Limits,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The runtime definitions, with their versions.
    defined: BTreeMap<String, (Definition, u64)>,
    /// The configuration's.
    configured: BTreeMap<String, Definition>,
    /// Every run, by its order of start.
    runs: BTreeMap<u64, Run>,
    /// Each run's order, by id.
    ids: BTreeMap<String, u64>,
    /// The attempts under way, by run.
    executions: Vec<(String, Execute)>,
    /// The resources waits watch, by run.
    subscribed: Vec<(String, Watched)>,
}

impl Default for Runs {
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl Runs {
    /// No workflows yet; runs bounded by `limits`.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Defines `definition` as the configuration does: it cannot be updated or deleted.
    pub fn configure(&self, definition: Definition) {
        let name = definition.name.clone();
        self.lock().configured.insert(name, definition);
    }

    /// The attempts under way, with their runs.
    pub fn executions(&self) -> Vec<(String, Execute)> {
        self.lock().executions.clone()
    }

    /// The resources the waits under way watch, with their runs.
    pub fn subscribed(&self) -> Vec<(String, Watched)> {
        self.lock().subscribed.clone()
    }

    /// Attempt `attempt` of step `step` of run `run` came to `outcome` at `now_ms`.
    pub fn complete(
        &self,
        run: &str,
        step: usize,
        attempt: u32,
        outcome: Result<Value, Failure>,
        now_ms: i64,
    ) {
        let mut state = self.lock();
        state
            .executions
            .retain(|(r, e)| !(r == run && e.step == step && e.attempt == attempt));
        if let Some(order) = state.ids.get(run).copied() {
            with_run(&mut state, order, now_ms, |r| {
                r.handle_outcome(step, attempt, outcome, now_ms);
                Ok(())
            })
            .ok();
        }
    }

    /// Resource `uri` of `server` changed at `now_ms`.
    pub fn updated(&self, server: &str, uri: &str, now_ms: i64) {
        let mut state = self.lock();
        let orders: Vec<u64> = state.runs.keys().copied().collect();
        for order in orders {
            with_run(&mut state, order, now_ms, |r| {
                r.updated(server, uri, now_ms);
                Ok(())
            })
            .ok();
        }
    }

    /// The time is `now_ms`: every run's timers that are due go off.
    pub fn tick(&self, now_ms: i64) {
        let mut state = self.lock();
        let orders: Vec<u64> = state.runs.keys().copied().collect();
        for order in orders {
            with_run(&mut state, order, now_ms, |r| {
                r.handle_timeout(now_ms);
                Ok(())
            })
            .ok();
        }
    }

    /// [`Workflows::create`](super::Workflows::create).
    pub fn create(&self, definition: Definition) -> Result<Defined, Error> {
        let mut state = self.lock();
        let name = definition.name.clone();
        if state.configured.contains_key(&name) || state.defined.contains_key(&name) {
            return Err(Error::Exists {
                what: format!("workflow {name:?}"),
            });
        }
        let steps = definition.steps.len();
        state.defined.insert(name.clone(), (definition, 1));
        Ok(Defined::new(&name, 1, steps))
    }

    /// [`Workflows::update`](super::Workflows::update).
    pub fn update(&self, definition: Definition) -> Result<Defined, Error> {
        let mut state = self.lock();
        let name = definition.name.clone();
        if state.configured.contains_key(&name) {
            return Err(configured("workflow.update", &name));
        }
        let steps = definition.steps.len();
        let (kept, version) = state.defined.get_mut(&name).ok_or_else(|| unknown(&name))?;
        *kept = definition;
        *version += 1;
        Ok(Defined::new(&name, *version, steps))
    }

    /// [`Workflows::delete`](super::Workflows::delete).
    pub fn delete(&self, name: &str) -> Result<bool, Error> {
        let mut state = self.lock();
        if state.configured.contains_key(name) {
            return Err(configured("workflow.delete", name));
        }
        Ok(state.defined.remove(name).is_some())
    }

    /// [`Workflows::run`](super::Workflows::run), at `now_ms`.
    pub fn run(
        &self,
        workflow: &str,
        input: Value,
        by: &str,
        now_ms: i64,
    ) -> Result<Record, Error> {
        let mut state = self.lock();
        let definition = state
            .configured
            .get(workflow)
            .or_else(|| state.defined.get(workflow).map(|(d, _)| d))
            .cloned()
            .ok_or_else(|| unknown(workflow))?;
        let order = state.runs.keys().next_back().map_or(1, |last| last + 1);
        let id = format!("run-{order}");
        let run = Run::start(&id, definition, input, by, self.limits, now_ms)?;
        state.runs.insert(order, run);
        state.ids.insert(id, order);
        with_run(&mut state, order, now_ms, |_| Ok(()))
    }

    /// [`Workflows::status`](super::Workflows::status).
    pub fn status(&self, run: &str) -> Result<Record, Error> {
        let state = self.lock();
        let order = state.ids.get(run).ok_or_else(|| Error::UnknownRun {
            run: run.to_owned(),
        })?;
        Ok(state.runs[order].record().clone())
    }

    /// [`Workflows::list`](super::Workflows::list).
    pub fn list(&self, filter: &Filter) -> Result<Page, Error> {
        let state = self.lock();
        let after = match &filter.after {
            None => 0,
            Some(id) => *state
                .ids
                .get(id)
                .ok_or_else(|| Error::UnknownRun { run: id.clone() })?,
        };
        let mut wanted = state
            .runs
            .range(after + 1..)
            .map(|(_, r)| r.record())
            .filter(|r| filter.wants(r));
        let runs: Vec<Record> = wanted.by_ref().take(filter.limit).cloned().collect();
        let more = wanted.next().is_some();
        Ok(Page::new(runs, more))
    }

    /// [`Workflows::command`](super::Workflows::command), at `now_ms`.
    pub fn command(&self, run: &str, command: Command, now_ms: i64) -> Result<Record, Error> {
        let mut state = self.lock();
        let order = *state.ids.get(run).ok_or_else(|| Error::UnknownRun {
            run: run.to_owned(),
        })?;
        with_run(&mut state, order, now_ms, |r| match command {
            Command::Cancel => r.cancel(now_ms),
            Command::Pause => r.pause(now_ms),
            Command::Resume => r.resume(now_ms),
            Command::Signal { name, payload } => r.signal(&name, payload, now_ms),
        })
    }
}

/// Does `change` to run `order`, then drives it: its record afterwards.
fn with_run(
    state: &mut State,
    order: u64,
    now_ms: i64,
    change: impl FnOnce(&mut Run) -> Result<(), Error>,
) -> Result<Record, Error> {
    let Some(run) = state.runs.get_mut(&order) else {
        return Err(Error::UnknownRun {
            run: order.to_string(),
        });
    };
    change(run)?;
    let id = run.record().id.clone();
    let mut actions = Vec::new();
    while let Some(action) = run.poll_action(now_ms) {
        actions.push(action);
    }
    run.take_changed();
    let record = run.record().clone();
    for action in actions {
        match action {
            Action::Execute(execute) => state.executions.push((id.clone(), execute)),
            Action::Subscribe { watched, .. } => state.subscribed.push((id.clone(), watched)),
            Action::Release { watched } => state
                .subscribed
                .retain(|(r, w)| !(*r == id && *w == watched)),
            Action::Abandon { step, attempt } => state
                .executions
                .retain(|(r, e)| !(*r == id && e.step == step && e.attempt == attempt)),
        }
    }
    Ok(record)
}
