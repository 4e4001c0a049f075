//! Workflows: the definitions made at runtime (`workflow.create`, each with a version that
//! every update adds 1 to), and every run with every step as it stands (a run's record,
//! [`Record`], a row of `workflow_runs` and one row of `workflow_steps` per step), written
//! whole in one transaction at each change, so that a run is resumed at its step after a
//! restart.

use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};
use serde::Serialize;
use serde_json::Value;

use agentd_tools::workflow::{Filter, Page, Record, Status};

use super::db::{Db, from_sql, to_sql};
use super::error::Error;
use super::handle::Store;
use super::starts::{Start, advance};

/// A definition made at runtime: its body and version.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Defined {
    /// The definition's body.
    pub(crate) body: Value,
    /// Its version: 1 when created, one more at each update.
    pub(crate) version: u64,
}

fn json<T: Serialize>(value: &T) -> Result<String, Error> {
    serde_json::to_string(value).map_err(Error::Corrupt)
}

/// A JSON column's text as the value it holds (`null` for none).
fn value(text: Option<&str>) -> Result<Value, Error> {
    text.map_or(Ok(Value::Null), |t| {
        serde_json::from_str(t).map_err(Error::Corrupt)
    })
}

/// The columns of a run's row, in the order [`Kept::read`] reads them.
const RUN_COLUMNS: &str = "id, workflow, definition, input, started_by, status, step, signals, \
     output, error, step_timeout, started, updated, ended";

/// A run's row as read, before its JSON columns are.
struct Kept {
    id: String,
    workflow: String,
    definition: String,
    input: String,
    by: String,
    status: String,
    step: i64,
    signals: String,
    output: Option<String>,
    error: Option<String>,
    step_timeout: i64,
    started: i64,
    updated: i64,
    ended: Option<i64>,
}

impl Kept {
    /// A row of [`RUN_COLUMNS`].
    fn read(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            workflow: row.get(1)?,
            definition: row.get(2)?,
            input: row.get(3)?,
            by: row.get(4)?,
            status: row.get(5)?,
            step: row.get(6)?,
            signals: row.get(7)?,
            output: row.get(8)?,
            error: row.get(9)?,
            step_timeout: row.get(10)?,
            started: row.get(11)?,
            updated: row.get(12)?,
            ended: row.get(13)?,
        })
    }

    /// The run this row keeps, with `steps`.
    fn record(self, steps: Vec<Value>) -> Result<Record, Error> {
        let record = serde_json::json!({
            "id": self.id,
            "workflow": self.workflow,
            "definition": value(Some(&self.definition))?,
            "input": value(Some(&self.input))?,
            "by": self.by,
            "status": self.status,
            "step": self.step,
            "steps": steps,
            "signals": value(Some(&self.signals))?,
            "output": value(self.output.as_deref())?,
            "error": value(self.error.as_deref())?,
            "step_timeout_ms": self.step_timeout,
            "started_ms": self.started,
            "updated_ms": self.updated,
            "ended_ms": self.ended,
        });
        serde_json::from_value(record).map_err(Error::Corrupt)
    }
}

/// The steps of run `id`, in order, as the JSON of their records.
fn steps(db: &Connection, id: &str) -> Result<Vec<Value>, Error> {
    let mut statement = db.prepare_cached(
        "SELECT step, status, attempt, failures, idempotency_key, watched, started, due,
                output, error, ended
         FROM workflow_steps WHERE run = ?1 ORDER BY idx",
    )?;
    let mut rows = statement.query(params![id])?;
    let mut steps = Vec::new();
    while let Some(row) = rows.next()? {
        let text = |i| row.get::<_, Option<String>>(i);
        steps.push(serde_json::json!({
            "id": row.get::<_, String>(0)?,
            "status": row.get::<_, String>(1)?,
            "attempt": row.get::<_, i64>(2)?,
            "failures": row.get::<_, i64>(3)?,
            "idempotency_key": text(4)?,
            "watched": value(text(5)?.as_deref())?,
            "started_ms": row.get::<_, Option<i64>>(6)?,
            "due_ms": row.get::<_, Option<i64>>(7)?,
            "output": value(text(8)?.as_deref())?,
            "error": value(text(9)?.as_deref())?,
            "ended_ms": row.get::<_, Option<i64>>(10)?,
        }));
    }
    Ok(steps)
}

