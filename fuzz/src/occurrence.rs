//! Decodes arbitrary webhook bodies and checks the occurrences among them. Oracles: nothing
//! panics; an occurrence that passes the check is within every bound and writes a Stream
//! event that is JSON with the payload verbatim.

use mcp_events::Limits;
use mcp_events::occurrence::{Target, check, stream_event};
use mcp_wire::events::WebhookBody;

const STORE: usize = 4096;

/// The `occurrence` target: see the module docs.
pub fn occurrence(data: &[u8]) {
    let Ok(WebhookBody::Occurrence(o)) = WebhookBody::decode(data) else {
        return;
    };
    let mut limits = Limits::default();
    limits.occurrence_max = STORE;
    if check(&o, &limits).is_err() {
        return;
    }
    assert!(o.event_id.len() <= 1024);
    assert!(serde_json::to_vec(&o).expect("encodes").len() <= STORE);
    let target = Target {
        server: "s",
        event: &o.name,
        stream: "in",
        subscription: "b",
    };
    let mut out = Vec::new();
    stream_event(&target, &o, true, &mut out);
    let v: serde_json::Value = serde_json::from_slice(&out).expect("a stream event is JSON");
    let payload: serde_json::Value = serde_json::from_str(o.data.get()).expect("JSON");
    assert_eq!(v["data"]["payload"], payload);
}
