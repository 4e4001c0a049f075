//! MCP revision negotiation and the revision-neutral connection.
//!
//! - [`Negotiation`]: the pure machine that decides, answer by answer, how a connection is
//!   opened: `server/discover` first, `initialize` as the fallback, and every refusal named.
//! - [`Dialer`]: drives it over `mcp-transport`, with what each kind of connection says
//!   about itself (the supervisor's, or a turn worker's or subagent's), and hands back the
//!   negotiated [`Link`].
//! - [`Connection`]: the revision-neutral connection: listing to the end, calls with their
//!   `_meta` and routing headers, `input_required` rounds, reads, prompts, completions, and a
//!   cancellation, and a re-dial when a legacy session is lost.
//! - [`listen`]: the pure machine of a 2026-07-28 connection's `subscriptions/listen`
//!   (filter changes, acknowledgment, idle and ended listens, refusals).
//! - [`Watch`]: resource subscriptions and list_changed over a connection: the listen on
//!   2026-07-28, the GET stream and `resources/subscribe` on 2025-11-25.

mod connection;
mod dial;
pub mod listen;
mod negotiation;
mod watch;

pub use connection::{Catalog, Connection, DroppedTool, Error, MAX_INPUT_ROUNDS};
pub use dial::{CHILD_TIMEOUT, Dialed, Dialer, ELICITATION_TIMEOUT, Kind, Link, Recovery};
pub use negotiation::{Connected, Failed, Negotiation, Progress, Refusal, Reply, Start, Step};
pub use watch::{Change, Watch};
