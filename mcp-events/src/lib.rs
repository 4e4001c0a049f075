#![doc = include_str!("../README.md")]

pub mod binding;
mod dedup;
mod error;
pub mod group;
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