/// The runs of the rows `sql` selects (with `args`), each with its steps.
fn runs(db: &Connection, sql: &str, args: impl rusqlite::Params) -> Result<Vec<Record>, Error> {
    let kept: Vec<Kept> = db
        .prepare_cached(sql)?
        .query_map(args, Kept::read)?
        .collect::<rusqlite::Result<_>>()?;
    kept.into_iter()
        .map(|k| {
            let steps = steps(db, &k.id)?;
            k.record(steps)
        })
        .collect()
}

/// Run `id`, if there is one.
fn run(db: &Connection, id: &str) -> Result<Option<Record>, Error> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM workflow_runs WHERE id = ?1");
    Ok(runs(db, &sql, params![id])?.pop())
}

impl Db {
    fn workflow_define(&mut self, name: &str, body: &Value, create: bool) -> Result<u64, Error> {
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let version: Option<i64> = tx
            .prepare_cached("SELECT version FROM workflows WHERE name = ?1")?
            .query_row(params![name], |r| r.get(0))
            .optional()?;
        let version = match (version, create) {
            (Some(_), true) => return Err(Error::Exists { what: "workflow" }),
            (None, false) => return Err(Error::NotFound { what: "workflow" }),
            (Some(v), false) => from_sql(v) + 1,
            (None, true) => 1,
        };
        tx.prepare_cached(
            "INSERT INTO workflows (name, definition, version) VALUES (?1, ?2, ?3)
             ON CONFLICT (name) DO UPDATE SET definition = ?2, version = ?3",
        )?
        .execute(params![name, json(body)?, to_sql(version)])?;
        tx.commit()?;
        Ok(version)
    }

