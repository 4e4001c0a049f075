//! The finished units (a unit is finished once), and the store's numbers for `status`.

use rusqlite::{OptionalExtension, TransactionBehavior, params};

use super::db::{Db, check_size, from_sql};
use super::error::Error;
use super::handle::Store;

// The tool's bound, kept here too: the store takes nothing past it.
pub(crate) use agentd_tools::finish::SUMMARY_MAX;

/// How a unit finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It did what it was for.
    Done,
    /// It could not.
    Failed,
    /// It was stopped.
    Cancelled,
}

impl Outcome {
    /// The contract's word for it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The outcome named `word` ([`as_str`](Self::as_str)), if it is one.
    pub(crate) fn parse(word: &str) -> Option<Self> {
        [Self::Done, Self::Failed, Self::Cancelled]
            .into_iter()
            .find(|o| o.as_str() == word)
    }
}

/// A finished unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finished {
    /// The unit.
    pub(crate) unit: String,
    /// How.
    pub(crate) status: Outcome,
    /// Its summary.
    pub(crate) summary: String,
    /// When, in Unix milliseconds.
    pub(crate) at_ms: i64,
    /// The names of its artifacts, in byte order.
    pub(crate) artifacts: Vec<String>,
}

/// A conversation's inbox, as `status` counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Conversation {
    /// The conversation's id.
    pub(crate) id: String,
    /// How many messages its inbox holds.
    pub(crate) inbox: u64,
    /// The tokens its model calls used.
    pub(crate) tokens: u64,
}

/// The store's numbers for `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Status {
    /// The database's size (page count times page size).
    pub(crate) bytes: u64,
    /// The conversations with an inbox or a turn, by id.
    pub(crate) conversations: Vec<Conversation>,
    /// How many units are finished.
    pub(crate) units_finished: u64,
}

impl Db {
    /// `unit`'s finish, with its artifacts' names, if it finished.
    fn finished(&mut self, unit: &str) -> Result<Option<Finished>, Error> {
        let row: Option<(String, String, i64)> = self
            .sql
            .prepare_cached("SELECT status, summary, at FROM finished_units WHERE unit = ?1")?
            .query_row(params![unit], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        let Some((status, summary, at_ms)) = row else {
            return Ok(None);
        };
        let status = Outcome::parse(&status).ok_or_else(|| {
            Error::Corrupt(serde::de::Error::custom(format!(
                "{status:?} is not a finish's status"
            )))
        })?;
        let artifacts = self.artifact_names(unit)?;
        Ok(Some(Finished {
            unit: unit.to_owned(),
            status,
            summary,
            at_ms,
            artifacts,
        }))
    }

    fn finish(
        &mut self,
        unit: &str,
        status: Outcome,
        summary: &str,
        at_ms: i64,
    ) -> Result<Finished, Error> {
        check_size("summary", summary.len(), SUMMARY_MAX)?;
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let inserted = tx
            .prepare_cached(
                "INSERT INTO finished_units (unit, status, summary, at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (unit) DO NOTHING",
            )?
            .execute(params![unit, status.as_str(), summary, at_ms])?;
        if inserted == 0 {
            return Err(Error::AlreadyFinished {
                unit: unit.to_owned(),
            });
        }
        tx.commit()?;
        Ok(Finished {
            unit: unit.to_owned(),
            status,
            summary: summary.to_owned(),
            at_ms,
            artifacts: self.artifact_names(unit)?,
        })
    }

    fn status(&mut self) -> Result<Status, Error> {
        let pages: i64 = self.sql.query_row("PRAGMA page_count", [], |r| r.get(0))?;
        let page: i64 = self.sql.query_row("PRAGMA page_size", [], |r| r.get(0))?;
        let mut query = self.sql.prepare_cached(
            "SELECT id, sum(inbox), sum(tokens) FROM (
                 SELECT conversation AS id, count(*) AS inbox, 0 AS tokens
                 FROM inboxes GROUP BY conversation
                 UNION ALL SELECT id, 0, tokens FROM conversations
             ) GROUP BY id ORDER BY id",
        )?;
        let conversations = query
            .query_map([], |r| {
                Ok(Conversation {
                    id: r.get(0)?,
                    inbox: from_sql(r.get(1)?),
                    tokens: from_sql(r.get(2)?),
                })
            })?
            .collect::<Result<_, _>>()?;
        let finished: i64 = self
            .sql
            .query_row("SELECT count(*) FROM finished_units", [], |r| r.get(0))?;
        Ok(Status {
            bytes: from_sql(pages.saturating_mul(page)),
            conversations,
            units_finished: from_sql(finished),
        })
    }
}

