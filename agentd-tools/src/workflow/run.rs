//! One run of a workflow, as a state machine without IO: driven by what happened (an
//! outcome, a signal, a resource's change, a command) and by the time, passed in as Unix
//! milliseconds; it says what to do next ([`Action`]) and when to be woken
//! ([`Run::poll_timeout`]). Everything it is, is its [`Record`], which the daemon keeps in
//! its store after every change and from which a run is [restored](Run::restore) after a
//! restart.
//!
//! The driving contract, as quinn-proto's:
//! - [`Run::poll_action`] until it gives nothing: execute each step it hands out, (un)subscribe
//!   what it names, abandon an attempt it gives up on. Keep the record
//!   ([`Run::take_changed`]) *before* executing: an attempt is recorded as sent before it is,
//!   so that a restart sends it again with the next attempt number and the same idempotency
//!   key;
//! - [`Run::poll_timeout`]: when to call [`Run::handle_timeout`];
//! - [`Run::handle_outcome`] with what an execution came to (an outcome of an attempt that
//!   is not the current one any more is dropped);
//! - the commands: [`Run::signal`], [`Run::updated`], [`Run::cancel`], [`Run::pause`],
//!   [`Run::resume`].
//!
//! ```
//! use agentd_tools::workflow::definition::Definition;
//! use agentd_tools::workflow::run::{Action, Limits, Run, Status};
//! use serde_json::json;
//!
//! let body = json!({"steps": [
//!     {"id": "add", "type": "mcp.tool", "server": "s", "tool": "add",
//!      "arguments": {"a": "{{input.a}}", "b": 2}, "retries": {"max": 1}},
//! ]});
//! let definition = Definition::parse("sum", &body).unwrap();
//! let mut run = Run::start("r1", definition, json!({"a": 1}), "operator", Limits::default(), 0)
//!     .unwrap();
//! let Some(Action::Execute(first)) = run.poll_action(0) else { panic!() };
//! assert_eq!(first.attempt, 1);
//! assert!(run.take_changed(), "keep the record before executing");
//! // The first attempt fails; the retry is due 1 s later, with the same key.
//! run.handle_outcome(0, 1, Err(agentd_tools::workflow::run::Failure::retryable("server", "down")), 10);
//! assert_eq!(run.poll_timeout(), Some(1010));
//! run.handle_timeout(1010);
//! let Some(Action::Execute(second)) = run.poll_action(1010) else { panic!() };
//! assert_eq!((second.attempt, second.call.idempotency_key()), (2, first.call.idempotency_key()));
//! run.handle_outcome(0, 2, Ok(json!({"content": []})), 1020);
//! assert_eq!(run.record().status, Status::Completed);
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::definition::{Definition, DefinitionError, Kind, ResourceOp, Retries, Wait};
use super::template::{self, Context, Template};
use crate::Error;
use crate::memory::serialized_len;

/// Signals a run holds that no wait took yet: at most this many.
pub const SIGNALS_MAX: usize = 64;
/// `limits.step_timeout` when configuration says nothing.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(600);

/// A run's bounds: an executed step's timeout when it gives none (`limits.step_timeout`), and
/// the largest input, output or signal payload (`store.max_value_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// An executed step's timeout when it gives none.
    pub step_timeout: Duration,
    /// The largest input, step output or signal payload, compact JSON.
    pub value_max: usize,
}

impl Default for Limits {
    /// 600 s, and 256 KiB.
    fn default() -> Self {
        Self {
            step_timeout: STEP_TIMEOUT,
            value_max: crate::memory::VALUE_MAX_DEFAULT,
        }
    }
}

