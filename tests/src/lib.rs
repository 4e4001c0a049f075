//! Cross-layer tests for the agentd MCP client.
//!
//! - [`reference`]: the scriptable reference MCP server every layer tests against.
//!
//! The integration tests live in `tests/`, the benches in `benches/`.

pub mod peers;
pub mod reference;