impl Store {
    /// `finish`: records `unit` finished with `status` and `summary` (at most 4096 bytes) at
    /// `at_ms` (Unix milliseconds), once: [`Error::AlreadyFinished`] after. Answers with the
    /// unit's artifacts' names.
    pub(crate) fn finish(
        &self,
        unit: &str,
        status: Outcome,
        summary: &str,
        at_ms: i64,
    ) -> impl Future<Output = Result<Finished, Error>> + Send + use<> {
        let (unit, summary) = (unit.to_owned(), summary.to_owned());
        self.run(move |db| db.finish(&unit, status, &summary, at_ms))
    }

    /// `unit`'s finish, if it finished.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "await of a run or a subagent reads it")
    )]
    pub(crate) fn finished(
        &self,
        unit: &str,
    ) -> impl Future<Output = Result<Option<Finished>, Error>> + Send + use<> {
        let unit = unit.to_owned();
        self.run(move |db| db.finished(&unit))
    }

    /// The store's numbers for `status`: its size, each conversation's inbox count and tokens,
    /// the finished units.
    pub(crate) fn status(&self) -> impl Future<Output = Result<Status, Error>> + Send + use<> {
        self.run(Db::status)
    }
}

#[cfg(test)]
mod tests {
    use super::super::scratch;
    use super::*;

    #[tokio::test]
    async fn a_unit_finishes_once() {
        let (_dir, store) = scratch().await;
        assert_eq!(store.finished("run:r").await.unwrap(), None);
        for name in ["b", "a"] {
            store
                .artifact_create("run:r", name, "text/plain", b"x".to_vec())
                .await
                .unwrap();
        }
        let finished = store
            .finish("run:r", Outcome::Done, "all went well", 1)
            .await
            .unwrap();
        assert_eq!(
            (
                finished.unit.as_str(),
                finished.status,
                finished.summary.as_str()
            ),
            ("run:r", Outcome::Done, "all went well")
        );
        assert_eq!(finished.artifacts, ["a", "b"]);
        assert_eq!(
            store.finished("run:r").await.unwrap(),
            Some(finished.clone())
        );
        let e = store
            .finish("run:r", Outcome::Cancelled, "again", 1)
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Error::AlreadyFinished { unit } if unit == "run:r"),
            "{e:?}"
        );
        assert_eq!(e.code(), "already_finished");
        assert_eq!(store.finished("run:r").await.unwrap(), Some(finished));
        // Every outcome is kept as it was given.
        for (unit, outcome) in [("a", Outcome::Failed), ("b", Outcome::Cancelled)] {
            store.finish(unit, outcome, "", 1).await.unwrap();
            assert_eq!(store.finished(unit).await.unwrap().unwrap().status, outcome);
        }
    }

    #[tokio::test]
    async fn summaries_are_bounded() {
        let (_dir, store) = scratch().await;
        let e = store
            .finish("u", Outcome::Done, &"s".repeat(SUMMARY_MAX + 1), 1)
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::TooLarge {
                    what: "summary",
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(store.finished("u").await.unwrap(), None);
        let at = "s".repeat(SUMMARY_MAX);
        let finished = store.finish("u", Outcome::Done, &at, 1).await.unwrap();
        assert_eq!(finished.summary, at);
    }

    #[tokio::test]
    async fn status_counts() {
        let (_dir, store) = scratch().await;
        let empty = store.status().await.unwrap();
        assert!(empty.bytes > 0);
        assert_eq!((empty.conversations.len(), empty.units_finished), (0, 0));
        store.message_send("c2", "u", "a", 1).await.unwrap();
        store.message_send("c1", "u", "b", 1).await.unwrap();
        store.message_send("c2", "u", "c", 1).await.unwrap();
        store.finish("run:r", Outcome::Done, "", 1).await.unwrap();
        // A conversation's tokens; one with no inbox (a subagent's, say) is listed too.
        store.turn_start("c2", 1, &["a"], 1).await.unwrap();
        store.conversation_tokens("c2", 30).await.unwrap();
        store.turn_start("sub", 0, &["task"], 1).await.unwrap();
        store.conversation_tokens("sub", 12).await.unwrap();
        let status = store.status().await.unwrap();
        let conversation = |id: &str, inbox, tokens| Conversation {
            id: id.into(),
            inbox,
            tokens,
        };
        assert_eq!(
            status.conversations,
            [
                conversation("c1", 1, 0),
                conversation("c2", 2, 30),
                conversation("sub", 0, 12)
            ]
        );
        assert_eq!(store.budget(None).await.unwrap().used, 42);
        assert_eq!(status.units_finished, 1);
        assert_eq!(status.bytes % 512, 0, "whole pages");
    }
}
