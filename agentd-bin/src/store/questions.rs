//! The questions put to people (`ask_human`'s, and servers' elicitations): each with its
//! origin, text and answer schema, *open* until it is answered or cancelled, with its answer
//! and the times it was asked and ended. Ids are given by the caller (the human gate), so
//! that it knows a question's id before the question is written.
//!
//! An answer is checked here against the question's schema, in the transaction that records
//! it: a refused answer leaves the question open. Nobody waits on a question across a
//! restart, so the open ones are cancelled when the gate starts ([`Store::questions_restart`]).

use rusqlite::{OptionalExtension, Row, TransactionBehavior, params};
use serde_json::Value;

use super::db::{Db, check_len, check_size, from_sql, to_sql};
use super::error::Error;
use super::handle::Store;

// The tools' bounds, kept here too: the store takes nothing past them.
pub(crate) use agentd_tools::human::{ANSWER_MAX, QUESTION_MAX, SCHEMA_MAX};
use agentd_tools::human::{Origin, check_answer};

/// The longest asker (a unit, or a server's name), in bytes.
pub(crate) const FROM_MAX: usize = 256;

/// How a question stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Asked, and waited on.
    Open,
    /// Answered with an answer that fits its schema.
    Answered,
    /// Withdrawn unanswered: its asker stopped waiting, or the daemon restarted.
    Cancelled,
}

impl State {
    /// Its word in the table.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Answered => "answered",
            Self::Cancelled => "cancelled",
        }
    }

    fn parse(word: &str) -> Option<Self> {
        [Self::Open, Self::Answered, Self::Cancelled]
            .into_iter()
            .find(|s| s.as_str() == word)
    }
}

/// A question, as kept.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Question {
    /// Its id.
    pub(crate) id: u64,
    /// Who asked.
    pub(crate) origin: Origin,
    /// What was asked.
    pub(crate) text: String,
    /// The schema its answer fits.
    pub(crate) schema: Value,
    /// How it stands.
    pub(crate) state: State,
    /// Its answer, once answered.
    pub(crate) answer: Option<Value>,
    /// When it was asked, in Unix milliseconds.
    pub(crate) asked_ms: i64,
    /// When it was answered or cancelled.
    pub(crate) ended_ms: Option<i64>,
}

/// What a restart found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Restarted {
    /// The questions that were open, cancelled now.
    pub(crate) cancelled: u64,
    /// The next question's id: past every id kept.
    pub(crate) next: u64,
}

const COLUMNS: &str = "id, origin, asker, question, schema, state, answer, asked, ended";

/// A row of [`COLUMNS`].
fn question(row: &Row<'_>) -> rusqlite::Result<Result<Question, Error>> {
    let (kind, from): (String, String) = (row.get(1)?, row.get(2)?);
    let (schema, state, answer): (String, String, Option<String>) =
        (row.get(4)?, row.get(5)?, row.get(6)?);
    let corrupt = |what: String| Error::Corrupt(serde::de::Error::custom(what));
    let parsed = (|| {
        let origin =
            Origin::parse(&kind, &from).ok_or_else(|| corrupt(format!("origin {kind:?}")))?;
        let state = State::parse(&state).ok_or_else(|| corrupt(format!("state {state:?}")))?;
        let schema = serde_json::from_str(&schema).map_err(Error::Corrupt)?;
        let answer = answer
            .map(|a| serde_json::from_str(&a))
            .transpose()
            .map_err(Error::Corrupt)?;
        Ok((origin, state, schema, answer))
    })();
    Ok(match parsed {
        Ok((origin, state, schema, answer)) => Ok(Question {
            id: from_sql(row.get(0)?),
            origin,
            text: row.get(3)?,
            schema,
            state,
            answer,
            asked_ms: row.get(7)?,
            ended_ms: row.get(8)?,
        }),
        Err(e) => Err(e),
    })
}

