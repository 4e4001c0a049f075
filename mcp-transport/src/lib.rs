//! Streamable HTTP transport for MCP clients: SSE decoding, sessions, resumption, and (feature
//! `hyper`, on by default) a hyper 1.x driver.
#![cfg_attr(feature = "hyper", doc = "")]
#![cfg_attr(feature = "hyper", doc = include_str!("../README.md"))]

#[cfg(feature = "hyper")]
pub mod driver;
mod error;
pub mod headers;
pub mod reply;
pub mod session;
pub mod sse;

pub use error::Error;
