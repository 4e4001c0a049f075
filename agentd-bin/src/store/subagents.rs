//! The subagents: who ran each, what it was run with (its tools, its servers, how long each
//! run of it may take), where it stands, its last answer or error, and its current run's
//! deadline. Its conversation (`subagent:<id>`) holds its goal and messages (the inbox) and
//! its history; its turns and tokens are that conversation's.
//!
//! A state changes in one transaction with what goes with it: a run writes the subagent and
//! its goal into its inbox; a message to a settled subagent runs it again (its deadline
//! afresh); a subagent settles as `finished` only when its turns took every message of its
//! inbox (else a message came meanwhile, and its next turn is due); any other state than
//! `running` is left by a settle as it is (a kill came first).

use std::time::Duration;

use agentd_tools::subagent::{CONVERSATION_PREFIX, RUNNING_MAX, State, Subagent, conversation};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

use super::db::{Db, from_sql};
use super::error::Error;
use super::handle::Store;
use super::inbox;

/// What a subagent was run with, as its row keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Spec {
    /// The own tools it is offered (patterns), all granted to subagents when `None`.
    pub(crate) tools: Option<Vec<String>>,
    /// Its servers, every held server when `None`.
    pub(crate) servers: Option<Vec<String>>,
}

/// A subagent as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    /// Its status.
    pub(crate) status: Subagent,
    /// What it was run with.
    pub(crate) spec: Spec,
    /// How long each run of it may take.
    pub(crate) run: Duration,
}

const COLUMNS: &str = "SELECT s.id, s.parent, s.spec, s.run_ms, s.state, s.answer, s.error,
    s.deadline, s.started, coalesce(c.turns, 0), coalesce(c.tokens, 0)
    FROM subagents s LEFT JOIN conversations c ON c.id = ?1 || s.id";

/// The record of a row of [`COLUMNS`].
fn record(r: &rusqlite::Row<'_>) -> rusqlite::Result<(Record, String)> {
    let (id, parent, state): (String, String, String) = (r.get(0)?, r.get(1)?, r.get(4)?);
    // A state this build does not know is `failed`, and says so.
    let known = State::parse(&state);
    let mut status = Subagent::new(&id, &parent, known.unwrap_or(State::Failed), r.get(8)?);
    status.answer = r.get(5)?;
    status.error = match known {
        Some(_) => r.get(6)?,
        None => Some(format!("the store holds an unknown state {state:?}")),
    };
    status.deadline_ms = Some(r.get(7)?);
    status.turns = from_sql(r.get(9)?);
    status.tokens = from_sql(r.get(10)?);
    let run = Duration::from_millis(from_sql(r.get(3)?));
    let spec: String = r.get(2)?;
    let record = Record {
        status,
        spec: Spec::default(),
        run,
    };
    Ok((record, spec))
}

/// `(record, spec JSON)` with its spec read.
fn with_spec((mut record, spec): (Record, String)) -> Result<Record, Error> {
    record.spec = serde_json::from_str(&spec).map_err(Error::Corrupt)?;
    Ok(record)
}

/// Subagent `id`, unless it is unknown or retired.
fn alive(db: &Connection, id: &str) -> Result<Record, Error> {
    let found = db
        .prepare_cached(&format!("{COLUMNS} WHERE s.id = ?2"))?
        .query_row(params![CONVERSATION_PREFIX, id], record)
        .optional()?;
    let record = with_spec(found.ok_or(Error::UnknownSubagent)?)?;
    match record.status.state {
        State::Retired => Err(Error::UnknownSubagent),
        _ => Ok(record),
    }
}

/// Sets `id`'s state and what goes with it.
fn set(db: &Connection, id: &str, state: State) -> Result<(), Error> {
    db.prepare_cached("UPDATE subagents SET state = ?2 WHERE id = ?1")?
        .execute(params![id, state.as_str()])?;
    Ok(())
}