impl Db {
    fn question_open(
        &mut self,
        id: u64,
        origin: &Origin,
        text: &str,
        schema: &Value,
        at_ms: i64,
    ) -> Result<(), Error> {
        check_len("/from", origin.from(), 1, FROM_MAX)?;
        check_size("question", text.len(), QUESTION_MAX)?;
        let schema = schema.to_string();
        check_size("schema", schema.len(), SCHEMA_MAX)?;
        let inserted = self
            .sql
            .prepare_cached(
                "INSERT INTO questions (id, origin, asker, question, schema, state, asked)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'open', ?6) ON CONFLICT (id) DO NOTHING",
            )?
            .execute(params![
                to_sql(id),
                origin.kind(),
                origin.from(),
                text,
                schema,
                at_ms
            ])?;
        if inserted == 0 {
            return Err(Error::Exists { what: "question" });
        }
        Ok(())
    }

    fn question(&mut self, id: u64) -> Result<Option<Question>, Error> {
        let sql = format!("SELECT {COLUMNS} FROM questions WHERE id = ?1");
        self.sql
            .prepare_cached(&sql)?
            .query_row(params![to_sql(id)], question)
            .optional()?
            .transpose()
    }

    fn questions_open(&mut self) -> Result<Vec<Question>, Error> {
        let sql = format!("SELECT {COLUMNS} FROM questions WHERE state = 'open' ORDER BY id");
        let mut query = self.sql.prepare_cached(&sql)?;
        let rows = query.query_map([], question)?;
        rows.map(|row| row?).collect()
    }

    fn question_answer(&mut self, id: u64, answer: &Value, at_ms: i64) -> Result<Origin, Error> {
        let text = answer.to_string();
        check_size("answer", text.len(), ANSWER_MAX)?;
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let sql = format!("SELECT {COLUMNS} FROM questions WHERE id = ?1 AND state = 'open'");
        let open = tx
            .prepare_cached(&sql)?
            .query_row(params![to_sql(id)], question)
            .optional()?
            .transpose()?;
        let Question { origin, schema, .. } = open.ok_or(Error::NotFound {
            what: "open question",
        })?;
        check_answer(&schema, answer).map_err(|e| match e {
            agentd_tools::Error::BadAnswer {
                pointer,
                rule,
                message,
            } => Error::BadAnswer {
                pointer,
                rule,
                message,
            },
            agentd_tools::Error::TooLarge { what, size, max } => Error::TooLarge {
                what,
                bytes: size,
                limit: max,
            },
            // `check_answer` says nothing else.
            other => Error::invalid("", other.to_string()),
        })?;
        tx.prepare_cached(
            "UPDATE questions SET state = 'answered', answer = ?2, ended = ?3 WHERE id = ?1",
        )?
        .execute(params![to_sql(id), text, at_ms])?;
        tx.commit()?;
        Ok(origin)
    }

    fn question_cancel(&mut self, id: u64, at_ms: i64) -> Result<bool, Error> {
        let changed = self
            .sql
            .prepare_cached(
                "UPDATE questions SET state = 'cancelled', ended = ?2
                 WHERE id = ?1 AND state = 'open'",
            )?
            .execute(params![to_sql(id), at_ms])?;
        Ok(changed == 1)
    }

    fn questions_restart(&mut self, at_ms: i64) -> Result<Restarted, Error> {
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let cancelled = tx
            .prepare_cached(
                "UPDATE questions SET state = 'cancelled', ended = ?1 WHERE state = 'open'",
            )?
            .execute(params![at_ms])?;
        let last: i64 = tx.query_row("SELECT coalesce(max(id), 0) FROM questions", [], |r| {
            r.get(0)
        })?;
        tx.commit()?;
        Ok(Restarted {
            cancelled: cancelled as u64,
            next: from_sql(last) + 1,
        })
    }
}

