//! Cross-layer tests for the agentd MCP client.
//!
//! - [`peers`]: the real MCP servers (Python SDK, TypeScript `server-everything`) the
//!   interop tests run against.
//! - [`model`]: a scripted OpenAI-compatible Chat Completions server, the test peer of a
//!   model provider (also the `scripted-model` binary, for process tests).
//!
//! The integration tests live in `tests/`, the benches in `benches/`. The scriptable
//! reference MCP server is the `mcp-reference-server` crate (`tests/reference-server`).

pub mod model;
pub mod peers;
