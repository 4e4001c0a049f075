//! The hyper 1.x driver: moves bytes between the pure parts and the network.
//!
//! One [`HttpClient`] per server holds a pool of connections (HTTP/1.1, or HTTP/2 when TLS
//! negotiates it by ALPN), with `TCP_NODELAY` set so that small requests are not held back
//! by Nagle's algorithm. TLS goes through rustls with Mozilla's roots, bundled. Bodies are
//! streamed, and bounded where they are read whole.
//!
//! [`LegacyTransport`] speaks 2025-11-25 and older, [`ModernTransport`] 2026-07-28; both
//! return a [`Call`] per request.

mod call;
mod client;
mod features;
mod legacy;
mod modern;

pub use call::{Call, Delivery, Notice};
pub use client::{Config, HttpClient};
pub use features::{Answer, ClientFeatures, Elicitor, Unserved};
pub use legacy::{LegacyTransport, Posted};
pub use modern::{ModernTransport, Routing, ToolRoute};