impl Store {
    /// Opens question `id` from `origin` (an asker of 1..=256 bytes), `text` (at most 4096
    /// bytes) with `schema` (at most 16 KiB of compact JSON), asked at `at_ms`; `exists` when
    /// the id is taken.
    pub(crate) fn question_open(
        &self,
        id: u64,
        origin: &Origin,
        text: &str,
        schema: &Value,
        at_ms: i64,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<> {
        let (origin, text, schema) = (origin.clone(), text.to_owned(), schema.clone());
        self.run(move |db| db.question_open(id, &origin, &text, &schema, at_ms))
    }

    /// Question `id`, however it stands, if it was asked.
    pub(crate) fn question(
        &self,
        id: u64,
    ) -> impl Future<Output = Result<Option<Question>, Error>> + Send + use<> {
        self.run(move |db| db.question(id))
    }

    /// The open questions, oldest first.
    pub(crate) fn questions_open(
        &self,
    ) -> impl Future<Output = Result<Vec<Question>, Error>> + Send + use<> {
        self.run(Db::questions_open)
    }

    /// Answers open question `id` with `answer` (at most 16 KiB of compact JSON) at `at_ms`,
    /// and says who asked it: `not_found` when no question of that id is open, `bad_answer`
    /// (naming the pointer and the rule) when the answer does not fit its schema, and the
    /// question stays open.
    pub(crate) fn question_answer(
        &self,
        id: u64,
        answer: &Value,
        at_ms: i64,
    ) -> impl Future<Output = Result<Origin, Error>> + Send + use<> {
        let answer = answer.clone();
        self.run(move |db| db.question_answer(id, &answer, at_ms))
    }

    /// Cancels question `id` at `at_ms` if it is open: whether it was.
    pub(crate) fn question_cancel(
        &self,
        id: u64,
        at_ms: i64,
    ) -> impl Future<Output = Result<bool, Error>> + Send + use<> {
        self.run(move |db| db.question_cancel(id, at_ms))
    }

    /// At a start: cancels every open question at `at_ms` (nobody waits on them any more),
    /// and says how many there were and the next id.
    pub(crate) fn questions_restart(
        &self,
        at_ms: i64,
    ) -> impl Future<Output = Result<Restarted, Error>> + Send + use<> {
        self.run(move |db| db.questions_restart(at_ms))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::scratch;
    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
    }

    #[tokio::test]
    async fn a_question_is_open_until_answered_with_what_fits() {
        let (_dir, store) = scratch().await;
        let origin = Origin::ask_human("conversation:c1");
        store
            .question_open(1, &origin, "Name?", &schema(), 5)
            .await
            .unwrap();
        let taken = store
            .question_open(1, &origin, "Again?", &schema(), 5)
            .await;
        assert!(
            matches!(taken, Err(Error::Exists { what: "question" })),
            "{taken:?}"
        );
        let server = Origin::elicitation("tickets");
        store
            .question_open(2, &server, "Project?", &json!({"type": "object"}), 6)
            .await
            .unwrap();
        let open = store.questions_open().await.unwrap();
        assert_eq!(open.iter().map(|q| q.id).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(
            (&open[0].origin, open[0].text.as_str(), &open[0].schema),
            (&origin, "Name?", &schema())
        );
        assert_eq!((open[0].state, open[0].asked_ms), (State::Open, 5));
        assert_eq!(open[1].origin, server);

        let bad = store.question_answer(1, &json!({"name": 7}), 8).await;
        assert!(
            matches!(&bad, Err(Error::BadAnswer { pointer, rule, .. }) if pointer == "/name" && rule == "type"),
            "{bad:?}"
        );
        assert_eq!(bad.unwrap_err().code(), "bad_answer");
        assert_eq!(store.questions_open().await.unwrap().len(), 2);

        let asker = store.question_answer(1, &json!({"name": "Ada"}), 9).await;
        assert_eq!(asker.unwrap(), origin);
        let answered = store.question(1).await.unwrap().unwrap();
        assert_eq!(answered.state, State::Answered);
        assert_eq!(answered.answer, Some(json!({"name": "Ada"})));
        assert_eq!(answered.ended_ms, Some(9));
        let again = store.question_answer(1, &json!({"name": "Bo"}), 10).await;
        assert!(matches!(again, Err(Error::NotFound { .. })), "{again:?}");
        assert!(!store.question_cancel(1, 10).await.unwrap());
        assert_eq!(
            store.question(1).await.unwrap().unwrap().state,
            State::Answered
        );

        assert!(store.question_cancel(2, 11).await.unwrap());
        let cancelled = store.question(2).await.unwrap().unwrap();
        assert_eq!(
            (cancelled.state, cancelled.ended_ms),
            (State::Cancelled, Some(11))
        );
        let late = store.question_answer(2, &json!({}), 12).await;
        assert!(matches!(late, Err(Error::NotFound { .. })), "{late:?}");
        assert!(store.questions_open().await.unwrap().is_empty());
        assert_eq!(store.question(3).await.unwrap(), None);
    }

    #[tokio::test]
    async fn texts_schemas_answers_and_askers_are_bounded() {
        let (_dir, store) = scratch().await;
        let origin = Origin::ask_human("u");
        let any = json!({});
        let at = "q".repeat(QUESTION_MAX);
        store.question_open(1, &origin, &at, &any, 1).await.unwrap();
        let past = "q".repeat(QUESTION_MAX + 1);
        let e = store.question_open(2, &origin, &past, &any, 1).await;
        assert!(
            matches!(
                e,
                Err(Error::TooLarge {
                    what: "question",
                    ..
                })
            ),
            "{e:?}"
        );
        // {"description":"…"} is 18 bytes around the text.
        let sized = |n: usize| json!({"description": "d".repeat(n - 18)});
        store
            .question_open(3, &origin, "?", &sized(SCHEMA_MAX), 1)
            .await
            .unwrap();
        let e = store
            .question_open(4, &origin, "?", &sized(SCHEMA_MAX + 1), 1)
            .await;
        assert!(
            matches!(e, Err(Error::TooLarge { what: "schema", .. })),
            "{e:?}"
        );
        let long = Origin::ask_human(&"u".repeat(FROM_MAX));
        store.question_open(5, &long, "?", &any, 1).await.unwrap();
        for bad in [
            Origin::ask_human(&"u".repeat(FROM_MAX + 1)),
            Origin::elicitation(""),
        ] {
            let e = store.question_open(6, &bad, "?", &any, 1).await;
            assert!(
                matches!(&e, Err(Error::Invalid { pointer, .. }) if pointer == "/from"),
                "{e:?}"
            );
        }
        // {"s":"…"} is 8 bytes around the text.
        let answer = |n: usize| json!({"s": "x".repeat(n - 8)});
        let e = store.question_answer(1, &answer(ANSWER_MAX + 1), 2).await;
        assert!(
            matches!(e, Err(Error::TooLarge { what: "answer", .. })),
            "{e:?}"
        );
        assert_eq!(store.question(1).await.unwrap().unwrap().state, State::Open);
        store
            .question_answer(1, &answer(ANSWER_MAX), 2)
            .await
            .unwrap();
        assert_eq!(
            store.question(1).await.unwrap().unwrap().answer,
            Some(answer(ANSWER_MAX))
        );
        let open: Vec<u64> = store
            .questions_open()
            .await
            .unwrap()
            .iter()
            .map(|q| q.id)
            .collect();
        assert_eq!(open, [3, 5]);
    }

    /// What a restart finds: the open questions cancelled (the answered kept), and the next
    /// id past every id kept, across a close and a reopen.
    #[tokio::test]
    async fn a_restart_cancels_the_open_questions() {
        let (dir, store) = scratch().await;
        assert_eq!(
            store.questions_restart(1).await.unwrap(),
            Restarted {
                cancelled: 0,
                next: 1
            }
        );
        let origin = Origin::ask_human("u");
        for id in [1, 2, 5] {
            store
                .question_open(id, &origin, "?", &schema(), 1)
                .await
                .unwrap();
        }
        store
            .question_answer(2, &json!({"name": "Ada"}), 2)
            .await
            .unwrap();
        store.close().await;

        let store = Store::open(dir.path(), super::super::Limits::default())
            .await
            .unwrap();
        assert_eq!(store.questions_open().await.unwrap().len(), 2);
        assert_eq!(
            store.questions_restart(3).await.unwrap(),
            Restarted {
                cancelled: 2,
                next: 6
            }
        );
        assert!(store.questions_open().await.unwrap().is_empty());
        for (id, state) in [
            (1, State::Cancelled),
            (2, State::Answered),
            (5, State::Cancelled),
        ] {
            let kept = store.question(id).await.unwrap().unwrap();
            assert_eq!(kept.state, state, "{id}");
        }
        let one = store.question(1).await.unwrap().unwrap();
        assert_eq!((one.ended_ms, one.answer), (Some(3), None));
        assert_eq!(
            store.question(2).await.unwrap().unwrap().answer,
            Some(json!({"name": "Ada"}))
        );
    }
}
