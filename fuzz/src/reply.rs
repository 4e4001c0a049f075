//! Classifies arbitrary HTTP answers: a status and a content type from the first bytes, the
//! rest as the body. Oracle: nothing panics, and a 401 always keeps its `WWW-Authenticate`.

use mcp_transport::reply::{Answer, Failure, Head, Limits};

const TYPES: [Option<&str>; 5] = [
    None,
    Some("application/json"),
    Some("text/event-stream; charset=utf-8"),
    Some("text/plain"),
    Some("APPLICATION/JSON ;x=y"),
];

/// The `reply` target: see the module docs.
pub fn reply(data: &[u8]) {
    let [a, b, c, body @ ..] = data else {
        return;
    };
    let status = 100 + u16::from_le_bytes([*a, *b]) % 500;
    let content_type = TYPES[usize::from(*c) % TYPES.len()];
    let mut limits = Limits::default();
    limits.json_body = 256;
    limits.error_body = 128;
    let Ok(head) = Head::of(status, content_type, &limits) else {
        return;
    };
    match head.answer(body, Some("Bearer realm=\"x\"")) {
        Answer::Failure(Failure::Status {
            status: 401,
            www_authenticate,
        }) => {
            assert!(www_authenticate.is_some());
        }
        Answer::Message { status: 401, .. } => panic!("a 401 is never an MCP message"),
        _ => {}
    }
}