    fn workflow_get(&mut self, name: &str) -> Result<Option<Defined>, Error> {
        let row: Option<(String, i64)> = self
            .sql
            .prepare_cached("SELECT definition, version FROM workflows WHERE name = ?1")?
            .query_row(params![name], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        row.map(|(body, version)| {
            Ok(Defined {
                body: value(Some(&body))?,
                version: from_sql(version),
            })
        })
        .transpose()
    }

    fn workflows_defined(&mut self) -> Result<Vec<(String, Value)>, Error> {
        let mut statement = self
            .sql
            .prepare_cached("SELECT name, definition FROM workflows ORDER BY name")?;
        let rows = statement.query_map([], |r| Ok((r.get(0)?, r.get::<_, String>(1)?)))?;
        rows.map(|row| {
            let (name, body) = row?;
            Ok((name, value(Some(&body))?))
        })
        .collect()
    }

    fn workflow_delete(&mut self, name: &str) -> Result<bool, Error> {
        let deleted = self
            .sql
            .prepare_cached("DELETE FROM workflows WHERE name = ?1")?
            .execute(params![name])?;
        Ok(deleted > 0)
    }

    /// Keeps `record`; and, when `started` says which start took which occurrence to start
    /// it, moves that start past it, in the same transaction.
    pub(super) fn run_save(
        &mut self,
        record: &Record,
        started: Option<(&Start, i64)>,
    ) -> Result<(), Error> {
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.prepare_cached(
            "INSERT INTO workflow_runs (id, workflow, definition, input, started_by, status,
                 step, signals, output, error, step_timeout, started, updated, ended)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
             ON CONFLICT (id) DO UPDATE SET status = ?6, step = ?7, signals = ?8, output = ?9,
                 error = ?10, updated = ?13, ended = ?14",
        )?
        .execute(params![
            record.id,
            record.workflow,
            json(&record.definition)?,
            json(&record.input)?,
            record.by,
            record.status.as_str(),
            i64::try_from(record.step).unwrap_or(i64::MAX),
            json(&record.signals)?,
            record.output.as_ref().map(json).transpose()?,
            record.error.as_ref().map(json).transpose()?,
            to_sql(record.step_timeout_ms),
            record.started_ms,
            record.updated_ms,
            record.ended_ms,
        ])?;
        let mut write = tx.prepare_cached(
            "INSERT INTO workflow_steps (run, idx, step, status, attempt, failures,
                 idempotency_key, watched, started, due, output, error, ended)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
             ON CONFLICT (run, idx) DO UPDATE SET status = ?4, attempt = ?5, failures = ?6,
                 idempotency_key = ?7, watched = ?8, started = ?9, due = ?10, output = ?11,
                 error = ?12, ended = ?13",
        )?;
        for (i, step) in record.steps.iter().enumerate() {
            write.execute(params![
                record.id,
                i64::try_from(i).unwrap_or(i64::MAX),
                step.id,
                step.status.as_str(),
                i64::from(step.attempt),
                i64::from(step.failures),
                step.idempotency_key,
                step.watched.as_ref().map(json).transpose()?,
                step.started_ms,
                step.due_ms,
                step.output.as_ref().map(json).transpose()?,
                step.error.as_ref().map(json).transpose()?,
                step.ended_ms,
            ])?;
        }
        drop(write);
        if let Some((start, position)) = started {
            advance(&tx, start, position)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Deletes at most `batch` of the runs that ended before `since` (Unix ms), those that
    /// ended first, with their steps: how many.
    fn runs_prune(&mut self, since: i64, batch: usize) -> Result<usize, Error> {
        let batch = i64::try_from(batch).unwrap_or(i64::MAX);
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let ids: Vec<String> = tx
            .prepare_cached(
                "SELECT id FROM workflow_runs WHERE ended IS NOT NULL AND ended < ?1
                 ORDER BY ended LIMIT ?2",
            )?
            .query_map(params![since, batch], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        for id in &ids {
            tx.prepare_cached("DELETE FROM workflow_steps WHERE run = ?1")?
                .execute(params![id])?;
            tx.prepare_cached("DELETE FROM workflow_runs WHERE id = ?1")?
                .execute(params![id])?;
        }
        tx.commit()?;
        Ok(ids.len())
    }

    fn runs_list(&mut self, filter: &Filter) -> Result<Page, Error> {
        let after: i64 = match filter.after.as_deref().map(cursor) {
            None => 0,
            Some(Cursor::Seq(seq)) => seq,
            Some(Cursor::Run(id)) => self
                .sql
                .prepare_cached("SELECT seq FROM workflow_runs WHERE id = ?1")?
                .query_row(params![id], |r| r.get(0))
                .optional()?
                .ok_or(Error::NotFound { what: "run" })?,
        };
        let limit = i64::try_from(filter.limit).unwrap_or(i64::MAX);
        let mut found = runs(
            &self.sql,
            &format!(
                "SELECT {RUN_COLUMNS} FROM workflow_runs
                 WHERE seq > ?1 AND (?2 IS NULL OR workflow = ?2) AND (?3 IS NULL OR status = ?3)
                 ORDER BY seq LIMIT ?4"
            ),
            params![
                after,
                filter.workflow,
                filter.status.map(Status::as_str),
                limit.saturating_add(1)
            ],
        )?;
        let more = found.len() > filter.limit;
        found.truncate(filter.limit);
        let next = match (more, found.last()) {
            (true, Some(last)) => {
                let seq: i64 = self
                    .sql
                    .prepare_cached("SELECT seq FROM workflow_runs WHERE id = ?1")?
                    .query_row(params![last.id], |r| r.get(0))?;
                Some(format!("{SEQ_CURSOR}{seq}"))
            }
            _ => None,
        };
        Ok(Page::with_next(found, next))
    }
}

/// How a `workflow.list` cursor the store hands out begins: the `seq` of the last run of
/// its page follows, so that it holds when that run is pruned. Run ids are hex digits only.
const SEQ_CURSOR: &str = "s:";

/// Where a page of `workflow.list` begins after.
enum Cursor<'a> {
    /// The store's own cursor: after this `seq`.
    Seq(i64),
    /// After this run.
    Run(&'a str),
}

/// The cursor `after` is: the store's own when it parses as one, else a run id.
fn cursor(after: &str) -> Cursor<'_> {
    let seq = after.strip_prefix(SEQ_CURSOR).and_then(|s| s.parse().ok());
    seq.map_or(Cursor::Run(after), Cursor::Seq)
}

impl Store {
    /// `workflow.create` (`create`) or `workflow.update`: keeps `body` as workflow `name`'s
    /// definition; its version. [`Error::Exists`] when creating one there is,
    /// [`Error::NotFound`] when updating one there is not.
    pub(crate) fn workflow_define(
        &self,
        name: &str,
        body: Value,
        create: bool,
    ) -> impl Future<Output = Result<u64, Error>> + Send + use<> {
        let name = name.to_owned();
        self.run(move |db| db.workflow_define(&name, &body, create))
    }

