//! MCP revision negotiation and the revision-neutral connection.
//!
//! This crate is not implemented yet and exports nothing. It will hold the negotiation state
//! machine (`server/discover` first, `initialize` as the fallback) and the connection built on it.
