//! Validates arbitrary JSON as a tool input schema and, when valid, derives the
//! `Mcp-Param-*` headers of arbitrary arguments. The input is `schema 0xFF arguments`.
//! Oracle: nothing panics; every derived header value is visible ASCII or space and decodes
//! back to text.

use mcp_wire::ToolHeaders;
use mcp_wire::header::decode_value;
use serde_json::Value;

/// The `x_mcp_header` target: see the module docs.
pub fn x_mcp_header(data: &[u8]) {
    let (schema, arguments) = match data.iter().position(|&b| b == 0xFF) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok(schema) = serde_json::from_slice::<Value>(schema) else {
        return;
    };
    let Ok(headers) = ToolHeaders::from_value(&schema) else {
        return;
    };
    let arguments = serde_json::from_slice::<Value>(arguments).ok();
    let Ok(derived) = headers.derive(arguments.as_ref().and_then(Value::as_object)) else {
        return;
    };
    for (name, value) in derived {
        assert!(name.starts_with("Mcp-Param-"));
        assert!(
            value.bytes().all(|b| (0x20..=0x7e).contains(&b)),
            "{value:?}"
        );
        decode_value(&value).expect("a derived value decodes");
    }
}
