//! Workflows: definitions ([`definition`], their templates in [`template`]), durable runs as a
//! state machine without IO ([`run`]), and the `workflow.*` tools over [`Workflows`], the
//! service the daemon implements (its runs kept in its store, its steps executed over the
//! supervisor's connections) and [`in_memory::Runs`] implements for tests.
//!
//! The tools:
//! - `workflow.create` and `workflow.update` `{name, definition}`: a definition checked whole
//!   ([`Definition::parse`]; refused `invalid_arguments` at `/definition…`, naming the step
//!   and the rule), `exists` / `not_found`; answered `{"workflow", "version", "steps"}`;
//! - `workflow.delete` `{name}`: `{"deleted"}`; a run under way keeps its definition;
//! - `workflow.run` `{workflow, input?}`: a run started (the input, `{}` when not given,
//!   checked against the workflow's input schema), answered as `workflow.status`;
//! - `workflow.status` `{run}`: [`Record::to_value`], `unknown_run` when there is none;
//! - `workflow.list` `{workflow?, status?, after?, limit?}`: runs oldest first, `limit` (50
//!   unless given, at most 100) after the run `after`: `{"runs": [summary], "next"}`;
//! - `workflow.cancel`, `workflow.pause`, `workflow.resume` `{run}` and `workflow.signal`
//!   `{run, signal, payload?}`: the run afterwards; `already_finished` once it ended;
//! - `workflow.wait` `{run, timeout?}`: the run once it ended, or as it is when the timeout
//!   (60 s unless given, 1 ms to 1 h) passed first.
//!
//! A workflow's name is the configuration's or the store's: `workflow.update` and
//! `workflow.delete` refuse one defined in the configuration (`invalid_arguments` at `/name`,
//! rule `configured`), `workflow.create` refuses its name (`exists`).

pub mod definition;
pub mod in_memory;
pub mod run;
pub mod template;
#[cfg(test)]
mod tests;

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

pub use self::definition::{Definition, DefinitionError};
pub use self::run::{Record, Status};
use crate::Error;
use crate::schema::parse;
use crate::wait::{self, Clock, Woke};

/// The page of `workflow.list` when the call says nothing.
pub const LIST_DEFAULT: usize = 50;
/// The largest page of `workflow.list`.
pub const LIST_MAX: usize = 100;
/// `workflow.wait`'s timeout when the call says nothing.
pub const WAIT_DEFAULT: Duration = wait::AWAIT_DEFAULT;

/// What `workflow.create` or `workflow.update` made.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Defined {
    /// The workflow.
    pub workflow: String,
    /// Its version: 1 when created, one more at each update.
    pub version: u64,
    /// How many steps it has.
    pub steps: usize,
}

impl Defined {
    /// `workflow` at `version`, of `steps` steps.
    pub fn new(workflow: &str, version: u64, steps: usize) -> Self {
        Self {
            workflow: workflow.to_owned(),
            version,
            steps,
        }
    }
}

/// Which runs `workflow.list` wants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Filter {
    /// Of this workflow only.
    pub workflow: Option<String>,
    /// At this status only.
    pub status: Option<Status>,
    /// Started after this run.
    pub after: Option<String>,
    /// At most this many.
    pub limit: usize,
}

impl Filter {
    /// Every run, `limit` at most.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    /// Whether `record` is one it wants (`after` aside).
    pub fn wants(&self, record: &Record) -> bool {
        self.workflow.as_ref().is_none_or(|w| *w == record.workflow)
            && self.status.is_none_or(|s| s == record.status)
    }
}

/// One page of runs, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Page {
    /// The runs.
    pub runs: Vec<Record>,
    /// Whether more follow the last.
    pub more: bool,
}

impl Page {
    /// `runs`, `more` after them or not.
    pub fn new(runs: Vec<Record>, more: bool) -> Self {
        Self { runs, more }
    }
}

/// What is done to a run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Command {
    /// Cancel it.
    Cancel,
    /// Pause it.
    Pause,
    /// Resume it.
    Resume,
    /// Signal it.
    Signal {
        /// The signal's name.
        name: String,
        /// What it carries.
        payload: Value,
    },
}

/// The workflows and their runs. Definitions reach the service checked; a run's record says
/// where it stands ([`Record`]). [`testing::check_workflows`](crate::testing::check_workflows)
/// states the semantics.
pub trait Workflows: Send + Sync {
    /// Defines `definition`'s workflow; [`Error::Exists`] when one of that name is.
    fn create(&self, definition: Definition)
    -> impl Future<Output = Result<Defined, Error>> + Send;

    /// Replaces the definition of `definition`'s workflow (runs under way keep theirs);
    /// [`Error::NotFound`] when none of that name is.
    fn update(&self, definition: Definition)
    -> impl Future<Output = Result<Defined, Error>> + Send;

    /// Deletes workflow `name`; whether it was there.
    fn delete(&self, name: &str) -> impl Future<Output = Result<bool, Error>> + Send;

    /// Starts a run of `workflow` with `input` for `by` (the caller's unit);
    /// [`Error::NotFound`] when there is no such workflow.
    fn run(
        &self,
        workflow: &str,
        input: Value,
        by: &str,
    ) -> impl Future<Output = Result<Record, Error>> + Send;

    /// Run `run` as it stands; [`Error::UnknownRun`] when there is none.
    fn status(&self, run: &str) -> impl Future<Output = Result<Record, Error>> + Send;

