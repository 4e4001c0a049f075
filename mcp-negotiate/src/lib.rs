//! MCP revision negotiation and the revision-neutral client.
//!
//! - [`Client`] (feature `client`, on by default): one server, negotiated, used the same way
//!   whichever revision it speaks: listing to the end, calls with their `_meta` and routing
//!   headers, `input_required` rounds, reads, prompts, completions, cancellation, and a
//!   re-dial when a legacy session is lost. [`Client::builder`] sets what the client says
//!   about itself (`clientInfo`, the features it declares) and its bounds.
//! - [`Dialer`]: the negotiation driven over `mcp-transport`, handing back the negotiated
//!   [`Link`]; one per server, cheap to clone, dialing as often as asked.
//! - [`Watch`]: resource subscriptions and list_changed over a client: the listen on
//!   2026-07-28, the GET stream and `resources/subscribe` on 2025-11-25.
//! - [`Negotiation`] and [`listen::Listener`]: the pure machines beneath, built without
//!   hyper, rustls or tokio (`default-features = false`).
//!
//! The client emits `tracing` events at debug level (the dial and each negotiation step,
//! a re-dial, a dropped tool); a subscriber shows what it did.

#[cfg(feature = "client")]
mod builder;
#[cfg(feature = "client")]
mod client;
#[cfg(feature = "client")]
mod dial;
pub mod listen;
mod negotiation;
#[cfg(feature = "client")]
mod watch;

#[cfg(feature = "client")]
pub use builder::{ClientBuilder, ELICITATION_TIMEOUT};
#[cfg(feature = "client")]
pub use client::{Catalog, Client, DroppedTool, Error, MAX_INPUT_ROUNDS};
#[cfg(feature = "client")]
pub use dial::{Dialed, Dialer, Link, Recovery};
pub use negotiation::{Connected, Failed, Negotiation, Progress, Refusal, Reply, Start, Step};
#[cfg(feature = "client")]
pub use watch::{Change, Watch};
