//! The inboxes: each conversation's durable messages, numbered from 1 in each conversation (a
//! message's id: its place in the inbox, never reused, as nothing is taken out of an inbox),
//! each with its sender's unit and the time it was sent. The id is kept in the message's row
//! and indexed: a read goes from an id on (`id > after`), whatever the inbox's length. Each
//! message appended is told to the store's listeners once written ([`Store::delivered`]): the
//! agent starts turns on them.

use rusqlite::{Connection, params};

use super::db::{Db, Delivered, check_len, check_size, from_sql, to_sql};
use super::error::Error;
use super::handle::Store;

// The tool's bound, kept here too: the store takes nothing past it.
pub(crate) use agentd_tools::message::CONVERSATION_MAX;

/// A message of an inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Message {
    /// Its id: its place in its conversation's inbox, from 1.
    pub(crate) id: u64,
    /// The conversation it was sent to.
    pub(crate) conversation: String,
    /// Its sender's unit.
    pub(crate) sender: String,
    /// Its text.
    pub(crate) text: String,
    /// When it was sent, in Unix milliseconds.
    pub(crate) at_ms: i64,
}

/// Appends `text` from `sender` at `at_ms` to `conversation`'s inbox over `sql` (inside the
/// caller's transaction, if it has one), its text at most `max` bytes: the message's id. The
/// caller tells it once written.
pub(super) fn append(
    sql: &Connection,
    max: usize,
    conversation: &str,
    sender: &str,
    text: &str,
    at_ms: i64,
) -> Result<u64, Error> {
    check_len("/conversation", conversation, 1, CONVERSATION_MAX)?;
    if text.is_empty() {
        return Err(Error::invalid("/text", "at least 1 byte"));
    }
    check_size("text", text.len(), max)?;
    // One statement: the id is the one after the conversation's last, found by its index.
    let id: i64 = sql
        .prepare_cached(
            "INSERT INTO inboxes (conversation, id, sender, text, at)
             SELECT ?1, coalesce(max(id), 0) + 1, ?2, ?3, ?4
             FROM inboxes WHERE conversation = ?1 RETURNING id",
        )?
        .query_row(params![conversation, sender, text, at_ms], |r| r.get(0))?;
    Ok(from_sql(id))
}

impl Db {
    fn message_send(
        &mut self,
        conversation: &str,
        sender: &str,
        text: &str,
        at_ms: i64,
    ) -> Result<u64, Error> {
        let max = self.limits.max_value_bytes;
        let id = append(&self.sql, max, conversation, sender, text, at_ms)?;
        self.told(conversation, id);
        Ok(id)
    }

    /// Tells message `id` of `conversation`, written.
    pub(super) fn told(&self, conversation: &str, id: u64) {
        // Nobody may listen.
        let _ = self.delivered.send(Delivered {
            conversation: conversation.to_owned(),
            id,
        });
    }

    fn messages(
        &mut self,
        conversation: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Message>, Error> {
        let mut query = self.sql.prepare_cached(
            "SELECT id, sender, text, at FROM inboxes WHERE conversation = ?1 AND id > ?2
             ORDER BY id LIMIT ?3",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = query.query_map(params![conversation, to_sql(after), limit], |r| {
            Ok(Message {
                id: from_sql(r.get(0)?),
                conversation: conversation.to_owned(),
                sender: r.get(1)?,
                text: r.get(2)?,
                at_ms: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

impl Store {
    /// `message.send`: appends `text` (1 byte..=`store.max_value_bytes`) from the unit
    /// `sender` at `at_ms` (Unix milliseconds) to `conversation`'s inbox (an id of 1..=128
    /// bytes); the message's id, its place in that inbox.
    pub(crate) fn message_send(
        &self,
        conversation: &str,
        sender: &str,
        text: &str,
        at_ms: i64,
    ) -> impl Future<Output = Result<u64, Error>> + Send + use<> {
        let (conversation, sender, text) =
            (conversation.to_owned(), sender.to_owned(), text.to_owned());
        self.run(move |db| db.message_send(&conversation, &sender, &text, at_ms))
    }

    /// Up to `limit` messages of `conversation`'s inbox with an id past `after`, oldest first.
    pub(crate) fn messages(
        &self,
        conversation: &str,
        after: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Message>, Error>> + Send + use<> {
        let conversation = conversation.to_owned();
        self.run(move |db| db.messages(&conversation, after, limit))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Limits, scratch};
    use super::*;

    #[tokio::test]
    async fn send_and_read() {
        let (_dir, store) = scratch().await;
        let mut delivered = store.delivered();
        let one = store.message_send("c1", "operator", "hi", 5).await.unwrap();
        let two = store.message_send("c2", "run:r", "other", 6).await.unwrap();
        let three = store
            .message_send("c1", "subagent:s", "again", 7)
            .await
            .unwrap();
        assert_eq!((one, two, three), (1, 1, 2), "ids count in each inbox");
        let told: Vec<(String, u64)> = (0..3)
            .map(|_| delivered.try_recv().unwrap())
            .map(|d| (d.conversation, d.id))
            .collect();
        assert_eq!(told, [("c1".into(), 1), ("c2".into(), 1), ("c1".into(), 2)]);
        let inbox = store.messages("c1", 0, 10).await.unwrap();
        let got: Vec<_> = inbox
            .iter()
            .map(|m| (m.id, m.sender.as_str(), m.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [(one, "operator", "hi"), (three, "subagent:s", "again")]
        );
        assert!(inbox.iter().all(|m| m.conversation == "c1"));
        assert_eq!(inbox.iter().map(|m| m.at_ms).collect::<Vec<_>>(), [5, 7]);
        let after = store.messages("c1", one, 10).await.unwrap();
        assert_eq!(after.iter().map(|m| m.id).collect::<Vec<_>>(), [three]);
        assert_eq!(store.messages("c1", 0, 1).await.unwrap().len(), 1);
        assert!(store.messages("c3", 0, 10).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn conversations_and_texts_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits {
            max_value_bytes: 1024,
        };
        let store = Store::open(dir.path(), limits).await.unwrap();
        let at = "c".repeat(CONVERSATION_MAX);
        store.message_send(&at, "u", "x", 1).await.unwrap();
        let past = "c".repeat(CONVERSATION_MAX + 1);
        for bad in [past.as_str(), ""] {
            let e = store.message_send(bad, "u", "x", 1).await.unwrap_err();
            assert!(
                matches!(&e, Error::Invalid { pointer, .. } if pointer == "/conversation"),
                "{e:?}"
            );
        }
        let mut delivered = store.delivered();
        let e = store.message_send("c", "u", "", 1).await.unwrap_err();
        assert!(
            matches!(&e, Error::Invalid { pointer, .. } if pointer == "/text"),
            "{e:?}"
        );
        store
            .message_send("c", "u", &"t".repeat(1024), 1)
            .await
            .unwrap();
        let e = store
            .message_send("c", "u", &"t".repeat(1025), 1)
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::TooLarge {
                    what: "text",
                    bytes: 1025,
                    limit: 1024
                }
            ),
            "{e:?}"
        );
        assert_eq!(store.messages("c", 0, 10).await.unwrap().len(), 1);
        // Only what was written is told.
        assert_eq!(delivered.try_recv().unwrap().id, 1);
        assert!(delivered.try_recv().is_err());
    }
}
