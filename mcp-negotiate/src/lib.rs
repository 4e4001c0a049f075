//! MCP revision negotiation and the revision-neutral client.
//!
//! - [`Client`] (feature `client`, on by default): one server, negotiated, used the same way
//!   whichever revision it speaks. [`Client::builder`] sets what the client says about itself
//!   and its bounds; [`Dialer`] holds them with the server's HTTP client; [`Watch`] holds
//!   resource subscriptions and list_changed.
//! - [`Negotiation`] and [`listen::Listener`]: the pure machines beneath, built without
//!   hyper, rustls or tokio (`default-features = false`).
#![cfg_attr(feature = "client", doc = "")]
#![cfg_attr(feature = "client", doc = include_str!("../README.md"))]

/// The MCP types this crate speaks in (`mcp-wire`), for a user that depends on this crate
/// alone: `mcp_negotiate::wire::Root`, `mcp_negotiate::wire::ElicitResult`.
pub use mcp_wire as wire;

/// The transport beneath the client (`mcp-transport`): its `Config`, `Elicitor` and
/// `Notice`.
#[cfg(feature = "client")]
pub use mcp_transport as transport;

#[cfg(feature = "client")]
mod builder;
#[cfg(feature = "client")]
mod client;
#[cfg(feature = "client")]
mod dial;
mod ids;
pub mod listen;
mod negotiation;
#[cfg(feature = "client")]
mod watch;

#[cfg(feature = "client")]
pub use builder::{ClientBuilder, DEFAULT_ELICITATION_TIMEOUT};
#[cfg(feature = "client")]
pub use client::{Catalog, Client, DroppedTool, Error, MAX_INPUT_ROUNDS};
#[cfg(feature = "client")]
pub use dial::{Dialed, Dialer, Link, Recovery};
pub use negotiation::{Connected, Failed, Negotiation, Progress, Refusal, Reply, Start, Step};
#[cfg(feature = "client")]
pub use watch::{Change, Watch};
