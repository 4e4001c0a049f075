//! Streamable HTTP transport for MCP clients, for both the 2025-11-25 and the 2026-07-28
//! revision.
//!
//! The protocol logic is pure and does no IO; time comes in as an argument:
//!
//! - [`sse`]: an incremental `text/event-stream` decoder, bounded per event;
//! - [`reply`]: what an HTTP answer to a POST means (a message, a stream, accepted, or a
//!   failure that keeps the status, a JSON-RPC error body and `WWW-Authenticate`);
//! - [`session`]: the legacy session (`Mcp-Session-Id`, the protocol version header, a 404
//!   that loses it) and the resumption of a legacy stream (`Last-Event-ID` after `retry`);
//! - [`headers`]: the headers the client sets itself, and the check that keeps configuration
//!   from setting them.
//!
//! The [`driver`] (feature `hyper`, on by default) moves the bytes with hyper 1.x.

#[cfg(feature = "hyper")]
pub mod driver;
mod error;
pub mod headers;
pub mod reply;
pub mod session;
pub mod sse;

pub use error::Error;

/// The README's example, compiled as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(all(doctest, feature = "hyper"))]
pub struct ReadmeDoctests;
