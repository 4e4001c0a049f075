//! MCP revision negotiation and the revision-neutral connection.
//!
//! - [`Negotiation`]: the pure machine that decides, answer by answer, how a connection is
//!   opened: `server/discover` first, `initialize` as the fallback, and every refusal named.
//!
//! - [`Dialer`]: drives it over `mcp-transport`, with what each kind of connection says
//!   about itself (the supervisor's, or a turn worker's or subagent's), and hands back the
//!   negotiated [`Link`].
//!
//! The revision-neutral connection built on it (listing, calls, subscriptions, re-dials) is
//! not built yet.

mod dial;
mod negotiation;

pub use dial::{CHILD_TIMEOUT, Dialed, Dialer, Kind, Link};
pub use negotiation::{Connected, Failed, Negotiation, Progress, Refusal, Reply, Start, Step};
