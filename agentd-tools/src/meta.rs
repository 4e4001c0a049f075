//! The `_meta` keys agentd puts on its requests so that a server can correlate and
//! deduplicate (the reference's "Request metadata" table).

use std::collections::BTreeMap;

use mcp_wire::Meta;
use mcp_wire::meta::key;
use serde_json::Value;

/// The keys, by name.
pub mod keys {
    /// The run a call belongs to; on every call.
    pub const RUN_ID: &str = "agent/run_id";
    /// The agent instance's name; on every call.
    pub const INSTANCE: &str = "agent/instance";
    /// The conversation context; on calls made during a conversation turn.
    pub const CTX: &str = "agent/ctx";
    /// A key stable across retries of the same work.
    pub const IDEMPOTENCY_KEY: &str = "agent/idempotency_key";
    /// The attempt number of an `mcp.tool` step.
    pub const ATTEMPT: &str = "agent/attempt";
    /// The workflow run of an `mcp.tool` step.
    pub const RUN: &str = "agent/run";
    /// The principal the work is for.
    pub const ACTING_FOR: &str = "agent/acting_for";
    /// Labels of the work.
    pub const LABELS: &str = "agent/labels";
}

/// agentd's request metadata (the keys of [`keys`] plus `traceparent`); each is sent only
/// when set.
///
/// ```
/// use agentd_tools::AgentMeta;
///
/// let mut call = AgentMeta::new("run-1", "my-agent");
/// call.traceparent = Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into());
/// let meta = call.to_meta();
/// assert_eq!(meta["agent/run_id"], "run-1");
/// assert!(meta.get("agent/attempt").is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct AgentMeta {
    /// `agent/run_id`.
    pub run_id: String,
    /// `agent/instance`.
    pub instance: String,
    /// `traceparent`, when the call is made with an active trace.
    pub traceparent: Option<String>,
    /// `agent/ctx`, on calls made during a conversation turn.
    pub ctx: Option<Value>,
    /// `agent/idempotency_key`.
    pub idempotency_key: Option<String>,
    /// `agent/attempt`, on calls from an `mcp.tool` step.
    pub attempt: Option<u32>,
    /// `agent/run`, on calls from an `mcp.tool` step.
    pub run: Option<String>,
    /// `agent/acting_for`, on calls from the supervisor's tool registry.
    pub acting_for: Option<Value>,
    /// `agent/labels`, on calls from the supervisor's tool registry.
    pub labels: Option<BTreeMap<String, String>>,
}

impl AgentMeta {
    /// The two keys every call carries.
    pub fn new(run_id: impl Into<String>, instance: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            instance: instance.into(),
            ..Self::default()
        }
    }

    /// The keys every call made for a unit of work carries, whoever makes it (a model's
    /// turn, a workflow step, a registry): `agent/run_id`, `agent/instance`, `traceparent`
    /// when the work has a trace, `agent/idempotency_key`. The maker sets its own keys on
    /// the answer.
    pub fn for_work(
        run_id: impl Into<String>,
        instance: impl Into<String>,
        traceparent: Option<String>,
        idempotency_key: String,
    ) -> Self {
        let mut meta = Self::new(run_id, instance);
        meta.traceparent = traceparent;
        meta.idempotency_key = Some(idempotency_key);
        meta
    }

    /// The keys that are set, as a `_meta` object to send with a call.
    pub fn to_meta(&self) -> Meta {
        let mut meta = Meta::new();
        self.insert_into(&mut meta);
        meta
    }

    /// Writes the keys that are set into `meta`, replacing any already there.
    pub fn insert_into(&self, meta: &mut Meta) {
        meta.insert(keys::RUN_ID.into(), self.run_id.clone().into());
        meta.insert(keys::INSTANCE.into(), self.instance.clone().into());
        let optional = [
            (key::TRACEPARENT, self.traceparent.clone().map(Value::from)),
            (keys::CTX, self.ctx.clone()),
            (
                keys::IDEMPOTENCY_KEY,
                self.idempotency_key.clone().map(Value::from),
            ),
            (keys::ATTEMPT, self.attempt.map(Value::from)),
            (keys::RUN, self.run.clone().map(Value::from)),
            (keys::ACTING_FOR, self.acting_for.clone()),
            (
                keys::LABELS,
                self.labels.as_ref().map(|l| {
                    Value::Object(
                        l.iter()
                            .map(|(k, v)| (k.clone(), v.clone().into()))
                            .collect(),
                    )
                }),
            ),
        ];
        for (name, value) in optional {
            if let Some(value) = value {
                meta.insert(name.into(), value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn names(meta: &Meta) -> Vec<&str> {
        meta.keys().map(String::as_str).collect()
    }

    #[test]
    fn every_key_of_the_reference_and_only_those_set() {
        let mut all = AgentMeta::new("run-1", "my-agent");
        all.traceparent = Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into());
        all.ctx = Some(json!({"turn":3}));
        all.idempotency_key = Some("idem-1".into());
        all.attempt = Some(2);
        all.run = Some("wf-9".into());
        all.acting_for = Some(json!({"principal":"alice"}));
        all.labels = Some(BTreeMap::from([("team".to_owned(), "infra".to_owned())]));
        assert_eq!(
            Value::Object(all.to_meta()),
            json!({
                "agent/run_id":"run-1",
                "agent/instance":"my-agent",
                "traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                "agent/ctx":{"turn":3},
                "agent/idempotency_key":"idem-1",
                "agent/attempt":2,
                "agent/run":"wf-9",
                "agent/acting_for":{"principal":"alice"},
                "agent/labels":{"team":"infra"}
            })
        );
        assert_eq!(
            names(&AgentMeta::new("r", "i").to_meta()),
            ["agent/instance", "agent/run_id"]
        );

        let mut some = AgentMeta::new("r", "i");
        some.attempt = Some(1);
        some.run = Some("w".into());
        let Value::Object(mut meta) = json!({"agent/run_id":"stale","io.example/keep":true}) else {
            unreachable!()
        };
        some.insert_into(&mut meta);
        assert_eq!(
            Value::Object(meta),
            json!({"agent/run_id":"r","agent/instance":"i","agent/attempt":1,"agent/run":"w",
                   "io.example/keep":true})
        );
    }

    #[test]
    fn key_names_match_the_reference() {
        let cases = [
            (keys::RUN_ID, "agent/run_id"),
            (keys::INSTANCE, "agent/instance"),
            (keys::CTX, "agent/ctx"),
            (keys::IDEMPOTENCY_KEY, "agent/idempotency_key"),
            (keys::ATTEMPT, "agent/attempt"),
            (keys::RUN, "agent/run"),
            (keys::ACTING_FOR, "agent/acting_for"),
            (keys::LABELS, "agent/labels"),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }
}
