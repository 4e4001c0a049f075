//! `status`: the instance's conversations, runs, subagents, budget and store.

use serde_json::{Value, json};

use crate::Error;
use crate::subagent::Subagent;

/// A conversation and the size of its inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Inbox {
    /// The conversation's id.
    pub id: String,
    /// The messages of its inbox.
    pub inbox: u64,
}

impl Inbox {
    /// Conversation `id` with `inbox` messages.
    pub fn new(id: &str, inbox: u64) -> Self {
        Self {
            id: id.to_owned(),
            inbox,
        }
    }
}

/// What `status` reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// The instance's name.
    pub instance: String,
    /// Its conversations, by id.
    pub conversations: Vec<Inbox>,
    /// Its subagents not retired, by id.
    pub subagents: Vec<Subagent>,
    /// How many units of work finished.
    pub units_finished: u64,
    /// The store's size, in bytes.
    pub store_bytes: u64,
    /// Whether the store is degraded.
    pub degraded: bool,
}

impl Report {
    /// The report as `status` answers it; runs and the budget are not kept yet (an empty
    /// list, null).
    pub fn to_value(&self) -> Value {
        let conversations: Vec<Value> = self
            .conversations
            .iter()
            .map(|c| json!({"id": c.id, "inbox": c.inbox}))
            .collect();
        json!({
            "instance": self.instance,
            "conversations": conversations,
            "runs": [],
            "subagents": self.subagents.iter().map(Subagent::to_value).collect::<Vec<_>>(),
            "units_finished": self.units_finished,
            "budget": null,
            "store": {"bytes": self.store_bytes, "degraded": self.degraded},
        })
    }
}

/// Where `status` reads the instance's state.
pub trait Status: Send + Sync {
    /// The instance's state now.
    fn report(&self) -> impl Future<Output = Result<Report, Error>> + Send;
}
