//! Header value encoding. Oracle: for any text, `encode_value` gives visible ASCII (and inner
//! spaces) that `decode_value` turns back into the same text; `decode_value` never panics on
//! arbitrary input.

use mcp_wire::header::{decode_value, encode_value};

/// The `header_value` target: see the module docs.
pub fn header_value(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = decode_value(text);
    let encoded = encode_value(text);
    assert!(encoded.bytes().all(|b| (0x20..=0x7e).contains(&b)));
    assert!(!encoded.starts_with(' ') && !encoded.ends_with(' '));
    assert_eq!(decode_value(&encoded).expect("encoded values decode"), text);
}