impl Limits {
    /// `step_timeout` and `value_max`.
    pub fn new(step_timeout: Duration, value_max: usize) -> Self {
        Self {
            step_timeout,
            value_max,
        }
    }
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Status {
    /// Its steps run.
    Running,
    /// It starts no step until resumed; what was under way goes on.
    Paused,
    /// Every step is done; its output is the last one's.
    Completed,
    /// A step failed.
    Failed,
    /// It was cancelled.
    Cancelled,
}

impl Status {
    /// Every status.
    pub const ALL: [Self; 5] = [
        Self::Running,
        Self::Paused,
        Self::Completed,
        Self::Failed,
        Self::Cancelled,
    ];

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The status named `name`, if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether the run ended (nothing changes it any more).
    pub fn settled(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// Where a step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepStatus {
    /// Not started, or to be sent again (an attempt a restart interrupted).
    Pending,
    /// An attempt is under way.
    Running,
    /// An attempt failed: the next is due at `due_ms`.
    Retrying,
    /// A wait is under way.
    Waiting,
    /// It has its output.
    Done,
    /// It failed.
    Failed,
    /// The run was cancelled while it was under way.
    Cancelled,
}

impl StepStatus {
    /// Every status.
    pub const ALL: [Self; 7] = [
        Self::Pending,
        Self::Running,
        Self::Retrying,
        Self::Waiting,
        Self::Done,
        Self::Failed,
        Self::Cancelled,
    ];

    /// The status named `name`, if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Retrying => "retrying",
            Self::Waiting => "waiting",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// Why a step, or a run, failed: a stable code and what happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Failure {
    /// The code (`timed_out`, `server`, `tool_error`, `template`, `no_agent`, …).
    pub code: String,
    /// What happened.
    pub message: String,
    /// Whether another attempt may do better (a step with retries left tries again).
    #[serde(default)]
    pub retryable: bool,
}

impl Failure {
    /// A failure another attempt would meet again.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            retryable: false,
        }
    }

    /// A failure another attempt may not meet.
    pub fn retryable(code: &str, message: impl Into<String>) -> Self {
        Self {
            retryable: true,
            ..Self::new(code, message)
        }
    }

    fn to_value(&self) -> Value {
        json!({"code": self.code, "message": self.message})
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// A signal sent to a run that no wait took yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Signal {
    /// Its name.
    pub name: String,
    /// What it carries.
    pub payload: Value,
    /// When it came, in Unix milliseconds.
    pub at_ms: i64,
}

/// The resource a `wait` watches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Watched {
    /// The server.
    pub server: String,
    /// The URI.
    pub uri: String,
}

/// A step of a run as it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StepRecord {
    /// The step's id.
    pub id: String,
    /// Where it stands.
    pub status: StepStatus,
    /// The attempts sent (a wait's: 1 once it waits).
    pub attempt: u32,
    /// The failures heard.
    pub failures: u32,
    /// The idempotency key of every attempt of an `mcp.tool` step.
    pub idempotency_key: Option<String>,
    /// The resource a wait watches.
    pub watched: Option<Watched>,
    /// When its current attempt or wait began, in Unix milliseconds.
    pub started_ms: Option<i64>,
    /// When the current attempt is cut, the next retry is due, or the wait ends.
    pub due_ms: Option<i64>,
    /// Its output, once done.
    pub output: Option<Value>,
    /// Why it failed last.
    pub error: Option<Failure>,
    /// When it ended.
    pub ended_ms: Option<i64>,
}

impl StepRecord {
    fn new(id: &str) -> Self {
        Self {
            id: id.to_owned(),
            status: StepStatus::Pending,
            attempt: 0,
            failures: 0,
            idempotency_key: None,
            watched: None,
            started_ms: None,
            due_ms: None,
            output: None,
            error: None,
            ended_ms: None,
        }
    }
}

/// Everything a run is: what the store keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Record {
    /// The run's id.
    pub id: String,
    /// The workflow's name.
    pub workflow: String,
    /// The workflow's definition as the run started with it (its body).
    pub definition: Value,
    /// The input.
    pub input: Value,
    /// Who started it: the unit of the caller (`conversation:<id>`, `run:<id>`, `operator`).
    pub by: String,
    /// Where it stands.
    pub status: Status,
    /// The current step (the number of steps once completed).
    pub step: usize,
    /// Every step.
    pub steps: Vec<StepRecord>,
    /// The signals no wait took yet, oldest first.
    pub signals: Vec<Signal>,
    /// Its output, once completed: the last step's.
    pub output: Option<Value>,
    /// Why it failed.
    pub error: Option<Failure>,
    /// An executed step's timeout when it gives none, in milliseconds.
    pub step_timeout_ms: u64,
    /// When it started, in Unix milliseconds.
    pub started_ms: i64,
    /// When it last changed.
    pub updated_ms: i64,
    /// When it ended.
    pub ended_ms: Option<i64>,
}