    /// Workflow `name`'s definition made at runtime, if there is one.
    pub(crate) fn workflow_get(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<Defined>, Error>> + Send + use<> {
        let name = name.to_owned();
        self.run(move |db| db.workflow_get(&name))
    }

    /// Every workflow made at runtime, by name: its body.
    pub(crate) fn workflows_defined(
        &self,
    ) -> impl Future<Output = Result<Vec<(String, Value)>, Error>> + Send + use<> {
        self.run(move |db| db.workflows_defined())
    }

    /// `workflow.delete`: whether there was one.
    pub(crate) fn workflow_delete(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<bool, Error>> + Send + use<> {
        let name = name.to_owned();
        self.run(move |db| db.workflow_delete(&name))
    }

    /// Keeps `record` as its run stands now, with every step, in one transaction.
    pub(crate) fn run_save(
        &self,
        record: Record,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<> {
        self.run(move |db| db.run_save(&record, None))
    }

    /// Run `id` as kept, if there is one.
    pub(crate) fn run_get(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<Record>, Error>> + Send + use<> {
        let id = id.to_owned();
        self.run(move |db| run(&db.sql, &id))
    }

    /// The runs that did not end (running or paused), oldest first.
    pub(crate) fn runs_unsettled(
        &self,
    ) -> impl Future<Output = Result<Vec<Record>, Error>> + Send + use<> {
        self.run(|db| {
            runs(
                &db.sql,
                &format!(
                    "SELECT {RUN_COLUMNS} FROM workflow_runs
                     WHERE status IN ('running', 'paused') ORDER BY seq"
                ),
                [],
            )
        })
    }

    /// Prunes at most `batch` of the runs that ended before `since` (Unix ms), those that
    /// ended first, with their steps: how many.
    pub(crate) fn runs_prune(
        &self,
        since: i64,
        batch: usize,
    ) -> impl Future<Output = Result<usize, Error>> + Send + use<> {
        self.run(move |db| db.runs_prune(since, batch))
    }

    /// The runs `filter` wants, oldest first, with the cursor of the page after them (the
    /// `seq` of the last, which holds when that run is pruned); `after` is such a cursor or a
    /// run id, [`Error::NotFound`] when it is an id of no run.
    pub(crate) fn runs_list(
        &self,
        filter: Filter,
    ) -> impl Future<Output = Result<Page, Error>> + Send + use<> {
        self.run(move |db| db.runs_list(&filter))
    }
}

#[cfg(test)]
mod tests {
    use agentd_tools::workflow::Definition;
    use agentd_tools::workflow::run::{Action, Failure, Limits, Run};
    use serde_json::json;

    use super::super::scratch;
    use super::*;

    #[tokio::test]
    async fn definitions_are_created_updated_and_deleted() {
        let (_dir, store) = scratch().await;
        let body = json!({"steps": [{"id": "a", "type": "wait", "on": {"duration": 1}}]});
        assert_eq!(store.workflow_get("w").await.unwrap(), None);
        let missing = store.workflow_define("w", body.clone(), false).await;
        assert!(matches!(missing, Err(Error::NotFound { what: "workflow" })));
        assert_eq!(
            store
                .workflow_define("w", body.clone(), true)
                .await
                .unwrap(),
            1
        );
        let again = store.workflow_define("w", body.clone(), true).await;
        assert!(matches!(again, Err(Error::Exists { what: "workflow" })));
        assert_eq!(
            store
                .workflow_define("w", json!({"x": 1}), false)
                .await
                .unwrap(),
            2
        );
        let kept = store.workflow_get("w").await.unwrap().unwrap();
        assert_eq!((kept.body, kept.version), (json!({"x": 1}), 2));
        let all = store.workflows_defined().await.unwrap();
        assert_eq!(all, [("w".to_owned(), json!({"x": 1}))]);
        assert!(store.workflow_delete("w").await.unwrap());
        assert!(store.workflows_defined().await.unwrap().is_empty());
        assert!(!store.workflow_delete("w").await.unwrap());
    }

    #[tokio::test]
    async fn a_run_is_kept_whole_at_every_change() {
        let (_dir, store) = scratch().await;
        let body = json!({"steps": [
            {"id": "call", "type": "mcp.tool", "server": "s", "tool": "t", "retries": {"max": 2}},
            {"id": "watch", "type": "wait", "on": {"resource": {"server": "s", "uri": "u://x"}}},
        ]});
        let definition = Definition::parse("wf", &body).unwrap();
        let mut run = Run::start(
            "r1",
            definition,
            json!({"a": [1]}),
            "operator",
            Limits::default(),
            5,
        )
        .unwrap();
        assert!(matches!(run.poll_action(5), Some(Action::Execute(_))));
        store.run_save(run.record().clone()).await.unwrap();
        assert_eq!(
            store.run_get("r1").await.unwrap().as_ref(),
            Some(run.record())
        );
        run.handle_outcome(0, 1, Err(Failure::retryable("server", "down")), 6);
        run.signal("later", json!({"n": 1}), 7).unwrap();
        store.run_save(run.record().clone()).await.unwrap();
        assert_eq!(
            store.run_get("r1").await.unwrap().as_ref(),
            Some(run.record())
        );
        run.handle_timeout(1006);
        run.poll_action(1006);
        run.handle_outcome(0, 2, Ok(json!({"content": []})), 1007);
        assert!(matches!(
            run.poll_action(1007),
            Some(Action::Subscribe { .. })
        ));
        store.run_save(run.record().clone()).await.unwrap();
        let kept = store.run_get("r1").await.unwrap().unwrap();
        assert_eq!(&kept, run.record());
        assert!(kept.steps[1].watched.is_some());
        assert_eq!(store.runs_unsettled().await.unwrap(), vec![kept]);
        run.cancel(1008).unwrap();
        store.run_save(run.record().clone()).await.unwrap();
        assert_eq!(store.runs_unsettled().await.unwrap(), vec![]);
        assert_eq!(store.run_get("r2").await.unwrap(), None);
    }

    /// A run ended exactly at the bound is kept, one a millisecond before it is pruned with
    /// its steps; a run under way is kept however old.
    #[tokio::test]
    async fn ended_runs_before_the_bound_are_pruned_with_their_steps() {
        let (_dir, store) = scratch().await;
        let body =
            json!({"steps": [{"id": "a", "type": "wait", "on": {"signal": {"name": "go"}}}]});
        let definition = Definition::parse("w", &body).unwrap();
        for (id, ended) in [("past", Some(999)), ("at", Some(1000)), ("running", None)] {
            let mut run =
                Run::start(id, definition.clone(), json!({}), "u", Limits::default(), 0).unwrap();
            run.poll_action(0);
            if let Some(ended) = ended {
                run.cancel(ended).unwrap();
            }
            store.run_save(run.record().clone()).await.unwrap();
        }
        assert_eq!(
            store.run_get("past").await.unwrap().unwrap().ended_ms,
            Some(999)
        );
        assert_eq!(store.runs_prune(1000, 10).await.unwrap(), 1);
        assert_eq!(store.run_get("past").await.unwrap(), None);
        assert!(store.run_get("at").await.unwrap().is_some());
        assert!(store.run_get("running").await.unwrap().is_some());
        let db = store.run(|db| {
            let left: i64 = db.sql.query_row(
                "SELECT count(*) FROM workflow_steps WHERE run = 'past'",
                [],
                |r| r.get(0),
            )?;
            Ok(left)
        });
        assert_eq!(db.await.unwrap(), 0);
        assert_eq!(store.runs_prune(1001, 10).await.unwrap(), 1);
        assert!(store.run_get("running").await.unwrap().is_some());
    }

    /// A prune deletes at most its batch, the runs that ended first; the next takes the rest.
    #[tokio::test]
    async fn a_prune_deletes_one_batch_the_oldest_first() {
        let (_dir, store) = scratch().await;
        let body =
            json!({"steps": [{"id": "a", "type": "wait", "on": {"signal": {"name": "go"}}}]});
        let definition = Definition::parse("w", &body).unwrap();
        for (id, ended) in [("second", 20), ("first", 10), ("third", 30)] {
            let mut run =
                Run::start(id, definition.clone(), json!({}), "u", Limits::default(), 0).unwrap();
            run.cancel(ended).unwrap();
            store.run_save(run.record().clone()).await.unwrap();
        }
        assert_eq!(store.runs_prune(1000, 2).await.unwrap(), 2);
        assert_eq!(store.run_get("first").await.unwrap(), None);
        assert_eq!(store.run_get("second").await.unwrap(), None);
        assert!(store.run_get("third").await.unwrap().is_some());
        assert_eq!(store.runs_prune(1000, 2).await.unwrap(), 1);
        assert_eq!(store.runs_prune(1000, 2).await.unwrap(), 0);
    }

    /// The `next` of a page holds when the page's last run is pruned: the walk goes on.
    #[tokio::test]
    async fn a_page_cursor_outlives_the_run_it_follows() {
        let (_dir, store) = scratch().await;
        let body = json!({"steps": [{"id": "a", "type": "wait", "on": {"duration": 1}}]});
        let definition = Definition::parse("w", &body).unwrap();
        for (id, ended) in [("r1", 5), ("r2", 6), ("r3", 7)] {
            let mut run =
                Run::start(id, definition.clone(), json!({}), "u", Limits::default(), 0).unwrap();
            run.cancel(ended).unwrap();
            store.run_save(run.record().clone()).await.unwrap();
        }
        let page = store.runs_list(Filter::new(1)).await.unwrap();
        assert_eq!(page.runs[0].id, "r1");
        let next = page.next.clone().unwrap();
        assert_eq!(store.runs_prune(1000, 2).await.unwrap(), 2);
        let mut filter = Filter::new(1);
        filter.after = Some(next);
        let page = store.runs_list(filter).await.unwrap();
        let ids: Vec<&str> = page.runs.iter().map(|r| r.id.as_str()).collect();
        assert_eq!((ids, page.more), (vec!["r3"], false));
        assert_eq!(page.next, None);
    }

    #[tokio::test]
    async fn runs_are_listed_in_pages() {
        let (_dir, store) = scratch().await;
        let body = json!({"steps": [{"id": "a", "type": "wait", "on": {"duration": 1}}]});
        for (id, workflow) in [("r1", "a"), ("r2", "b"), ("r3", "a")] {
            let definition = Definition::parse(workflow, &body).unwrap();
            let run = Run::start(id, definition, json!({}), "u", Limits::default(), 0).unwrap();
            store.run_save(run.record().clone()).await.unwrap();
        }
        let ids = |page: &Page| page.runs.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
        let page = store.runs_list(Filter::new(2)).await.unwrap();
        assert_eq!(
            (ids(&page), page.more),
            (vec!["r1".into(), "r2".into()], true)
        );
        let mut filter = Filter::new(2);
        filter.after = Some("r2".into());
        let page = store.runs_list(filter.clone()).await.unwrap();
        assert_eq!((ids(&page), page.more), (vec!["r3".into()], false));
        filter.after = None;
        filter.workflow = Some("a".into());
        filter.limit = 1;
        let page = store.runs_list(filter.clone()).await.unwrap();
        assert_eq!((ids(&page), page.more), (vec!["r1".into()], true));
        filter.status = Some(Status::Cancelled);
        assert!(
            store
                .runs_list(filter.clone())
                .await
                .unwrap()
                .runs
                .is_empty()
        );
        filter.after = Some("nope".into());
        let missing = store.runs_list(filter).await;
        assert!(matches!(missing, Err(Error::NotFound { what: "run" })));
    }
}
