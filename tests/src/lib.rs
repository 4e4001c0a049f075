//! Cross-layer tests for the agentd MCP client.
//!
//! - [`peers`]: the real MCP servers (Python SDK, TypeScript `server-everything`) the
//!   interop tests run against.
//! - [`model`]: a scripted OpenAI-compatible Chat Completions server, the test peer of a
//!   model provider (also the `scripted-model` binary, for process tests).
//! - [`faults`]: a fault-injecting TCP proxy, put between a client and a server: per
//!   connection resets, stalls, bodies cut half-way, slow bytes, closes, and refusals.
//!
//! The integration tests live in `tests/`, the benches in `benches/`. The scriptable
//! reference MCP server is the `mcp-reference-server` crate (`tests/reference-server`).

pub mod faults;
pub mod model;
pub mod peers;
