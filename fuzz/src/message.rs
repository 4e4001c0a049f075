//! Decodes arbitrary bytes as a JSON-RPC message. Oracle: nothing panics, and whatever
//! decodes re-encodes to bytes that decode to the same message and encode to the same bytes.

use mcp_wire::{Outcome, ServerNotification, decode, decode_response};

/// The `message` target: see the module docs.
pub fn message(data: &[u8]) {
    let _ = decode_response::<Outcome<mcp_wire::CallToolResult>>(data, 1 << 20);
    let Ok(message) = decode(data, 1 << 20) else {
        return;
    };
    if let mcp_wire::Message::Notification(n) = &message {
        let _ = ServerNotification::decode(n);
    }
    let mut first = Vec::new();
    message
        .encode(&mut first)
        .expect("a decoded message encodes");
    let again = decode(&first, usize::MAX).expect("an encoded message decodes");
    assert_eq!(again, message);
    let mut second = Vec::new();
    again
        .encode(&mut second)
        .expect("a decoded message encodes");
    assert_eq!(first, second);
}
