//! The conversations: each one's history (the messages its turns showed the model and got
//! back, in order, each with its turn and the time), how many turns it had, how far into its
//! inbox its turns have read, the tokens its model calls used, and the summary that replaces its
//! first messages in its context (`context.compact`; the history keeps them all). The
//! instance's tokens are its conversations' together.
//!
//! A conversation is made by the start of its first turn ([`Store::turn_start`]), which
//! takes the messages of its inbox up to one id: the turn's number, the inbox read up to
//! that id and the turn's first messages are written in one transaction, so that a message
//! is taken into exactly one turn. The store keeps each message as the JSON its caller makes
//! of it (the agent's `Message`), and reads it back as the caller's type.
//!
//! A conversation's unit of work (`conversation:<id>`, as [`Caller::unit`] names it; a
//! subagent's conversation's is the subagent's, `subagent:<id>`) is its turn under way:
//! `finish` ends that turn, and the start of the next opens the unit again (its finish record
//! is cleared, in the same transaction), so that every turn may finish.

use agentd_tools::status::Budget;
use agentd_tools::{Caller, subagent};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::db::{Db, check_len, check_size, from_sql, to_sql};
use super::error::Error;
use super::handle::Store;
use super::inbox::CONVERSATION_MAX;

/// The most bytes of one message of a history, as JSON.
pub(crate) const MESSAGE_MAX: usize = 8 * 1024 * 1024;

/// The most messages one read of a history answers.
pub(crate) const PAGE_MAX: usize = 1000;

/// A conversation as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Conversation {
    /// Its id.
    pub(crate) id: String,
    /// How many turns it has started.
    pub(crate) turns: u64,
    /// The id of the last message of its inbox its turns took.
    pub(crate) taken: u64,
    /// The tokens its model calls used, read and written.
    pub(crate) tokens: u64,
    /// How many of its first messages the summary replaces in its context.
    pub(crate) summarized: u64,
    /// The summary, if one was written.
    pub(crate) summary: Option<String>,
}

/// One message of a history.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry<M> {
    /// Its place in the history, from 1.
    pub(crate) seq: u64,
    /// The turn it was part of, from 1.
    pub(crate) turn: u64,
    /// When it was written, in Unix milliseconds.
    pub(crate) at_ms: i64,
    /// The message.
    pub(crate) message: M,
}

/// `message` as the JSON kept, unless it is past [`MESSAGE_MAX`].
fn serialize<M: Serialize>(message: &M) -> Result<String, Error> {
    let text = serde_json::to_string(message).map_err(Error::Corrupt)?;
    check_size("message", text.len(), MESSAGE_MAX)?;
    Ok(text)
}

/// `id`'s row, if it has one.
fn row(db: &Connection, id: &str) -> Result<Option<Conversation>, Error> {
    Ok(db
        .prepare_cached(
            "SELECT turns, taken, tokens, summarized, summary FROM conversations WHERE id = ?1",
        )?
        .query_row(params![id], |r| {
            Ok(Conversation {
                id: id.to_owned(),
                turns: from_sql(r.get(0)?),
                taken: from_sql(r.get(1)?),
                tokens: from_sql(r.get(2)?),
                summarized: from_sql(r.get(3)?),
                summary: r.get(4)?,
            })
        })
        .optional()?)
}

/// Appends `texts` to `id`'s history as part of `turn`: the place of the last.
fn append(
    db: &Connection,
    id: &str,
    turn: u64,
    texts: &[String],
    at_ms: i64,
) -> Result<u64, Error> {
    let last: i64 = db
        .prepare_cached(
            "SELECT coalesce(max(seq), 0) FROM conversation_messages WHERE conversation = ?1",
        )?
        .query_row(params![id], |r| r.get(0))?;
    let mut seq = from_sql(last);
    let mut insert = db.prepare_cached(
        "INSERT INTO conversation_messages (conversation, seq, turn, message, at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for text in texts {
        seq += 1;
        insert.execute(params![id, to_sql(seq), to_sql(turn), text, at_ms])?;
    }
    Ok(seq)
}

