//! The service the `workflow.*` tools run over ([`Workflows`]), and what it takes and gives.

use serde_json::Value;

use super::definition::Definition;
use super::run::{Record, Status};
use crate::Error;

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
    /// Started after this run, or after the page whose `next` this is ([`Page::next`]).
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
    /// What [`Filter::after`] takes for the page after this one, when more follow.
    pub next: Option<String>,
}

impl Page {
    /// `runs`, `more` after them or not: the next page is after the last run's id.
    pub fn new(runs: Vec<Record>, more: bool) -> Self {
        let next = runs.last().filter(|_| more).map(|last| last.id.clone());
        Self { runs, more, next }
    }

    /// `runs`, the next page after `next` when there is one: a cursor of the service's own.
    pub fn with_next(runs: Vec<Record>, next: Option<String>) -> Self {
        let more = next.is_some();
        Self { runs, more, next }
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
