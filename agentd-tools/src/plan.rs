//! `plan.*`: each unit's working plan, a list of steps with a status each.
//!
//! At most 100 steps ([`STEPS_MAX`]), a title 1..=500 bytes ([`TITLE_MAX`]); creating a
//! plan makes version 1 and every update adds 1.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Error;
use crate::schema::parse;

/// The most steps a plan holds.
pub const STEPS_MAX: usize = 100;
/// A title's largest size, in bytes.
pub const TITLE_MAX: usize = 500;

/// A step's status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Status {
    /// Not started (the default).
    #[default]
    Pending,
    /// Under way.
    InProgress,
    /// Done.
    Done,
    /// Passed over.
    Skipped,
    /// Failed.
    Failed,
}

/// A step of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Step {
    /// What the step is.
    pub title: String,
    /// Where it stands.
    #[serde(default)]
    pub status: Status,
}

impl Step {
    /// A step titled `title`, at `status`.
    pub fn new(title: &str, status: Status) -> Self {
        Self {
            title: title.to_owned(),
            status,
        }
    }
}

/// A plan: its steps and its version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Plan {
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// Its version: 1 when created, 1 more for each update.
    pub version: u64,
}

impl Plan {
    /// A plan of `steps` at `version`.
    pub fn new(steps: Vec<Step>, version: u64) -> Self {
        Self { steps, version }
    }
}

/// An update of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Update {
    /// Replace every step.
    Steps(Vec<Step>),
    /// Change one step.
    Step {
        /// Its index (from 0).
        index: usize,
        /// Its new status, if it changes.
        status: Option<Status>,
        /// Its new title, if it changes.
        title: Option<String>,
    },
}

/// The plan of each unit of work (`unit`: [`Caller::unit`](crate::Caller::unit)). Steps
/// and titles reach the service checked ([`check_steps`]).
pub trait Plans: Send + Sync {
    /// `unit`'s plan, if it has one.
    fn get(&self, unit: &str) -> impl Future<Output = Result<Option<Plan>, Error>> + Send;

    /// Makes `unit`'s plan of `steps`, at version 1; [`Error::Exists`] when it has one.
    fn create(
        &self,
        unit: &str,
        steps: Vec<Step>,
    ) -> impl Future<Output = Result<Plan, Error>> + Send;

    /// Updates `unit`'s plan; [`Error::NotFound`] when it has none or the step is not there.
    fn update(
        &self,
        unit: &str,
        update: Update,
    ) -> impl Future<Output = Result<Plan, Error>> + Send;

    /// Removes `unit`'s plan; whether it had one.
    fn clear(&self, unit: &str) -> impl Future<Output = Result<bool, Error>> + Send;
}

/// Checks steps: at most [`STEPS_MAX`], each title 1..=[`TITLE_MAX`] bytes.
pub fn check_steps(steps: &[Step]) -> Result<(), Error> {
    if steps.len() > STEPS_MAX {
        return Err(Error::TooLarge {
            what: "steps",
            size: steps.len(),
            max: STEPS_MAX,
        });
    }
    steps.iter().try_for_each(|s| check_title(&s.title))
}

fn check_title(title: &str) -> Result<(), Error> {
    if title.len() > TITLE_MAX {
        return Err(Error::TooLarge {
            what: "title",
            size: title.len(),
            max: TITLE_MAX,
        });
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Create {
    steps: Vec<Step>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateArgs {
    steps: Option<Vec<Step>>,
    step: Option<usize>,
    status: Option<Status>,
    title: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Nothing {}

fn answer(plan: Option<Plan>) -> Value {
    json!({"plan": plan})
}

/// Runs plan tool `tool` for `unit`.
pub(crate) async fn call(
    plans: &impl Plans,
    unit: &str,
    tool: &str,
    arguments: Value,
) -> Result<Value, Error> {
    match tool {
        "plan.create" => {
            let Create { steps } = parse(tool, arguments)?;
            check_steps(&steps)?;
            Ok(answer(Some(plans.create(unit, steps).await?)))
        }
        "plan.get" => {
            let Nothing {} = parse(tool, arguments)?;
            Ok(answer(plans.get(unit).await?))
        }
        "plan.update" => {
            let args: UpdateArgs = parse(tool, arguments)?;
            let update = match (args.steps, args.step) {
                (Some(steps), None) => {
                    check_steps(&steps)?;
                    Update::Steps(steps)
                }
                (None, Some(index)) => {
                    if let Some(title) = &args.title {
                        check_title(title)?;
                    }
                    Update::Step {
                        index,
                        status: args.status,
                        title: args.title,
                    }
                }
                _ => {
                    return Err(Error::invalid(
                        tool,
                        "",
                        "oneOf",
                        "either steps, or step with status or title",
                    ));
                }
            };
            Ok(answer(Some(plans.update(unit, update).await?)))
        }
        _ => {
            let Nothing {} = parse(tool, arguments)?;
            Ok(json!({"cleared": plans.clear(unit).await?}))
        }
    }
}
