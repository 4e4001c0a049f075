//! What the engine is told: the orders of the tools and the supervisor ([`Order`]), and the
//! outcomes of the attempts and subscribes it started ([`Outcome`]).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use agentd_tools::Error;
use agentd_tools::workflow::run::{Failure, Limits, Record};
use agentd_tools::workflow::{Command, Defined, Definition};
use serde_json::Value;
use tokio::sync::oneshot;

use super::bounds::Bounds;

/// The streams told appended to and not yet taken up, each with one
/// [`Order::Appended`] on its way: the occurrences a burst of commits appends are taken up
/// at one order, not one order a commit.
pub(super) type Appending = Arc<std::sync::Mutex<BTreeSet<String>>>;

/// An order to the engine.
pub(super) enum Order {
    Configure {
        configured: Vec<Definition>,
        limits: Limits,
        bounds: Bounds,
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

/// What an attempt, or a wait's subscribe, came to.
#[derive(Debug)]
pub(super) struct Outcome {
    pub(super) run: String,
    pub(super) step: usize,
    pub(super) attempt: u32,
    pub(super) outcome: Result<Value, Failure>,
}
