//! What a request runs on, on the store's thread: the connections and the bounds, and the
//! rules every table keeps (lengths, sizes, counts as SQLite keeps them).

use mcp_events::sqlite::Sqlite;
use rusqlite::Connection;
use tokio::sync::broadcast;

use super::error::Error;
use crate::config::Config;

/// The bounds the store enforces that come from the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The most bytes of a memory value (its compact JSON, also the array after a push) and
    /// of a message's text: `store.max_value_bytes`, 262144 unless configured.
    pub(crate) max_value_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_value_bytes: crate::config::MAX_VALUE_BYTES,
        }
    }
}

impl From<&Config> for Limits {
    fn from(config: &Config) -> Self {
        Self {
            max_value_bytes: config.max_value_bytes,
        }
    }
}

/// A message appended to an inbox ([`Store::message_send`](super::Store::message_send)), told
/// once it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Delivered {
    /// The conversation.
    pub(crate) conversation: String,
    /// The message's id in its inbox.
    pub(crate) id: u64,
}

/// What the store's thread holds: `mcp_events`' store and a connection of its own to the
/// same file, for the other tables.
pub(super) struct Db {
    pub(super) events: Sqlite,
    pub(super) sql: Connection,
    pub(super) limits: Limits,
    /// Where a message appended to an inbox is told.
    pub(super) delivered: broadcast::Sender<Delivered>,
}

/// A count or a version as SQLite keeps it (an `INTEGER`, signed).
pub(super) fn to_sql(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A count or a version kept as an SQLite `INTEGER` (never negative).
pub(super) fn from_sql(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// `Invalid` unless `text` is `min..=max` bytes.
pub(super) fn check_len(pointer: &str, text: &str, min: usize, max: usize) -> Result<(), Error> {
    if (min..=max).contains(&text.len()) {
        Ok(())
    } else {
        Err(Error::invalid(
            pointer,
            format!("{min}..={max} bytes, not {}", text.len()),
        ))
    }
}

/// `TooLarge` when `bytes` is past `limit`.
pub(super) fn check_size(what: &'static str, bytes: usize, limit: usize) -> Result<(), Error> {
    if bytes > limit {
        return Err(Error::TooLarge { what, bytes, limit });
    }
    Ok(())
}