impl Record {
    /// The id of the current step: the one under way, or the one it failed or was cancelled
    /// at; none once completed.
    pub fn current(&self) -> Option<&str> {
        self.steps.get(self.step).map(|s| s.id.as_str())
    }

    /// The run as `workflow.status` says it: `{"run", "workflow", "status", "step", "by",
    /// "input", "output", "error", "steps": [{"id", "status", "attempt", "output",
    /// "error"}], "signals", "started_ms", "updated_ms", "ended_ms"}`.
    pub fn to_value(&self) -> Value {
        let steps: Vec<Value> = self
            .steps
            .iter()
            .map(|s| {
                json!({
                    "id": s.id,
                    "status": s.status.as_str(),
                    "attempt": s.attempt,
                    "output": s.output,
                    "error": s.error.as_ref().map(Failure::to_value),
                })
            })
            .collect();
        json!({
            "run": self.id,
            "workflow": self.workflow,
            "status": self.status.as_str(),
            "step": self.current(),
            "by": self.by,
            "input": self.input,
            "output": self.output,
            "error": self.error.as_ref().map(Failure::to_value),
            "steps": steps,
            "signals": self.signals.len(),
            "started_ms": self.started_ms,
            "updated_ms": self.updated_ms,
            "ended_ms": self.ended_ms,
        })
    }

    /// The run as `workflow.list` says it: `{"run", "workflow", "status", "step",
    /// "started_ms", "ended_ms"}`.
    pub fn summary(&self) -> Value {
        json!({
            "run": self.id,
            "workflow": self.workflow,
            "status": self.status.as_str(),
            "step": self.current(),
            "started_ms": self.started_ms,
            "ended_ms": self.ended_ms,
        })
    }
}

/// What a driver does next for a run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Action {
    /// Execute an attempt of a step.
    Execute(Execute),
    /// Subscribe a wait's resource (owned by the run); tell a failure that will not pass
    /// through [`Run::handle_outcome`] of the step and attempt. `again` when a restart parked
    /// the wait.
    Subscribe {
        /// The step.
        step: usize,
        /// Its attempt.
        attempt: u32,
        /// The resource.
        watched: Watched,
        /// Whether it was subscribed before a restart.
        again: bool,
    },
    /// Release a wait's resource.
    Release {
        /// The resource.
        watched: Watched,
    },
    /// Give up an attempt under way (its bound passed, or the run was cancelled): cancel it
    /// on the wire; its outcome is not wanted.
    Abandon {
        /// The step.
        step: usize,
        /// The attempt.
        attempt: u32,
    },
}

/// An attempt of a step to execute.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Execute {
    /// The step's index.
    pub step: usize,
    /// The step's id.
    pub id: String,
    /// The attempt (from 1).
    pub attempt: u32,
    /// What to do.
    pub call: Call,
    /// When the attempt is cut, in Unix milliseconds.
    pub deadline_ms: i64,
}

/// What an attempt does, its templates rendered.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Call {
    /// `tools/call` of a server's tool.
    McpTool {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// Its arguments.
        arguments: Map<String, Value>,
        /// `agent/idempotency_key`.
        idempotency_key: String,
    },
    /// A read of a server's resources, prompts or completions.
    Resource {
        /// The server.
        server: String,
        /// What it asks.
        op: Resolved,
    },
    /// One of agentd's own tools.
    Tool {
        /// The tool.
        name: String,
        /// Its arguments.
        arguments: Value,
    },
    /// A model turn.
    Agent {
        /// The prompt.
        prompt: String,
    },
}

impl Call {
    /// The idempotency key of an `mcp.tool` attempt.
    pub fn idempotency_key(&self) -> Option<&str> {
        match self {
            Self::McpTool {
                idempotency_key, ..
            } => Some(idempotency_key),
            _ => None,
        }
    }
}

