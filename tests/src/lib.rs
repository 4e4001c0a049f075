//! Cross-layer tests for the agentd MCP client.
//!
//! This crate will hold the scriptable reference MCP server, the integration and interop tests
//! against real peers, and the side-by-side benchmarks. It holds nothing yet.
