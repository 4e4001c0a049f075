//! MCP Events' requests: `mcp_events::store::Store`'s methods, on its store.

use std::sync::Arc;

use mcp_events::binding::Batch;
use mcp_events::store::{Entry, Store as _, Stored};

use super::error::Error;
use super::handle::Store;

impl Store {
    /// What is kept of `binding`, if anything.
    pub(crate) fn load(
        &self,
        binding: &str,
    ) -> impl Future<Output = Result<Stored, Error>> + Send + use<> {
        let binding = binding.to_owned();
        self.run(move |db| db.events.load(&binding).map_err(Error::Store))
    }

    /// Keeps `binding`'s webhook secret and subscription id.
    pub(crate) fn save_webhook(
        &self,
        binding: &str,
        secret: &str,
        subscription: Option<&str>,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<> {
        let (binding, secret) = (binding.to_owned(), secret.to_owned());
        let subscription = subscription.map(str::to_owned);
        self.run(move |db| {
            db.events
                .save_webhook(&binding, &secret, subscription.as_deref())
                .map_err(Error::Store)
        })
    }

    /// Appends `batch`'s records to `stream` with `binding`'s cursor, in one transaction
    /// (shared with the other bindings' commits queued with it): how many it appended,
    /// answered once that transaction is committed.
    pub(crate) fn commit(
        &self,
        binding: &str,
        stream: &str,
        batch: Arc<Batch>,
    ) -> impl Future<Output = Result<usize, Error>> + Send + use<> {
        self.commit_batch(binding.to_owned(), stream.to_owned(), batch)
    }

    /// Up to `limit` records of `stream` after position `after`, oldest first.
    pub(crate) fn read(
        &self,
        stream: &str,
        after: i64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Entry>, Error>> + Send + use<> {
        let stream = stream.to_owned();
        self.run(move |db| db.events.read(&stream, after, limit).map_err(Error::Store))
    }

    /// Keeps `value` as the document `name` and appends `records` to `stream`, in one
    /// transaction.
    pub(crate) fn save_document(
        &self,
        name: &str,
        value: &str,
        stream: &str,
        records: Vec<Vec<u8>>,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<> {
        let (name, value, stream) = (name.to_owned(), value.to_owned(), stream.to_owned());
        self.run(move |db| {
            db.events
                .save_document(&name, &value, &stream, &records)
                .map_err(Error::Store)
        })
    }

    /// The document `name`, if one is kept.
    pub(crate) fn load_document(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<String>, Error>> + Send + use<> {
        let name = name.to_owned();
        self.run(move |db| db.events.load_document(&name).map_err(Error::Store))
    }

    /// Forgets `binding` and deletes its records from `stream`.
    pub(crate) fn remove(
        &self,
        binding: &str,
        stream: &str,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<> {
        let (binding, stream) = (binding.to_owned(), stream.to_owned());
        self.run(move |db| db.events.remove(&binding, &stream).map_err(Error::Store))
    }

    /// Forgets `binding`'s cursor, secret and subscription id; its records stay.
    pub(crate) fn forget(
        &self,
        binding: &str,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<> {
        let binding = binding.to_owned();
        self.run(move |db| db.events.forget(&binding).map_err(Error::Store))
    }
}