/// What an `mcp.resource` attempt asks, its templates rendered.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Resolved {
    /// `resources/list`.
    List,
    /// `resources/read`.
    Read {
        /// The URI.
        uri: String,
    },
    /// `resources/templates/list`.
    Templates,
    /// `prompts/get`.
    Prompt {
        /// The prompt.
        name: String,
        /// Its arguments.
        arguments: BTreeMap<String, String>,
    },
    /// `completion/complete`, its params.
    Complete(Value),
}

/// One run.
#[derive(Debug, Clone)]
pub struct Run {
    record: Record,
    definition: Definition,
    value_max: usize,
    actions: VecDeque<Action>,
    changed: bool,
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Run {
    /// Run `id` of `definition` with `input`, started by `by` at `now_ms`: refused when the
    /// input is past `limits.value_max` (`too_large`) or does not fit the input schema
    /// (`invalid_arguments` at `/input…`). Nothing is done until it is polled.
    pub fn start(
        id: &str,
        definition: Definition,
        input: Value,
        by: &str,
        limits: Limits,
        now_ms: i64,
    ) -> Result<Self, Error> {
        let size = serialized_len(&input);
        if size > limits.value_max {
            return Err(Error::TooLarge {
                what: "input",
                size,
                max: limits.value_max,
            });
        }
        if let Err((pointer, rule, message)) = definition.check_input(&input) {
            return Err(Error::invalid(
                "workflow.run",
                &format!("/input{pointer}"),
                &rule,
                message,
            ));
        }
        let record = Record {
            id: id.to_owned(),
            workflow: definition.name.clone(),
            definition: definition.body().clone(),
            input,
            by: by.to_owned(),
            status: Status::Running,
            step: 0,
            steps: definition
                .steps
                .iter()
                .map(|s| StepRecord::new(&s.id))
                .collect(),
            signals: Vec::new(),
            output: None,
            error: None,
            step_timeout_ms: u64::try_from(limits.step_timeout.as_millis()).unwrap_or(u64::MAX),
            started_ms: now_ms,
            updated_ms: now_ms,
            ended_ms: None,
        };
        Ok(Self {
            record,
            definition,
            value_max: limits.value_max,
            actions: VecDeque::new(),
            changed: true,
        })
    }

    /// The run `record` keeps, after a restart: an attempt that was under way is sent again
    /// (the next attempt number, the same idempotency key) and a wait's resource is
    /// subscribed again. A record whose definition no longer parses is that error.
    pub fn restore(record: Record, value_max: usize) -> Result<Self, DefinitionError> {
        let definition = Definition::parse(&record.workflow, &record.definition)?;
        let mut run = Self {
            record,
            definition,
            value_max,
            actions: VecDeque::new(),
            changed: false,
        };
        if run.record.steps.len() != run.definition.steps.len() {
            let failure = Failure::new("definition", "the record's steps are not its workflow's");
            run.end(Status::Failed, Some(failure), run.record.updated_ms);
            return Ok(run);
        }
        if run.record.status.settled() {
            return Ok(run);
        }
        // A run under way stands at one of its steps; a record that says otherwise is not
        // followed.
        if run.record.step >= run.record.steps.len() {
            let failure = Failure::new("definition", "the record's step is none of its workflow's");
            run.end(Status::Failed, Some(failure), run.record.updated_ms);
            return Ok(run);
        }
        let i = run.record.step;
        if let Some(step) = run.record.steps.get_mut(i) {
            match step.status {
                StepStatus::Running => {
                    step.status = StepStatus::Pending;
                    step.due_ms = None;
                    run.changed = true;
                }
                StepStatus::Waiting => {
                    if let Some(watched) = step.watched.clone() {
                        let attempt = step.attempt;
                        run.actions.push_back(Action::Subscribe {
                            step: i,
                            attempt,
                            watched,
                            again: true,
                        });
                    }
                }
                _ => {}
            }
        }
        Ok(run)
    }

    /// What the run is.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// Its workflow, as it started with it.
    pub fn definition(&self) -> &Definition {
        &self.definition
    }

    /// Whether the record changed since this was last asked: keep it then.
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// Whether it ended.
    pub fn is_settled(&self) -> bool {
        self.record.status.settled()
    }

    /// The next thing to do at `now_ms`, starting the current step when it may start.
    pub fn poll_action(&mut self, now_ms: i64) -> Option<Action> {
        // A wait that ends at once (a signal that came first) lets the next step start:
        // at most one start per step.
        for _ in 0..=self.record.steps.len() {
            if let Some(action) = self.actions.pop_front() {
                return Some(action);
            }
            if self.record.status != Status::Running {
                return None;
            }
            let step = self.record.steps.get(self.record.step)?;
            if step.status != StepStatus::Pending {
                return None;
            }
            if let Some(action) = self.start_step(now_ms) {
                return Some(action);
            }
        }
        self.actions.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) is due, if anything waits for a time.
    pub fn poll_timeout(&self) -> Option<i64> {
        if self.is_settled() {
            return None;
        }
        let step = self.record.steps.get(self.record.step)?;
        match step.status {
            StepStatus::Running | StepStatus::Retrying | StepStatus::Waiting => step.due_ms,
            _ => None,
        }
    }

    /// The time is `now_ms`: an attempt past its bound is given up (and failed, retried when
    /// it may be), a retry that is due is made ready, a wait that is over ends.
    pub fn handle_timeout(&mut self, now_ms: i64) {
        if self.poll_timeout().is_none_or(|due| due > now_ms) {
            return;
        }
        let i = self.record.step;
        let step = &self.record.steps[i];
        let timeout = step
            .due_ms
            .zip(step.started_ms)
            .map_or(0, |(due, start)| due.saturating_sub(start));
        let bound =
            humantime::format_duration(Duration::from_millis(u64::try_from(timeout).unwrap_or(0)));
        match step.status {
            StepStatus::Running => {
                let attempt = step.attempt;
                self.actions.push_back(Action::Abandon { step: i, attempt });
                let failure = Failure::retryable("timed_out", format!("no outcome within {bound}"));
                self.fail_step(failure, now_ms);
            }
            StepStatus::Retrying => {
                let step = &mut self.record.steps[i];
                step.status = StepStatus::Pending;
                step.due_ms = None;
                self.touch(now_ms);
            }
            StepStatus::Waiting => match &self.definition.steps[i].kind {
                Kind::Wait(Wait::Duration(_)) => {
                    let started = step.started_ms.unwrap_or(now_ms);
                    let waited = now_ms.saturating_sub(started).max(0);
                    self.step_done(json!({"waited_ms": waited}), now_ms);
                }
                _ => {
                    self.release(i);
                    let failure = Failure::new("timed_out", format!("nothing came within {bound}"));
                    self.fail_step(failure, now_ms);
                }
            },
            _ => {}
        }
    }

    /// Attempt `attempt` of step `step` came to `outcome` at `now_ms`. An outcome of an
    /// attempt that is not under way any more (given up, cancelled) is dropped.
    pub fn handle_outcome(
        &mut self,
        step: usize,
        attempt: u32,
        outcome: Result<Value, Failure>,
        now_ms: i64,
    ) {
        if step != self.record.step || self.is_settled() {
            return;
        }
        let Some(current) = self.record.steps.get(step) else {
            return;
        };
        if current.attempt != attempt {
            return;
        }
        match (current.status, outcome) {
            (StepStatus::Running, Ok(output)) => self.step_done(output, now_ms),
            (StepStatus::Running, Err(failure)) => self.fail_step(failure, now_ms),
            // A wait's subscribe that will not pass.
            (StepStatus::Waiting, Err(failure)) => {
                self.release(step);
                let failure = Failure {
                    retryable: false,
                    ..failure
                };
                self.fail_step(failure, now_ms);
            }
            _ => {}
        }
    }

    /// Signal `name` with `payload` came at `now_ms`: the current wait for it takes it, else
    /// it is kept for a later wait. Refused when the run ended (`already_finished`), when the
    /// payload is past the bound or the run holds [`SIGNALS_MAX`] already (`too_large`).
    pub fn signal(&mut self, name: &str, payload: Value, now_ms: i64) -> Result<(), Error> {
        self.unsettled()?;
        let size = serialized_len(&payload);
        if size > self.value_max {
            return Err(Error::TooLarge {
                what: "payload",
                size,
                max: self.value_max,
            });
        }
        let i = self.record.step;
        let waiting = self.record.steps[i].status == StepStatus::Waiting
            && matches!(&self.definition.steps[i].kind,
                Kind::Wait(Wait::Signal { name: wanted }) if wanted == name);
        if waiting {
            self.step_done(json!({"signal": name, "payload": payload}), now_ms);
            return Ok(());
        }
        if self.record.signals.len() >= SIGNALS_MAX {
            return Err(Error::TooLarge {
                what: "signals",
                size: self.record.signals.len() + 1,
                max: SIGNALS_MAX,
            });
        }
        self.record.signals.push(Signal {
            name: name.to_owned(),
            payload,
            at_ms: now_ms,
        });
        self.touch(now_ms);
        Ok(())
    }

    /// Resource `uri` of `server` changed at `now_ms`: a wait for it ends. Whether one did.
    pub fn updated(&mut self, server: &str, uri: &str, now_ms: i64) -> bool {
        if self.is_settled() {
            return false;
        }
        let i = self.record.step;
        let step = &self.record.steps[i];
        let watching = step.status == StepStatus::Waiting
            && step
                .watched
                .as_ref()
                .is_some_and(|w| w.server == server && w.uri == uri);
        if watching {
            self.release(i);
            self.step_done(json!({"server": server, "uri": uri}), now_ms);
        }
        watching
    }

    /// Cancels the run at `now_ms`: what is under way is given up. Refused when it ended.
    pub fn cancel(&mut self, now_ms: i64) -> Result<(), Error> {
        self.unsettled()?;
        let i = self.record.step;
        let step = &self.record.steps[i];
        match step.status {
            StepStatus::Running => {
                let attempt = step.attempt;
                self.actions.push_back(Action::Abandon { step: i, attempt });
            }
            StepStatus::Waiting => self.release(i),
            _ => {}
        }
        let step = &mut self.record.steps[i];
        if !matches!(step.status, StepStatus::Pending) || step.attempt > 0 {
            step.status = StepStatus::Cancelled;
            step.due_ms = None;
            step.ended_ms = Some(now_ms);
        }
        self.end(Status::Cancelled, None, now_ms);
        Ok(())
    }

    /// Pauses the run at `now_ms`: it starts no step until resumed (what is under way goes
    /// on). Refused when it ended; nothing changes when it is paused.
    pub fn pause(&mut self, now_ms: i64) -> Result<(), Error> {
        self.unsettled()?;
        if self.record.status == Status::Running {
            self.record.status = Status::Paused;
            self.touch(now_ms);
        }
        Ok(())
    }

    /// Resumes a paused run at `now_ms`. Refused when it ended; nothing changes when it runs.
    pub fn resume(&mut self, now_ms: i64) -> Result<(), Error> {
        self.unsettled()?;
        if self.record.status == Status::Paused {
            self.record.status = Status::Running;
            self.touch(now_ms);
        }
        Ok(())
    }

    fn unsettled(&self) -> Result<(), Error> {
        match self.is_settled() {
            true => Err(Error::AlreadyFinished {
                unit: format!("run:{}", self.record.id),
            }),
            false => Ok(()),
        }
    }

    fn touch(&mut self, now_ms: i64) {
        self.record.updated_ms = now_ms;
        self.changed = true;
    }

    /// The templates' context: the input, the run, the outputs so far.
    fn context(&self) -> Context<'_> {
        let r = &self.record;
        let cx = Context::new(&r.input, &r.id, &r.workflow);
        r.steps
            .iter()
            .filter_map(|s| Some((s.id.as_str(), s.output.as_ref()?)))
            .fold(cx, |cx, (id, output)| cx.step(id, output))
    }

