//! Streamable HTTP transport for MCP clients (both the 2025-11-25 and the 2026-07-28 revision).
//!
//! This crate is not implemented yet and exports nothing. It will hold the incremental SSE
//! decoder, the response classifier, the legacy session state machine and a hyper 1.x driver,
//! built on [`mcp_wire`].
