//! Where bindings keep what must outlive the process: each binding's cursor, webhook secret
//! and subscription id, the streams its occurrences are appended to, and documents of the
//! client's own (named JSON values, written together with records of a stream).
//!
//! The one rule a store keeps: [`Store::commit`] appends a batch's records and stores its
//! cursor in one transaction, and never appends a record whose id its stream already holds.
//! After a crash, nothing acknowledged is lost and nothing is appended twice.

use std::fmt;

use crate::binding::Batch;

/// What a store keeps of one binding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stored {
    /// The cursor to go on from.
    pub cursor: Option<String>,
    /// The webhook secret (`whsec_…`), once one was made.
    pub secret: Option<String>,
    /// The webhook subscription's id, once armed.
    pub subscription: Option<String>,
}

/// One record of a stream, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its position in the store (increasing).
    pub seq: i64,
    /// The Stream event, JSON.
    pub bytes: Vec<u8>,
}

/// A store failed; the binding pauses (`store_degraded`) and tries again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError(pub String);

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "store: {}", self.0)
    }
}

impl std::error::Error for StoreError {}

/// Durable state of bindings and their streams.
pub trait Store: Send {
    /// What is kept of `binding`, if anything.
    fn load(&mut self, binding: &str) -> Result<Stored, StoreError>;

    /// Keeps `binding`'s webhook secret and subscription id (the cursor is untouched).
    fn save_webhook(
        &mut self,
        binding: &str,
        secret: &str,
        subscription: Option<&str>,
    ) -> Result<(), StoreError>;

    /// In one transaction: appends `batch`'s records to `stream`, passing over any whose id
    /// the stream holds already, and stores `batch.cursor` as `binding`'s cursor. The number
    /// of records appended.
    fn commit(&mut self, binding: &str, stream: &str, batch: &Batch) -> Result<usize, StoreError>;

    /// Up to `limit` records of `stream` after position `after`, oldest first.
    fn read(&mut self, stream: &str, after: i64, limit: usize) -> Result<Vec<Entry>, StoreError>;

    /// In one transaction: keeps `value` as the document `name` (in place of what it held)
    /// and appends `records` to `stream`, each as a record of its own (such as the records
    /// of the changes the document holds).
    fn save_document(
        &mut self,
        name: &str,
        value: &str,
        stream: &str,
        records: &[Vec<u8>],
    ) -> Result<(), StoreError>;

    /// The document `name`, if one is kept.
    fn load_document(&mut self, name: &str) -> Result<Option<String>, StoreError>;

    /// Forgets `binding` and deletes its records from `stream` (a binding removed).
    fn remove(&mut self, binding: &str, stream: &str) -> Result<(), StoreError>;

    /// Forgets `binding`'s cursor, secret and subscription id; its records stay in their
    /// stream (a binding ended, its records kept).
    fn forget(&mut self, binding: &str) -> Result<(), StoreError>;
}