    /// Starts the current step: what to do for it, if anything.
    fn start_step(&mut self, now_ms: i64) -> Option<Action> {
        let i = self.record.step;
        let definition = self.definition.steps[i].clone();
        let at = format!("/steps/{i}");
        let rendered = {
            let cx = self.context();
            let text = |text: &str, pointer: &str| -> Result<String, Failure> {
                let value = Template::parse(text)
                    .map_err(|e| template_failure(&at, pointer, &e.to_string()))?
                    .render(&cx)
                    .map_err(|e| template_failure(&at, pointer, &e.to_string()))?;
                Ok(match value {
                    Value::String(s) => s,
                    other => other.to_string(),
                })
            };
            let value = |value: &Value, pointer: &str| {
                template::render_value(value, &format!("{at}{pointer}"), &cx)
                    .map_err(|(p, e)| Failure::new("template", format!("{p}: {e}")))
            };
            let key = self.record.steps[i].idempotency_key.clone();
            let run_key = format!("{}:{}", self.record.id, definition.id);
            match &definition.kind {
                Kind::McpTool(t) => value(&Value::Object(t.arguments.clone()), "/arguments")
                    .and_then(|arguments| {
                        let idempotency_key = match (key, &t.idempotency) {
                            (Some(key), _) => key,
                            (None, Some(v)) => text(v, "/idempotency/value")?,
                            (None, None) => run_key,
                        };
                        let Value::Object(arguments) = arguments else {
                            unreachable!("an object renders to an object")
                        };
                        Ok(Started::Call(Call::McpTool {
                            server: t.server.clone(),
                            tool: t.tool.clone(),
                            arguments,
                            idempotency_key,
                        }))
                    }),
                Kind::McpResource { server, op } => resolve(op, &text, &value).map(|op| {
                    Started::Call(Call::Resource {
                        server: server.clone(),
                        op,
                    })
                }),
                Kind::Tool { name, arguments } => value(arguments, "/arguments").map(|arguments| {
                    Started::Call(Call::Tool {
                        name: name.clone(),
                        arguments,
                    })
                }),
                Kind::Agent { prompt } => {
                    text(prompt, "/prompt").map(|prompt| Started::Call(Call::Agent { prompt }))
                }
                Kind::Wait(Wait::Resource { server, uri }) => text(uri, "/on/resource/uri")
                    .and_then(|uri| {
                        if uri.contains(['{', '}']) || uri.is_empty() {
                            return Err(Failure::new(
                                "not_concrete",
                                format!(
                                    "{uri:?} is not a concrete URI: a template is not subscribable"
                                ),
                            ));
                        }
                        Ok(Started::Watch(Watched {
                            server: server.clone(),
                            uri,
                        }))
                    }),
                Kind::Wait(Wait::Signal { .. }) => Ok(Started::Signal),
                Kind::Wait(Wait::Duration(d)) => Ok(Started::Sleep(*d)),
            }
        };
        let started = match rendered {
            Ok(started) => started,
            Err(failure) => {
                self.fail_step(failure, now_ms);
                return None;
            }
        };
        let step_timeout = Duration::from_millis(self.record.step_timeout_ms);
        let step = &mut self.record.steps[i];
        step.started_ms = Some(now_ms);
        step.error = None;
        self.changed = true;
        self.record.updated_ms = now_ms;
        match started {
            Started::Call(call) => {
                let timeout = definition.timeout.unwrap_or(step_timeout);
                step.attempt += 1;
                step.status = StepStatus::Running;
                let deadline_ms = now_ms.saturating_add(millis(timeout));
                step.due_ms = Some(deadline_ms);
                if let Some(key) = call.idempotency_key() {
                    step.idempotency_key = Some(key.to_owned());
                }
                Some(Action::Execute(Execute {
                    step: i,
                    id: definition.id,
                    attempt: step.attempt,
                    call,
                    deadline_ms,
                }))
            }
            Started::Sleep(d) => {
                step.attempt += 1;
                step.status = StepStatus::Waiting;
                step.due_ms = Some(now_ms.saturating_add(millis(d)));
                None
            }
            Started::Signal => {
                step.attempt += 1;
                step.status = StepStatus::Waiting;
                step.due_ms = definition.timeout.map(|t| now_ms.saturating_add(millis(t)));
                let Kind::Wait(Wait::Signal { name }) = &definition.kind else {
                    unreachable!("a signal wait")
                };
                let queued = self.record.signals.iter().position(|s| s.name == *name);
                if let Some(at) = queued {
                    let signal = self.record.signals.remove(at);
                    let output = json!({"signal": signal.name, "payload": signal.payload});
                    self.step_done(output, now_ms);
                }
                None
            }
            Started::Watch(watched) => {
                step.attempt += 1;
                step.status = StepStatus::Waiting;
                step.due_ms = definition.timeout.map(|t| now_ms.saturating_add(millis(t)));
                step.watched = Some(watched.clone());
                Some(Action::Subscribe {
                    step: i,
                    attempt: step.attempt,
                    watched,
                    again: false,
                })
            }
        }
    }

