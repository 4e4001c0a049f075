//! `finish`: a unit of work records that it finished, once, with a status and a summary
//! of at most 4096 bytes.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::Error;
use crate::artifact::Artifacts;
use crate::schema::parse;

/// A summary's largest size, in bytes.
pub const SUMMARY_MAX: usize = 4096;

/// How a unit finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// Its work is done.
    Done,
    /// It failed.
    Failed,
    /// It was called off.
    Cancelled,
}

impl Outcome {
    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// The record of finished units.
pub trait Units: Send + Sync {
    /// Records that `unit` finished with `outcome` and `summary` at `at_ms`;
    /// [`Error::AlreadyFinished`] when it had, and nothing changed.
    fn finish(
        &self,
        unit: &str,
        outcome: Outcome,
        summary: &str,
        at_ms: i64,
    ) -> impl Future<Output = Result<(), Error>> + Send;
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Finish {
    status: Outcome,
    summary: String,
}

/// Runs `finish` for `unit` at `at_ms`: its answer names the unit's artifacts.
pub(crate) async fn call(
    units: &impl Units,
    artifacts: &impl Artifacts,
    unit: &str,
    at_ms: i64,
    arguments: Value,
) -> Result<Value, Error> {
    let Finish { status, summary } = parse("finish", arguments)?;
    if summary.len() > SUMMARY_MAX {
        return Err(Error::TooLarge {
            what: "summary",
            size: summary.len(),
            max: SUMMARY_MAX,
        });
    }
    units.finish(unit, status, &summary, at_ms).await?;
    let names: Vec<String> = artifacts
        .list(unit)
        .await?
        .into_iter()
        .map(|a| a.name)
        .collect();
    Ok(json!({"unit": unit, "status": status.as_str(), "artifacts": names}))
}
