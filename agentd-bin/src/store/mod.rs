//! The store's task: one OS thread (`agentd-store`) owns the SQLite connections of
//! `<store.path>/agentd.sqlite3` and answers typed requests, one at a time, in the order they
//! were sent; the daemon holds a [`Store`], a cheap handle whose every method sends its request
//! at once and resolves to the answer. No SQLite call runs on an async thread. MCP Events'
//! commits queued one behind the other, or coming within a short wait, are committed in one
//! transaction and each answered once it is committed ([`handle`]).
//!
//! At open, the thread makes the directory, brings the database's schema to the latest
//! version ([`migrations`]) and opens `mcp_events`' store on it; what fails there is the
//! answer of [`Store::open`]. The thread ends once every handle is dropped, or at
//! [`Store::close`], after finishing the requests sent before.
//!
//! Each concern has its file: MCP Events' requests ([`events`]), the memory ([`memory`]), the
//! artifacts ([`artifacts`]), the plans ([`plans`]), the inboxes ([`inbox`]), the
//! conversations' histories ([`conversations`]), the finished units with the store's numbers
//! ([`units`]), the questions put to people ([`questions`]), the subagents ([`subagents`]),
//! the workflows with their runs ([`workflows`]) and where their event starts stand in their
//! streams ([`starts`]). A request that reads, changes
//! and writes runs
//! in one transaction, and requests are answered one at a time: a compare-and-set, a push, a
//! shift or a pop is atomic, and a version goes up by one per change.

pub(crate) mod artifacts;
pub(crate) mod conversations;
mod db;
mod error;
mod events;
mod handle;
pub(crate) mod inbox;
pub(crate) mod memory;
mod migrations;
pub(crate) mod plans;
pub(crate) mod questions;
pub(crate) mod starts;
pub(crate) mod subagents;
pub(crate) mod units;
pub(crate) mod workflows;

pub(crate) use self::db::{Delivered, Limits};
pub(crate) use self::error::Error;
pub(crate) use self::handle::Store;

/// A store of default limits in a directory of its own, and that directory.
#[cfg(test)]
async fn scratch() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Limits::default()).await.unwrap();
    (dir, store)
}

#[cfg(test)]
pub(crate) use self::handle::FILE;

#[cfg(test)]
mod tests;