/// The unit of work whose turns conversation `id`'s are: its subagent's, or its own.
fn unit(id: &str) -> String {
    let caller = match subagent::of_conversation(id) {
        Some(subagent) => Caller::subagent(subagent),
        None => Caller::root(id),
    };
    caller.unit()
}

impl Db {
    fn turn_start(
        &mut self,
        id: &str,
        through: u64,
        texts: &[String],
        at_ms: i64,
    ) -> Result<u64, Error> {
        check_len("/conversation", id, 1, CONVERSATION_MAX)?;
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let (turns, taken) = row(&tx, id)?.map_or((0, 0), |c| (c.turns, c.taken));
        if through < taken {
            return Err(Error::invalid(
                "/taken",
                format!("the inbox was read up to {taken} already, not back to {through}"),
            ));
        }
        let turn = turns + 1;
        tx.prepare_cached(
            "INSERT INTO conversations (id, turns, taken, tokens) VALUES (?1, ?2, ?3, 0)
             ON CONFLICT (id) DO UPDATE SET turns = ?2, taken = ?3",
        )?
        .execute(params![id, to_sql(turn), to_sql(through)])?;
        append(&tx, id, turn, texts, at_ms)?;
        tx.prepare_cached("DELETE FROM finished_units WHERE unit = ?1")?
            .execute(params![unit(id)])?;
        tx.commit()?;
        Ok(turn)
    }

    fn conversation_append(
        &mut self,
        id: &str,
        turn: u64,
        text: &str,
        at_ms: i64,
    ) -> Result<u64, Error> {
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let turns = row(&tx, id)?
            .ok_or(Error::NotFound {
                what: "conversation",
            })?
            .turns;
        if !(1..=turns).contains(&turn) {
            return Err(Error::invalid(
                "/turn",
                format!("1..={turns}, the turns started, not {turn}"),
            ));
        }
        let seq = append(&tx, id, turn, &[text.to_owned()], at_ms)?;
        tx.commit()?;
        Ok(seq)
    }