    /// The runs `filter` wants, oldest first.
    fn list(&self, filter: Filter) -> impl Future<Output = Result<Page, Error>> + Send;

    /// Does `command` to run `run`: the run afterwards.
    fn command(
        &self,
        run: &str,
        command: Command,
    ) -> impl Future<Output = Result<Record, Error>> + Send;
}

/// Refused: `name` is a workflow of the configuration, which `tool` does not change.
pub fn configured(tool: &str, name: &str) -> Error {
    Error::invalid(
        tool,
        "/name",
        "configured",
        format!("workflow {name:?} is defined in the configuration: change it there"),
    )
}

/// Refused: no workflow is named `name`.
pub fn unknown(name: &str) -> Error {
    Error::NotFound {
        what: format!("workflow {name:?}"),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Define {
    name: String,
    definition: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Name {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Start {
    workflow: String,
    input: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Of {
    run: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Until {
    run: String,
    timeout: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Signalled {
    run: String,
    signal: String,
    payload: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct List {
    workflow: Option<String>,
    status: Option<String>,
    after: Option<String>,
    limit: Option<usize>,
}

/// Runs workflow tool `tool` for `unit`, its arguments checked against its schema.
pub(crate) async fn call(
    workflows: &impl Workflows,
    clock: &impl Clock,
    unit: &str,
    tool: &str,
    arguments: Value,
) -> Result<Value, Error> {
    let defined =
        |d: Defined| json!({"workflow": d.workflow, "version": d.version, "steps": d.steps});
    match tool {
        "workflow.create" | "workflow.update" => {
            let Define { name, definition } = parse(tool, arguments)?;
            let definition =
                Definition::parse(&name, &definition).map_err(|e| match e.pointer {
                    // The name is not inside the definition.
                    ref p if p.is_empty() && e.rule == "name" => {
                        Error::invalid(tool, "/name", e.rule, e.to_string())
                    }
                    _ => e.to_tool_error(tool),
                })?;
            let made = match tool {
                "workflow.create" => workflows.create(definition).await?,
                _ => workflows.update(definition).await?,
            };
            Ok(defined(made))
        }
        "workflow.delete" => {
            let Name { name } = parse(tool, arguments)?;
            Ok(json!({"deleted": workflows.delete(&name).await?}))
        }
        "workflow.run" => {
            let Start { workflow, input } = parse(tool, arguments)?;
            let input = input.unwrap_or_else(|| json!({}));
            Ok(workflows.run(&workflow, input, unit).await?.to_value())
        }
        "workflow.status" => {
            let Of { run } = parse(tool, arguments)?;
            Ok(workflows.status(&run).await?.to_value())
        }
        "workflow.list" => {
            let args: List = parse(tool, arguments)?;
            let status = match args.status.as_deref() {
                None => None,
                Some(name) => Some(Status::parse(name).ok_or_else(|| {
                    Error::invalid(
                        tool,
                        "/status",
                        "enum",
                        "running, paused, completed, failed or cancelled",
                    )
                })?),
            };
            let limit = args.limit.unwrap_or(LIST_DEFAULT);
            if limit > LIST_MAX {
                return Err(Error::TooLarge {
                    what: "limit",
                    size: limit,
                    max: LIST_MAX,
                });
            }
            let filter = Filter {
                workflow: args.workflow,
                status,
                after: args.after,
                limit,
            };
            let page = workflows.list(filter).await?;
            let next = match (page.more, page.runs.last()) {
                (true, Some(last)) => json!(last.id),
                _ => Value::Null,
            };
            let runs: Vec<Value> = page.runs.iter().map(Record::summary).collect();
            Ok(json!({"runs": runs, "next": next}))
        }
        "workflow.wait" => {
            let Until { run, timeout } = parse(tool, arguments)?;
            let timeout = match &timeout {
                Some(t) => wait::duration(tool, "/timeout", t)?,
                None => WAIT_DEFAULT,
            };
            settled(workflows, clock, &run, timeout).await
        }
        _ => {
            let (run, command) = match tool {
                "workflow.signal" => {
                    let Signalled {
                        run,
                        signal,
                        payload,
                    } = parse(tool, arguments)?;
                    let payload = payload.unwrap_or(Value::Null);
                    (
                        run,
                        Command::Signal {
                            name: signal,
                            payload,
                        },
                    )
                }
                _ => {
                    let Of { run } = parse(tool, arguments)?;
                    let command = match tool {
                        "workflow.cancel" => Command::Cancel,
                        "workflow.pause" => Command::Pause,
                        _ => Command::Resume,
                    };
                    (run, command)
                }
            };
            Ok(workflows.command(&run, command).await?.to_value())
        }
    }
}

/// Run `run` once it ended, or as it is once `timeout` passed first.
async fn settled(
    workflows: &impl Workflows,
    clock: &impl Clock,
    run: &str,
    timeout: Duration,
) -> Result<Value, Error> {
    let millis = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let deadline = clock.now_ms().saturating_add(millis(timeout));
    loop {
        let record = workflows.status(run).await?;
        let left = deadline.saturating_sub(clock.now_ms());
        if record.status.settled() || left <= 0 {
            return Ok(record.to_value());
        }
        let left = Duration::from_millis(u64::try_from(left).unwrap_or(0));
        if clock.changed(left).await == Woke::ShuttingDown {
            return Err(Error::ShuttingDown);
        }
    }
}
