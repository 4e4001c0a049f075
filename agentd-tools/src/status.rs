//! `status`: the instance's conversations, runs, subagents, budget and store.

use serde_json::{Value, json};

use crate::Error;
use crate::subagent::Subagent;
use crate::workflow::Record;

/// A conversation: the size of its inbox, and the tokens its model calls used.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Inbox {
    /// The conversation's id.
    pub id: String,
    /// The messages of its inbox.
    pub inbox: u64,
    /// The tokens its model calls used, read and written.
    pub tokens: u64,
}

impl Inbox {
    /// Conversation `id` with `inbox` messages, whose model calls used `tokens`.
    pub fn new(id: &str, inbox: u64, tokens: u64) -> Self {
        Self {
            id: id.to_owned(),
            inbox,
            tokens,
        }
    }
}

/// The instance's tokens: what its model calls used, and how many it may use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Budget {
    /// The tokens used, every conversation's together.
    pub used: u64,
    /// The tokens it may use, if bounded.
    pub limit: Option<u64>,
}

impl Budget {
    /// `used` tokens of `limit`.
    pub fn new(used: u64, limit: Option<u64>) -> Self {
        Self { used, limit }
    }

    /// Of `limit`, by conversations that used `tokens` each: used is their sum, at most
    /// `u64::MAX`.
    pub fn of(tokens: impl IntoIterator<Item = u64>, limit: Option<u64>) -> Self {
        let used = tokens.into_iter().fold(0, u64::saturating_add);
        Self::new(used, limit)
    }

    /// Whether the limit is reached (used as many tokens, or more): no turn starts.
    pub fn spent(&self) -> bool {
        self.limit.is_some_and(|limit| self.used >= limit)
    }

    /// `{"tokens_used", "tokens_limit", "spent"}`, the limit null when unbounded.
    pub fn to_value(&self) -> Value {
        json!({"tokens_used": self.used, "tokens_limit": self.limit, "spent": self.spent()})
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
    /// Its workflow runs under way (running or paused), oldest first.
    pub runs: Vec<Record>,
    /// How many units of work finished.
    pub units_finished: u64,
    /// The tokens used and the limit.
    pub budget: Budget,
    /// The store's size, in bytes.
    pub store_bytes: u64,
    /// Whether the store is degraded.
    pub degraded: bool,
}

impl Report {
    /// The report as `status` answers it, each run as `workflow.list` says it.
    pub fn to_value(&self) -> Value {
        let conversations: Vec<Value> = self
            .conversations
            .iter()
            .map(|c| json!({"id": c.id, "inbox": c.inbox, "tokens": c.tokens}))
            .collect();
        json!({
            "instance": self.instance,
            "conversations": conversations,
            "runs": self.runs.iter().map(Record::summary).collect::<Vec<_>>(),
            "subagents": self.subagents.iter().map(Subagent::to_value).collect::<Vec<_>>(),
            "units_finished": self.units_finished,
            "budget": self.budget.to_value(),
            "store": {"bytes": self.store_bytes, "degraded": self.degraded},
        })
    }
}

/// Where `status` reads the instance's state.
pub trait Status: Send + Sync {
    /// The instance's state now.
    fn report(&self) -> impl Future<Output = Result<Report, Error>> + Send;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tokens_used_are_summed_up_to_the_largest_count() {
        assert_eq!(Budget::of([], None).used, 0);
        assert_eq!(Budget::of([3, 4], Some(10)), Budget::new(7, Some(10)));
        assert_eq!(Budget::of([u64::MAX - 1, 1], None).used, u64::MAX);
        assert_eq!(Budget::of([u64::MAX, u64::MAX], None).used, u64::MAX);
    }

    #[test]
    fn a_budget_is_spent_at_its_limit_and_not_below() {
        assert!(Budget::new(10, Some(10)).spent());
        assert!(Budget::new(11, Some(10)).spent());
        assert!(!Budget::new(9, Some(10)).spent());
        assert!(Budget::new(0, Some(0)).spent());
        assert!(!Budget::new(u64::MAX, None).spent());
    }
}