/// Whether `conversation`'s inbox holds messages its turns did not take.
fn waiting(db: &Connection, conversation: &str) -> Result<bool, Error> {
    let (sent, taken): (i64, i64) = db
        .prepare_cached(
            "SELECT (SELECT coalesce(max(id), 0) FROM inboxes WHERE conversation = ?1),
                    coalesce((SELECT taken FROM conversations WHERE id = ?1), 0)",
        )?
        .query_row(params![conversation], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(sent > taken)
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// How a subagent settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settled {
    /// Its state: any but `running` and `retired`.
    pub(crate) state: State,
    /// Its answer, when it gave one (else its last stays).
    pub(crate) answer: Option<String>,
    /// Why it failed or stopped.
    pub(crate) error: Option<String>,
}

impl Db {
    fn subagent_run(
        &mut self,
        parent: &str,
        goal: &str,
        spec: &Spec,
        run: Duration,
        at_ms: i64,
    ) -> Result<String, Error> {
        let spec = serde_json::to_string(spec).map_err(Error::Corrupt)?;
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let (all, running): (i64, i64) = tx
            .prepare_cached("SELECT count(*), coalesce(sum(state = 'running'), 0) FROM subagents")?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let running = usize::try_from(running).unwrap_or(usize::MAX);
        if running >= RUNNING_MAX {
            return Err(Error::TooMany {
                what: "running subagents",
                count: running.saturating_add(1),
                limit: RUNNING_MAX,
            });
        }
        // Rows are never deleted: the count names the next.
        let id = format!("s{}", from_sql(all) + 1);
        tx.prepare_cached(
            "INSERT INTO subagents (id, parent, spec, run_ms, state, deadline, started)
             VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6)",
        )?
        .execute(params![
            id,
            parent,
            spec,
            millis(run),
            at_ms.saturating_add(millis(run)),
            at_ms
        ])?;
        let max = self.limits.max_value_bytes;
        let talk = conversation(&id);
        let message = inbox::append(&tx, max, &talk, parent, goal, at_ms)?;
        tx.commit()?;
        self.told(&talk, message);
        Ok(id)
    }

    fn subagent_send(
        &mut self,
        id: &str,
        from: &str,
        text: &str,
        at_ms: i64,
    ) -> Result<(Record, bool), Error> {
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found = alive(&tx, id)?;
        let max = self.limits.max_value_bytes;
        let talk = conversation(id);
        let message = inbox::append(&tx, max, &talk, from, text, at_ms)?;
        let again = found.status.state.settled();
        if again {
            tx.prepare_cached(
                "UPDATE subagents SET state = 'running', error = NULL, deadline = ?2
                 WHERE id = ?1",
            )?
            .execute(params![id, at_ms.saturating_add(millis(found.run))])?;
        }
        let now = alive(&tx, id)?;
        tx.commit()?;
        self.told(&talk, message);
        Ok((now, again))
    }

    fn subagent_settle(&mut self, id: &str, settled: &Settled) -> Result<bool, Error> {
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found = alive(&tx, id)?;
        let finished = settled.state == State::Finished;
        if found.status.state != State::Running || (finished && waiting(&tx, &conversation(id))?) {
            return Ok(false);
        }
        tx.prepare_cached(
            "UPDATE subagents SET state = ?2, answer = coalesce(?3, answer), error = ?4
             WHERE id = ?1",
        )?
        .execute(params![
            id,
            settled.state.as_str(),
            settled.answer,
            settled.error
        ])?;
        tx.commit()?;
        Ok(true)
    }

    fn subagent_kill(&mut self, id: &str) -> Result<(Record, bool), Error> {
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found = alive(&tx, id)?;
        let running = found.status.state == State::Running;
        if running {
            set(&tx, id, State::Killed)?;
        }
        let now = alive(&tx, id)?;
        tx.commit()?;
        Ok((now, running))
    }

    fn subagent_retire(&mut self, id: &str) -> Result<Record, Error> {
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut found = alive(&tx, id)?;
        if found.status.state == State::Running {
            return Err(Error::Running);
        }
        set(&tx, id, State::Retired)?;
        tx.commit()?;
        found.status.state = State::Retired;
        Ok(found)
    }

    fn subagent(&mut self, id: &str) -> Result<Record, Error> {
        let found = self
            .sql
            .prepare_cached(&format!("{COLUMNS} WHERE s.id = ?2"))?
            .query_row(params![CONVERSATION_PREFIX, id], record)
            .optional()?;
        with_spec(found.ok_or(Error::UnknownSubagent)?)
    }

    fn subagents(&mut self, parent: Option<&str>) -> Result<Vec<Subagent>, Error> {
        let mut query = self.sql.prepare_cached(&format!(
            "{COLUMNS} WHERE s.state != 'retired' AND (?2 IS NULL OR s.parent = ?2)
             ORDER BY s.rowid"
        ))?;
        let rows = query.query_map(params![CONVERSATION_PREFIX, parent], record)?;
        rows.map(|r| Ok(r?.0.status)).collect()
    }

    fn subagents_stopped(&mut self, error: &str) -> Result<Vec<String>, Error> {
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let ids: Vec<String> = tx
            .prepare_cached("SELECT id FROM subagents WHERE state = 'running' ORDER BY rowid")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        tx.prepare_cached(
            "UPDATE subagents SET state = 'failed', error = ?1 WHERE state = 'running'",
        )?
        .execute(params![error])?;
        tx.commit()?;
        Ok(ids)
    }
}

