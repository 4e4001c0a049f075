//! The `_meta` of a turn's MCP calls (the reference's "Request metadata"): `agent/run_id`
//! (the turn's), `agent/instance`, `traceparent` (a W3C trace per turn, a span per call),
//! `agent/ctx` (the conversation and the turn) and `agent/idempotency_key` (one per tool call
//! the model makes). The random bytes are handed in. The keys every unit of work's calls
//! share are built by [`AgentMeta::for_work`], for a turn's calls, a workflow step's and the
//! supervisor's tool registry's alike.

use agentd_tools::AgentMeta;
use serde_json::json;

/// What identifies one turn on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TurnIds {
    /// `agent/run_id`: 32 hex digits.
    pub(crate) run_id: String,
    /// The W3C trace id of the turn.
    trace: [u8; 16],
}

impl TurnIds {
    /// The ids of a turn whose run id is `run` and trace id `trace`, both random. A trace id
    /// of zeros (invalid in W3C trace context) ends in 1 instead.
    pub(crate) fn new(run: [u8; 16], mut trace: [u8; 16]) -> Self {
        if trace == [0; 16] {
            trace[15] = 1;
        }
        Self {
            run_id: hex(&run),
            trace,
        }
    }

    /// The `traceparent` of a call whose span id is `span` (random; zeros end in 1):
    /// `00-<trace id>-<span id>-01`, sampled.
    pub(crate) fn traceparent(&self, span: [u8; 8]) -> String {
        traceparent(&hex(&self.trace), span)
    }

    /// The idempotency key of call `index` (from 0) of the model's reply `round` (from 1) in
    /// the turn: `<run id>:<round>:<index>`, one per call the model makes whatever ids it
    /// gives them (some models give every reply's calls the same ids).
    pub(crate) fn idempotency_key(&self, round: u32, index: usize) -> String {
        format!("{}:{round}:{index}", self.run_id)
    }
}

/// Where in the agent a call is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place<'a> {
    /// The instance.
    pub(crate) instance: &'a str,
    /// The conversation.
    pub(crate) conversation: &'a str,
    /// The turn, from 1.
    pub(crate) turn: u64,
}

/// The `_meta` of the `index`th call of the `round`th reply of a turn, whose span id is
/// `span`.
pub(crate) fn call_meta(
    place: Place<'_>,
    ids: &TurnIds,
    round: u32,
    index: usize,
    span: [u8; 8],
) -> AgentMeta {
    let traceparent = Some(ids.traceparent(span));
    let key = ids.idempotency_key(round, index);
    let mut meta = AgentMeta::for_work(&ids.run_id, place.instance, traceparent, key);
    meta.ctx = Some(json!({"conversation": place.conversation, "turn": place.turn}));
    meta
}

/// The `traceparent` of a span `span` (random; zeros end in 1) of the trace `trace` (32
/// lowercase hex digits, not all zeros): `00-<trace id>-<span id>-01`, sampled.
pub(crate) fn traceparent(trace: &str, mut span: [u8; 8]) -> String {
    if span == [0; 8] {
        span[7] = 1;
    }
    format!("00-{trace}-{}-01", hex(&span))
}

/// The `traceparent` of span `span` of a workflow run's calls, when the run's id is a trace
/// id (32 lowercase hex digits, not all zeros): the run is the trace of its calls.
pub(crate) fn run_traceparent(run: &str, span: [u8; 8]) -> Option<String> {
    let trace = run.len() == 32
        && run
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        && run.bytes().any(|b| b != b'0');
    trace.then(|| traceparent(run, span))
}

/// `bytes` as lowercase hex digits.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn a_call_carries_every_key_of_a_turn() {
        let ids = TurnIds::new(
            [0xab; 16],
            *b"\x0a\xf7\x65\x19\x16\xcd\x43\xdd\x84\x48\xeb\x21\x1c\x80\x31\x9c",
        );
        assert_eq!(ids.run_id, "ab".repeat(16));
        let place = Place {
            instance: "my-agent",
            conversation: "root",
            turn: 3,
        };
        let meta = call_meta(place, &ids, 2, 1, *b"\xb7\xad\x6b\x71\x69\x20\x33\x31");
        assert_eq!(
            Value::Object(meta.to_meta()),
            json!({
                "agent/run_id": "ab".repeat(16),
                "agent/instance": "my-agent",
                "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                "agent/ctx": {"conversation": "root", "turn": 3},
                "agent/idempotency_key": format!("{}:2:1", "ab".repeat(16)),
            })
        );
    }

    #[test]
    fn zeros_are_no_trace() {
        let ids = TurnIds::new([0; 16], [0; 16]);
        assert_eq!(
            ids.traceparent([0; 8]),
            "00-00000000000000000000000000000001-0000000000000001-01"
        );
        // One key per call of the turn.
        let keys = [(1, 0), (1, 1), (2, 0)].map(|(r, i)| ids.idempotency_key(r, i));
        assert!(keys[0] != keys[1] && keys[1] != keys[2] && keys[0] != keys[2]);
        assert_eq!(keys[2], ids.idempotency_key(2, 0), "stable");
    }
}