    /// The current step is done with `output` (failed `too_large` past the bound): the run
    /// goes on to the next, or completes.
    fn step_done(&mut self, output: Value, now_ms: i64) {
        let size = serialized_len(&output);
        if size > self.value_max {
            let failure = Failure::new(
                "too_large",
                format!("an output of {size} bytes is past {}", self.value_max),
            );
            return self.fail_step(failure, now_ms);
        }
        let i = self.record.step;
        let step = &mut self.record.steps[i];
        step.status = StepStatus::Done;
        step.due_ms = None;
        step.error = None;
        step.ended_ms = Some(now_ms);
        step.output = Some(output.clone());
        self.record.step += 1;
        self.touch(now_ms);
        if self.record.step == self.record.steps.len() {
            self.record.output = Some(output);
            self.end(Status::Completed, None, now_ms);
        }
    }

    /// The current step's attempt failed: retried when the failure may pass and retries are
    /// left, else the step and the run fail.
    fn fail_step(&mut self, failure: Failure, now_ms: i64) {
        let i = self.record.step;
        let retries = match &self.definition.steps[i].kind {
            Kind::McpTool(t) => t.retries,
            _ => Retries::NONE,
        };
        let step = &mut self.record.steps[i];
        step.failures += 1;
        step.error = Some(failure.clone());
        if failure.retryable && step.failures <= retries.max {
            step.status = StepStatus::Retrying;
            step.due_ms = Some(now_ms.saturating_add(millis(retries.delay(step.failures))));
            self.touch(now_ms);
            return;
        }
        step.status = StepStatus::Failed;
        step.due_ms = None;
        step.ended_ms = Some(now_ms);
        let message = format!("step {:?}: {}", step.id, failure.message);
        let failure = Failure::new(&failure.code, message);
        self.end(Status::Failed, Some(failure), now_ms);
    }