impl Store {
    /// Runs a subagent for `parent` working on `goal` (into its inbox, from `parent`) with
    /// `spec`, each run of it taking at most `run`, at `at_ms`: its id. At most
    /// [`RUNNING_MAX`] run at once ([`Error::TooMany`]).
    pub(crate) fn subagent_run(
        &self,
        parent: &str,
        goal: &str,
        spec: Spec,
        run: Duration,
        at_ms: i64,
    ) -> impl Future<Output = Result<String, Error>> + Send + use<> {
        let (parent, goal) = (parent.to_owned(), goal.to_owned());
        self.run(move |db| db.subagent_run(&parent, &goal, &spec, run, at_ms))
    }

    /// Sends `text` from `from` into subagent `id`'s inbox at `at_ms`: its record now, and
    /// whether it was settled and runs again (its deadline afresh). A retired one is
    /// unknown.
    pub(crate) fn subagent_send(
        &self,
        id: &str,
        from: &str,
        text: &str,
        at_ms: i64,
    ) -> impl Future<Output = Result<(Record, bool), Error>> + Send + use<> {
        let (id, from, text) = (id.to_owned(), from.to_owned(), text.to_owned());
        self.run(move |db| db.subagent_send(&id, &from, &text, at_ms))
    }

    /// Settles running subagent `id` as `settled` says: whether it did (not when it was
    /// killed meanwhile, nor as `finished` while its inbox holds messages no turn took).
    pub(crate) fn subagent_settle(
        &self,
        id: &str,
        settled: Settled,
    ) -> impl Future<Output = Result<bool, Error>> + Send + use<> {
        let id = id.to_owned();
        self.run(move |db| db.subagent_settle(&id, &settled))
    }

