//! MCP Events (SEP-3415, draft) for MCP clients.
//!
//! This crate is not implemented yet and exports nothing. It will hold the binding state machine
//! (poll and webhook), the Standard Webhooks verifier, deduplication and cursor handling.