    fn conversation_history(
        &mut self,
        id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Entry<String>>, Error> {
        let mut query = self.sql.prepare_cached(
            "SELECT seq, turn, at, message FROM conversation_messages
             WHERE conversation = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )?;
        let limit = to_sql(u64::try_from(limit.min(PAGE_MAX)).unwrap_or(0));
        let rows = query.query_map(params![id, to_sql(after), limit], |r| {
            Ok(Entry {
                seq: from_sql(r.get(0)?),
                turn: from_sql(r.get(1)?),
                at_ms: r.get(2)?,
                message: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn conversation_tokens(&mut self, id: &str, used: u64) -> Result<u64, Error> {
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let tokens = row(&tx, id)?
            .ok_or(Error::NotFound {
                what: "conversation",
            })?
            .tokens
            .saturating_add(used);
        tx.prepare_cached("UPDATE conversations SET tokens = ?2 WHERE id = ?1")?
            .execute(params![id, to_sql(tokens)])?;
        tx.commit()?;
        Ok(tokens)
    }

    fn conversation_summary(&mut self, id: &str, through: u64, text: &str) -> Result<(), Error> {
        check_size("summary", text.len(), MESSAGE_MAX)?;
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let Some(conversation) = row(&tx, id)? else {
            return Err(Error::NotFound {
                what: "conversation",
            });
        };
        let kept: i64 = tx
            .prepare_cached("SELECT count(*) FROM conversation_messages WHERE conversation = ?1")?
            .query_row(params![id], |r| r.get(0))?;
        let kept = from_sql(kept);
        if !(conversation.summarized..=kept).contains(&through) {
            return Err(Error::invalid(
                "/through",
                format!(
                    "{}..={kept}, from what is summarized to the messages kept, not {through}",
                    conversation.summarized
                ),
            ));
        }
        tx.prepare_cached("UPDATE conversations SET summarized = ?2, summary = ?3 WHERE id = ?1")?
            .execute(params![id, to_sql(through), text])?;
        tx.commit()?;
        Ok(())
    }

    fn budget(&mut self, limit: Option<u64>) -> Result<Budget, Error> {
        let mut query = self
            .sql
            .prepare_cached("SELECT tokens FROM conversations")?;
        let tokens = query.query_map([], |r| r.get(0).map(from_sql))?;
        let tokens: Vec<u64> = tokens.collect::<Result<_, _>>()?;
        Ok(Budget::of(tokens, limit))
    }

    fn conversations_waiting(&mut self) -> Result<Vec<String>, Error> {
        let mut query = self.sql.prepare_cached(
            "SELECT i.conversation FROM inboxes i
             LEFT JOIN conversations c ON c.id = i.conversation
             GROUP BY i.conversation HAVING max(i.id) > coalesce(max(c.taken), 0)
             ORDER BY i.conversation",
        )?;
        let rows = query.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

impl Store {
    /// Conversation `id`, if a turn of it has started.
    pub(crate) fn conversation(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<Conversation>, Error>> + Send + use<> {
        let id = id.to_owned();
        self.run(move |db| row(&db.sql, &id))
    }

    /// Starts a turn of conversation `id` (1..=128 bytes; made by its first turn) that takes
    /// its inbox up to message `through` (never back from where the last turn took it), with
    /// `messages` (each at most [`MESSAGE_MAX`] bytes of JSON) as its first, at `at_ms`
    /// (Unix milliseconds), its unit of work open again: the turn's number, from 1. All of it
    /// or nothing is written.
    pub(crate) fn turn_start<M: Serialize>(
        &self,
        id: &str,
        through: u64,
        messages: &[M],
        at_ms: i64,
    ) -> impl Future<Output = Result<u64, Error>> + Send + use<M> {
        let id = id.to_owned();
        let texts: Result<Vec<String>, Error> = messages.iter().map(serialize).collect();
        self.run(move |db| db.turn_start(&id, through, &texts?, at_ms))
    }

    /// Appends `message` (at most [`MESSAGE_MAX`] bytes of JSON) to `id`'s history as part
    /// of `turn` (a turn started), at `at_ms`: its place in the history.
    pub(crate) fn conversation_append<M: Serialize>(
        &self,
        id: &str,
        turn: u64,
        message: &M,
        at_ms: i64,
    ) -> impl Future<Output = Result<u64, Error>> + Send + use<M> {
        let id = id.to_owned();
        let text = serialize(message);
        self.run(move |db| db.conversation_append(&id, turn, &text?, at_ms))
    }

    /// Up to `limit` (at most [`PAGE_MAX`]) messages of `id`'s history past place `after`,
    /// oldest first, each read as an `M` ([`Error::Corrupt`] when one is not).
    pub(crate) fn conversation_history<M: DeserializeOwned + Send + 'static>(
        &self,
        id: &str,
        after: u64,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Entry<M>>, Error>> + Send + use<M> {
        let id = id.to_owned();
        self.run(move |db| {
            db.conversation_history(&id, after, limit)?
                .into_iter()
                .map(|e| {
                    let message = serde_json::from_str(&e.message).map_err(Error::Corrupt)?;
                    Ok(Entry {
                        seq: e.seq,
                        turn: e.turn,
                        at_ms: e.at_ms,
                        message,
                    })
                })
                .collect()
        })
    }

    /// Adds `used` tokens to conversation `id`'s count (a turn started): the count now.
    pub(crate) fn conversation_tokens(
        &self,
        id: &str,
        used: u64,
    ) -> impl Future<Output = Result<u64, Error>> + Send + use<> {
        let id = id.to_owned();
        self.run(move |db| db.conversation_tokens(&id, used))
    }

    /// Keeps `text` (at most [`MESSAGE_MAX`] bytes) as the summary of the first `through`
    /// messages of `id`'s history (a conversation started), in place of the one kept before:
    /// never fewer messages than that one's, never more than the history holds.
    pub(crate) fn conversation_summary(
        &self,
        id: &str,
        through: u64,
        text: &str,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<> {
        let (id, text) = (id.to_owned(), text.to_owned());
        self.run(move |db| db.conversation_summary(&id, through, &text))
    }

    /// The instance's budget of `limit`: the tokens its model calls used, its conversations'
    /// together.
    pub(crate) fn budget(
        &self,
        limit: Option<u64>,
    ) -> impl Future<Output = Result<Budget, Error>> + Send + use<> {
        self.run(move |db| db.budget(limit))
    }

    /// The conversations whose inbox holds messages no turn took yet, by id.
    pub(crate) fn conversations_waiting(
        &self,
    ) -> impl Future<Output = Result<Vec<String>, Error>> + Send + use<> {
        self.run(Db::conversations_waiting)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::{Value, json};

    use super::super::{Limits, scratch};
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Said {
        text: String,
    }

    fn said(text: &str) -> Said {
        Said { text: text.into() }
    }

    async fn history(store: &Store, id: &str) -> Vec<(u64, u64, String)> {
        let entries = store.conversation_history::<Said>(id, 0, PAGE_MAX).await;
        let entries = entries.unwrap().into_iter();
        entries.map(|e| (e.seq, e.turn, e.message.text)).collect()
    }

    #[tokio::test]
    async fn turns_take_the_inbox_and_append_in_order() {
        let (_dir, store) = scratch().await;
        assert_eq!(store.conversation("root").await.unwrap(), None);
        assert!(store.conversations_waiting().await.unwrap().is_empty());
        store
            .message_send("root", "operator", "a", 1)
            .await
            .unwrap();
        store
            .message_send("root", "operator", "b", 1)
            .await
            .unwrap();
        store.message_send("c2", "operator", "x", 1).await.unwrap();
        assert_eq!(store.conversations_waiting().await.unwrap(), ["c2", "root"]);

        let one = store.turn_start("root", 2, &[said("a"), said("b")], 5);
        assert_eq!(one.await.unwrap(), 1);
        let append = store.conversation_append("root", 1, &said("answer"), 6);
        assert_eq!(append.await.unwrap(), 3);
        assert_eq!(store.conversations_waiting().await.unwrap(), ["c2"]);
        store
            .message_send("root", "operator", "c", 1)
            .await
            .unwrap();
        assert_eq!(store.conversations_waiting().await.unwrap(), ["c2", "root"]);
        let two = store.turn_start("root", 3, &[said("c")], 7);
        assert_eq!(two.await.unwrap(), 2);
        assert_eq!(
            history(&store, "root").await,
            [
                (1, 1, "a".to_owned()),
                (2, 1, "b".to_owned()),
                (3, 1, "answer".to_owned()),
                (4, 2, "c".to_owned()),
            ]
        );
        let page = store
            .conversation_history::<Said>("root", 2, 1)
            .await
            .unwrap();
        assert_eq!((page.len(), page[0].seq, page[0].at_ms), (1, 3, 6));
        let root = store.conversation("root").await.unwrap().unwrap();
        assert_eq!((root.turns, root.taken, root.tokens), (2, 3, 0));
        assert_eq!(store.conversation_tokens("root", 40).await.unwrap(), 40);
        assert_eq!(store.conversation_tokens("root", 2).await.unwrap(), 42);
        // Another conversation's history is its own.
        assert!(history(&store, "c2").await.is_empty());
    }

    /// The budget counts every conversation's tokens, up to the largest count: three
    /// conversations at the most a row keeps do not overflow it.
    #[tokio::test]
    async fn the_budget_sums_the_conversations_tokens_without_overflow() {
        let (_dir, store) = scratch().await;
        assert_eq!(store.budget(Some(1)).await.unwrap().used, 0);
        let row_max = i64::MAX as u64;
        for id in ["a", "b"] {
            store.turn_start::<Value>(id, 0, &[], 1).await.unwrap();
            store.conversation_tokens(id, u64::MAX).await.unwrap();
        }
        assert_eq!(store.budget(None).await.unwrap().used, 2 * row_max);
        store.turn_start::<Value>("c", 0, &[], 1).await.unwrap();
        // One more than the largest count.
        store.conversation_tokens("c", 2).await.unwrap();
        let budget = store.budget(Some(u64::MAX)).await.unwrap();
        assert_eq!(budget.used, u64::MAX);
        assert!(budget.spent());
    }

    /// A summary replaces the one before, from what it summarized to the messages kept.
    #[tokio::test]
    async fn a_summary_is_kept_within_the_history() {
        let (_dir, store) = scratch().await;
        let e = store.conversation_summary("c", 0, "s").await;
        assert!(matches!(e, Err(Error::NotFound { .. })), "{e:?}");
        store
            .turn_start("c", 0, &[said("a"), said("b")], 1)
            .await
            .unwrap();
        store
            .conversation_append("c", 1, &said("c"), 1)
            .await
            .unwrap();
        let c = store.conversation("c").await.unwrap().unwrap();
        assert_eq!((c.summarized, c.summary), (0, None));
        // At the bound: every message kept; one past it.
        store.conversation_summary("c", 3, "abc").await.unwrap();
        let e = store
            .conversation_summary("c", 4, "abcd")
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Error::Invalid { pointer, .. } if pointer == "/through"),
            "{e:?}"
        );
        // Never back.
        let e = store.conversation_summary("c", 2, "ab").await.unwrap_err();
        assert!(
            matches!(&e, Error::Invalid { pointer, .. } if pointer == "/through"),
            "{e:?}"
        );
        let c = store.conversation("c").await.unwrap().unwrap();
        assert_eq!((c.summarized, c.summary.as_deref()), (3, Some("abc")));
        store.conversation_summary("c", 3, "again").await.unwrap();
        let c = store.conversation("c").await.unwrap().unwrap();
        assert_eq!(c.summary.as_deref(), Some("again"));
        // The history keeps every message.
        assert_eq!(history(&store, "c").await.len(), 3);
        let past = "x".repeat(MESSAGE_MAX + 1);
        let e = store.conversation_summary("c", 3, &past).await.unwrap_err();
        assert!(matches!(e, Error::TooLarge { .. }), "{e:?}");
    }

    /// `finish` ends the turn under way: the next turn may finish too, and the same turn not
    /// twice.
    #[tokio::test]
    async fn each_turn_opens_the_conversation_s_unit_again() {
        use super::super::units::Outcome;
        let (_dir, store) = scratch().await;
        let finish = |summary: &str| store.finish("conversation:c", Outcome::Done, summary, 1);
        store.turn_start("c", 0, &[said("a")], 1).await.unwrap();
        finish("first").await.unwrap();
        let again = finish("again").await.unwrap_err();
        assert!(matches!(again, Error::AlreadyFinished { .. }), "{again:?}");
        // Another conversation's turn opens only its own.
        store.turn_start("d", 0, &[said("x")], 1).await.unwrap();
        assert!(finish("still").await.is_err());
        store.turn_start("c", 0, &[said("b")], 2).await.unwrap();
        assert_eq!(store.finished("conversation:c").await.unwrap(), None);
        finish("second").await.unwrap();
        let kept = store.finished("conversation:c").await.unwrap().unwrap();
        assert_eq!(kept.summary, "second");
        // A subagent's conversation: its turns are the subagent's unit.
        let finish = |summary: &str| store.finish("subagent:s1", Outcome::Done, summary, 3);
        store
            .turn_start("subagent:s1", 0, &[said("go")], 3)
            .await
            .unwrap();
        finish("first").await.unwrap();
        store
            .turn_start("subagent:s1", 0, &[said("on")], 4)
            .await
            .unwrap();
        assert_eq!(store.finished("subagent:s1").await.unwrap(), None);
        finish("second").await.unwrap();
    }

    #[tokio::test]
    async fn what_is_refused_writes_nothing() {
        let (_dir, store) = scratch().await;
        let e = store.conversation_append("c", 1, &said("x"), 1).await;
        assert!(
            matches!(
                e,
                Err(Error::NotFound {
                    what: "conversation"
                })
            ),
            "{e:?}"
        );
        let e = store.conversation_tokens("c", 1).await;
        assert!(matches!(e, Err(Error::NotFound { .. })), "{e:?}");
        store.turn_start("c", 2, &[said("x")], 1).await.unwrap();
        // The inbox is never read back.
        let e = store.turn_start("c", 1, &[said("y")], 1).await.unwrap_err();
        assert!(
            matches!(&e, Error::Invalid { pointer, .. } if pointer == "/taken"),
            "{e:?}"
        );
        // A turn not started.
        for turn in [0, 2] {
            let e = store.conversation_append("c", turn, &said("y"), 1).await;
            assert!(
                matches!(&e, Err(Error::Invalid { pointer, .. }) if pointer == "/turn"),
                "{e:?}"
            );
        }
        assert_eq!(history(&store, "c").await, [(1, 1, "x".to_owned())]);
        let c = store.conversation("c").await.unwrap().unwrap();
        assert_eq!((c.turns, c.taken), (1, 2));
    }

    #[tokio::test]
    async fn ids_and_messages_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        // The inbox's bound is not the history's.
        let limits = Limits {
            max_value_bytes: 16,
        };
        let store = Store::open(dir.path(), limits).await.unwrap();
        let at = "c".repeat(CONVERSATION_MAX);
        store.turn_start(&at, 0, &[said("x")], 1).await.unwrap();
        let past = "c".repeat(CONVERSATION_MAX + 1);
        for bad in [past.as_str(), ""] {
            let e = store.turn_start(bad, 0, &[said("x")], 1).await.unwrap_err();
            assert!(
                matches!(&e, Error::Invalid { pointer, .. } if pointer == "/conversation"),
                "{e:?}"
            );
        }
        // `{"text":"…"}` is 11 bytes around the text.
        let largest = said(&"t".repeat(MESSAGE_MAX - 11));
        store
            .conversation_append(&at, 1, &largest, 1)
            .await
            .unwrap();
        let over = said(&"t".repeat(MESSAGE_MAX - 10));
        let e = store
            .conversation_append(&at, 1, &over, 1)
            .await
            .unwrap_err();
        assert!(
            matches!(e, Error::TooLarge { what: "message", bytes, limit: MESSAGE_MAX } if bytes == MESSAGE_MAX + 1),
            "{e:?}"
        );
        let e = store
            .turn_start(&at, 0, &[said("x"), over], 1)
            .await
            .unwrap_err();
        assert!(matches!(e, Error::TooLarge { .. }), "{e:?}");
        assert_eq!(store.conversation(&at).await.unwrap().unwrap().turns, 1);
        assert_eq!(history(&store, &at).await.len(), 2);
        // A page is at most PAGE_MAX long.
        let many = vec![said("m"); PAGE_MAX];
        store.turn_start(&at, 0, &many, 1).await.unwrap();
        let page = store
            .conversation_history::<Said>(&at, 0, PAGE_MAX + 5)
            .await;
        assert_eq!(page.unwrap().len(), PAGE_MAX);
    }

    #[tokio::test]
    async fn a_message_not_of_the_type_asked_is_corrupt() {
        let (_dir, store) = scratch().await;
        store
            .turn_start("c", 0, &[json!({"other": 1})], 1)
            .await
            .unwrap();
        let e = store.conversation_history::<Said>("c", 0, 10).await;
        assert!(matches!(e, Err(Error::Corrupt(_))), "{e:?}");
        let read = store
            .conversation_history::<Value>("c", 0, 10)
            .await
            .unwrap();
        assert_eq!(read[0].message, json!({"other": 1}));
    }
}