    /// Kills subagent `id` when it runs: its record now, and whether it ran.
    pub(crate) fn subagent_kill(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<(Record, bool), Error>> + Send + use<> {
        let id = id.to_owned();
        self.run(move |db| db.subagent_kill(&id))
    }

    /// Retires settled subagent `id` ([`Error::Running`] while it runs).
    pub(crate) fn subagent_retire(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Record, Error>> + Send + use<> {
        let id = id.to_owned();
        self.run(move |db| db.subagent_retire(&id))
    }

    /// Subagent `id`, a retired one's included.
    pub(crate) fn subagent(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Record, Error>> + Send + use<> {
        let id = id.to_owned();
        self.run(move |db| db.subagent(&id))
    }

    /// The subagents of `parent` (every parent's when `None`), retired ones left out, in
    /// the order they were run.
    pub(crate) fn subagents(
        &self,
        parent: Option<&str>,
    ) -> impl Future<Output = Result<Vec<Subagent>, Error>> + Send + use<> {
        let parent = parent.map(str::to_owned);
        self.run(move |db| db.subagents(parent.as_deref()))
    }

    /// Every running subagent fails, `error` saying why (nothing runs them any more: the
    /// daemon started, the agent stopped): their ids.
    pub(crate) fn subagents_stopped(
        &self,
        error: &str,
    ) -> impl Future<Output = Result<Vec<String>, Error>> + Send + use<> {
        let error = error.to_owned();
        self.run(move |db| db.subagents_stopped(&error))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Limits, scratch};
    use super::*;

    fn settled(state: State, answer: Option<&str>) -> Settled {
        Settled {
            state,
            answer: answer.map(str::to_owned),
            error: None,
        }
    }

    #[tokio::test]
    async fn a_subagent_runs_settles_runs_again_and_retires() {
        let (_dir, store) = scratch().await;
        let spec = Spec {
            tools: Some(vec!["memory.*".into()]),
            servers: Some(vec!["docs".into()]),
        };
        let run = Duration::from_secs(60);
        let id = store.subagent_run("conversation:root", "Sum it.", spec.clone(), run, 1_000);
        let id = id.await.unwrap();
        assert_eq!(id, "s1");
        let found = store.subagent("s1").await.unwrap();
        assert_eq!((found.spec, found.run), (spec, run));
        let status = found.status;
        assert_eq!(
            (status.state, status.deadline_ms, status.started_ms),
            (State::Running, Some(61_000), 1_000)
        );
        // The goal is the first message of its conversation.
        let inbox = store.messages("subagent:s1", 0, 10).await.unwrap();
        assert_eq!(
            (inbox[0].sender.as_str(), inbox[0].text.as_str()),
            ("conversation:root", "Sum it.")
        );

        // Not finished while a message waits: its next turn is due.
        assert!(
            !store
                .subagent_settle("s1", settled(State::Finished, Some("6")))
                .await
                .unwrap()
        );
        store
            .turn_start("subagent:s1", 1, &["goal"], 2_000)
            .await
            .unwrap();
        store.conversation_tokens("subagent:s1", 7).await.unwrap();
        assert!(
            store
                .subagent_settle("s1", settled(State::Finished, Some("6")))
                .await
                .unwrap()
        );
        let status = store.subagent("s1").await.unwrap().status;
        assert_eq!(
            (
                status.state,
                status.answer.as_deref(),
                status.turns,
                status.tokens
            ),
            (State::Finished, Some("6"), 1, 7)
        );
        // Settled already: a settle changes nothing.
        assert!(
            !store
                .subagent_settle("s1", settled(State::Failed, None))
                .await
                .unwrap()
        );
        assert_eq!(
            store.subagent_retire("s2").await.unwrap_err().code(),
            "unknown_subagent"
        );

        // A message runs it again, its deadline afresh; its answer stays until the next.
        let (now, again) = store
            .subagent_send("s1", "operator", "And 7?", 5_000)
            .await
            .unwrap();
        assert!(again);
        assert_eq!(
            (now.status.state, now.status.deadline_ms),
            (State::Running, Some(65_000))
        );
        assert_eq!(now.status.answer.as_deref(), Some("6"));
        let (_, again) = store
            .subagent_send("s1", "operator", "And 8?", 5_001)
            .await
            .unwrap();
        assert!(!again, "running already");
        assert_eq!(
            store.subagent_retire("s1").await.unwrap_err().code(),
            "running"
        );
        let (killed, ran) = store.subagent_kill("s1").await.unwrap();
        assert!(ran);
        assert_eq!(killed.status.state, State::Killed);
        // Killed: a settle that comes after changes nothing, a second kill neither.
        assert!(
            !store
                .subagent_settle("s1", settled(State::Finished, Some("x")))
                .await
                .unwrap()
        );
        let (_, ran) = store.subagent_kill("s1").await.unwrap();
        assert!(!ran);
        assert_eq!(
            store
                .subagents(Some("conversation:root"))
                .await
                .unwrap()
                .len(),
            1
        );
        let retired = store.subagent_retire("s1").await.unwrap();
        assert_eq!(retired.status.state, State::Retired);
        // Retired: no longer listed or reached, its status still read.
        assert!(store.subagents(None).await.unwrap().is_empty());
        assert_eq!(
            store.subagent("s1").await.unwrap().status.state,
            State::Retired
        );
        let send = store.subagent_send("s1", "operator", "?", 6_000).await;
        assert_eq!(send.unwrap_err().code(), "unknown_subagent");
        assert_eq!(
            store.subagent_kill("s1").await.unwrap_err().code(),
            "unknown_subagent"
        );
    }

    #[tokio::test]
    async fn at_most_sixteen_run_at_once() {
        let (_dir, store) = scratch().await;
        let run = |n: usize| {
            let parent = if n.is_multiple_of(2) { "a" } else { "b" };
            store.subagent_run(parent, "g", Spec::default(), Duration::from_secs(1), 0)
        };
        for n in 0..RUNNING_MAX {
            run(n).await.unwrap();
        }
        let past = run(RUNNING_MAX).await.unwrap_err();
        assert_eq!(past.code(), "too_large");
        let refused = past.into_tool("subagent.run", "");
        assert_eq!(refused.to_value()["max"], RUNNING_MAX);
        assert_eq!(
            store.subagents(Some("a")).await.unwrap().len(),
            RUNNING_MAX / 2
        );
        // Those the daemon no longer runs fail: room again.
        let stopped = store.subagents_stopped("the daemon stopped").await.unwrap();
        assert_eq!(stopped.len(), RUNNING_MAX);
        let status = store.subagent("s3").await.unwrap().status;
        assert_eq!(
            (status.state, status.error.as_deref()),
            (State::Failed, Some("the daemon stopped"))
        );
        assert_eq!(run(0).await.unwrap(), format!("s{}", RUNNING_MAX + 1));
        // A goal past the store's bound is refused whole.
        let (_dir, small) = {
            let dir = tempfile::tempdir().unwrap();
            let limits = Limits { max_value_bytes: 4 };
            let store = Store::open(dir.path(), limits).await.unwrap();
            (dir, store)
        };
        let spec = Spec::default;
        let second = Duration::from_secs(1);
        assert!(
            small
                .subagent_run("a", "four", spec(), second, 0)
                .await
                .is_ok()
        );
        let past = small
            .subagent_run("a", "fives", spec(), second, 0)
            .await
            .unwrap_err();
        assert_eq!(past.code(), "too_large");
        assert_eq!(small.subagents(None).await.unwrap().len(), 1);
    }
}