    /// The wait of step `i` lets its resource go, if it watches one.
    fn release(&mut self, i: usize) {
        if let Some(watched) = self.record.steps[i].watched.clone() {
            self.actions.push_back(Action::Release { watched });
        }
    }

    fn end(&mut self, status: Status, error: Option<Failure>, now_ms: i64) {
        self.record.status = status;
        self.record.error = error;
        self.record.ended_ms = Some(now_ms);
        self.touch(now_ms);
    }
}

/// How a step started.
enum Started {
    Call(Call),
    Sleep(Duration),
    Signal,
    Watch(Watched),
}

fn template_failure(at: &str, pointer: &str, message: &str) -> Failure {
    Failure::new("template", format!("{at}{pointer}: {message}"))
}

/// An `mcp.resource` step's op, rendered.
fn resolve(
    op: &ResourceOp,
    text: &dyn Fn(&str, &str) -> Result<String, Failure>,
    value: &dyn Fn(&Value, &str) -> Result<Value, Failure>,
) -> Result<Resolved, Failure> {
    Ok(match op {
        ResourceOp::List => Resolved::List,
        ResourceOp::Templates => Resolved::Templates,
        ResourceOp::Read { uri } => Resolved::Read {
            uri: text(uri, "/read")?,
        },
        ResourceOp::Prompt { name, arguments } => {
            let rendered = value(&Value::Object(arguments.clone()), "/prompt/arguments")?;
            let arguments = rendered
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| {
                    let v = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), v)
                })
                .collect();
            Resolved::Prompt {
                name: name.clone(),
                arguments,
            }
        }
        ResourceOp::Complete(params) => Resolved::Complete(value(params, "/complete")?),
    })
}
