//! MCP Events (SEP-3415, draft) for MCP clients: the pure parts.
//!
//! - [`binding`]: one binding's machine: refusals, mode, polls and their schedule, intake
//!   into batches committed with their cursor.
//! - [`listing`]: `events/list` paged to the end within its bounds, and listed again.
//! - [`webhook`]: the signing secret of a webhook subscription and the Standard Webhooks
//!   check every delivery passes before its body is used.
//! - [`Dedup`]: the `eventId`s a binding saw recently (35 minutes, at most 4096, by default).
//! - [`occurrence`]: an occurrence checked against the bounds and written once as a Stream
//!   event.
//! - [`store`]: the trait a durable store of cursors, secrets, streams and documents
//!   implements; `sqlite` (feature `sqlite`) is the embedded one.
//! - [`schedule`]: the retry and poll waits, with their jitter.
//! - [`time`]: the RFC 3339 timestamps the wire carries.
//! - [`Limits`]: every bound and schedule the machines keep, chosen by the client (its
//!   `Default` holds the values each field names).
//!
//! Nothing here does IO, reads a clock or draws randomness: time and randomness are passed
//! in. The one exception is behind the `sqlite` feature: `sqlite`, the embedded [`store`]
//! implementation, which opens its database. The wire types are `mcp_wire::events`.

pub mod binding;
mod dedup;
mod error;
mod limits;
pub mod listing;
pub mod occurrence;
pub mod schedule;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod store;
pub mod time;
pub mod webhook;

pub use dedup::Dedup;
pub use error::{Bound, Error};
pub use limits::Limits;
