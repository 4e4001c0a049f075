//! The inboxes: each conversation's durable messages, numbered by one sequence across all of
//! them (a message's id), each with its sender's unit and the time it was sent.

use rusqlite::params;

use super::{Db, Error, Store, check_len, check_size, from_sql, to_sql};
use crate::clock;

/// The most bytes of a conversation's id.
pub(crate) const CONVERSATION_MAX: usize = 128;

/// A message of an inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Message {
    /// Its id: its place in the sequence of every inbox's messages.
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

impl Db {
    fn message_send(&mut self, conversation: &str, sender: &str, text: &str) -> Result<u64, Error> {
        check_len("/conversation", conversation, 1, CONVERSATION_MAX)?;
        if text.is_empty() {
            return Err(Error::invalid("/text", "at least 1 byte"));
        }
        check_size("text", text.len(), self.limits.max_value_bytes)?;
        self.sql
            .prepare_cached(
                "INSERT INTO inboxes (conversation, sender, text, at) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![conversation, sender, text, clock::wall_ms()])?;
        Ok(from_sql(self.sql.last_insert_rowid()))
    }

    fn messages(
        &mut self,
        conversation: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Message>, Error> {
        let mut query = self.sql.prepare_cached(
            "SELECT seq, sender, text, at FROM inboxes WHERE conversation = ?1 AND seq > ?2
             ORDER BY seq LIMIT ?3",
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
    /// `sender` to `conversation`'s inbox (an id of 1..=128 bytes); the message's id.
    pub(crate) fn message_send(
        &self,
        conversation: &str,
        sender: &str,
        text: &str,
    ) -> impl Future<Output = Result<u64, Error>> + Send + use<> {
        let (conversation, sender, text) =
            (conversation.to_owned(), sender.to_owned(), text.to_owned());
        self.run(move |db| db.message_send(&conversation, &sender, &text))
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
        let one = store.message_send("c1", "operator", "hi").await.unwrap();
        let two = store.message_send("c2", "run:r", "other").await.unwrap();
        let three = store
            .message_send("c1", "subagent:s", "again")
            .await
            .unwrap();
        assert!(one < two && two < three);
        let inbox = store.messages("c1", 0, 10).await.unwrap();
        let got: Vec<_> = inbox
            .iter()
            .map(|m| (m.id, m.sender.as_str(), m.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [(one, "operator", "hi"), (three, "subagent:s", "again")]
        );
        assert!(inbox.iter().all(|m| m.conversation == "c1" && m.at_ms > 0));
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
        store.message_send(&at, "u", "x").await.unwrap();
        let past = "c".repeat(CONVERSATION_MAX + 1);
        for bad in [past.as_str(), ""] {
            let e = store.message_send(bad, "u", "x").await.unwrap_err();
            assert!(
                matches!(&e, Error::Invalid { pointer, .. } if pointer == "/conversation"),
                "{e:?}"
            );
        }
        let e = store.message_send("c", "u", "").await.unwrap_err();
        assert!(
            matches!(&e, Error::Invalid { pointer, .. } if pointer == "/text"),
            "{e:?}"
        );
        store
            .message_send("c", "u", &"t".repeat(1024))
            .await
            .unwrap();
        let e = store
            .message_send("c", "u", &"t".repeat(1025))
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
    }
}
