//! Where each event start of a workflow stands in its stream: the position of the last
//! occurrence it took (a row of `workflow_starts`). A run an occurrence starts is kept in
//! the transaction that moves its start past that occurrence, so that an occurrence
//! appended before a crash starts its run after it, and no occurrence starts two.
//!
//! A start not seen before stands at its stream's end: it takes the occurrences appended
//! after it came into force. A start no longer in force (its workflow deleted, or gone at a
//! reload) is forgotten: one that comes back stands at its stream's end again.
//!
//! A subscribe start whose resource changed while the runs were at their bound is held (a
//! row of `workflow_held`, in the order they came) until its run starts, so that the change
//! outlives a restart.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use agentd_tools::workflow::Record;

use super::db::Db;
use super::error::Error;
use super::handle::Store;

/// An event start of a workflow on a stream.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Start {
    /// The workflow.
    pub(crate) workflow: String,
    /// Its start node.
    pub(crate) node: String,
    /// The stream it takes occurrences from.
    pub(crate) stream: String,
}

/// Moves `start` to `position`, in `tx`.
pub(super) fn advance(tx: &Connection, start: &Start, position: i64) -> Result<(), Error> {
    tx.prepare_cached(
        "INSERT INTO workflow_starts (workflow, node, stream, position) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (workflow, node, stream) DO UPDATE SET position = ?4",
    )?
    .execute(params![start.workflow, start.node, start.stream, position])?;
    Ok(())
}

impl Db {
    fn start_position(&mut self, start: &Start) -> Result<i64, Error> {
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let kept = tx
            .prepare_cached(
                "SELECT position FROM workflow_starts
                 WHERE workflow = ?1 AND node = ?2 AND stream = ?3",
            )?
            .query_row(params![start.workflow, start.node, start.stream], |r| {
                r.get(0)
            })
            .optional()?;
        if let Some(position) = kept {
            return Ok(position);
        }
        // The stream's end: the last record of MCP Events' table (migration 1).
        let end: i64 = tx
            .prepare_cached("SELECT IFNULL(MAX(seq), 0) FROM events WHERE stream = ?1")?
            .query_row(params![start.stream], |r| r.get(0))?;
        advance(&tx, start, end)?;
        tx.commit()?;
        Ok(end)
    }

    fn starts_keep(&mut self, kept: &[Start]) -> Result<(), Error> {
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let held: Vec<Start> = tx
            .prepare_cached("SELECT workflow, node, stream FROM workflow_starts")?
            .query_map([], |r| {
                Ok(Start {
                    workflow: r.get(0)?,
                    node: r.get(1)?,
                    stream: r.get(2)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        let mut forget = tx.prepare_cached(
            "DELETE FROM workflow_starts WHERE workflow = ?1 AND node = ?2 AND stream = ?3",
        )?;
        for gone in held.iter().filter(|s| !kept.contains(s)) {
            forget.execute(params![gone.workflow, gone.node, gone.stream])?;
        }
        drop(forget);
        tx.commit()?;
        Ok(())
    }

    fn start_held(&mut self, workflow: &str, node: &str) -> Result<(), Error> {
        self.sql
            .prepare_cached("INSERT OR IGNORE INTO workflow_held (workflow, node) VALUES (?1, ?2)")?
            .execute(params![workflow, node])?;
        Ok(())
    }

    fn start_let_go(&mut self, workflow: &str, node: &str) -> Result<(), Error> {
        self.sql
            .prepare_cached("DELETE FROM workflow_held WHERE workflow = ?1 AND node = ?2")?
            .execute(params![workflow, node])?;
        Ok(())
    }

    fn starts_held(&mut self) -> Result<Vec<(String, String)>, Error> {
        let held = self
            .sql
            .prepare_cached("SELECT workflow, node FROM workflow_held ORDER BY seq")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(held)
    }

    fn start_passed(&mut self, start: &Start, position: i64) -> Result<(), Error> {
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        advance(&tx, start, position)?;
        tx.commit()?;
        Ok(())
    }
}

impl Store {
    /// Where `start` stands in its stream: the position of the last occurrence it took;
    /// a start not seen before is kept at the stream's end, and stands there.
    pub(crate) fn start_position(
        &self,
        start: &Start,
    ) -> impl Future<Output = Result<i64, Error>> + Send + use<> {
        let start = start.clone();
        self.run(move |db| db.start_position(&start))
    }

    /// Forgets the positions of the starts not in `kept` (no longer in force).
    pub(crate) fn starts_keep(
        &self,
        kept: Vec<Start>,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<> {
        self.run(move |db| db.starts_keep(&kept))
    }

    /// Holds subscribe start `node` of `workflow`, whose change waits for room; one held
    /// already keeps its place.
    pub(crate) fn start_held(
        &self,
        workflow: &str,
        node: &str,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<> {
        let (workflow, node) = (workflow.to_owned(), node.to_owned());
        self.run(move |db| db.start_held(&workflow, &node))
    }

    /// Lets go of subscribe start `node` of `workflow`: its run started, or it is no longer
    /// in force.
    pub(crate) fn start_let_go(
        &self,
        workflow: &str,
        node: &str,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<> {
        let (workflow, node) = (workflow.to_owned(), node.to_owned());
        self.run(move |db| db.start_let_go(&workflow, &node))
    }

    /// The subscribe starts held, `(workflow, node)` in the order they came.
    pub(crate) fn starts_held(
        &self,
    ) -> impl Future<Output = Result<Vec<(String, String)>, Error>> + Send + use<> {
        self.run(|db| db.starts_held())
    }

    /// Moves `start` past the occurrence at `position` without a run (one that cannot
    /// start one).
    pub(crate) fn start_passed(
        &self,
        start: &Start,
        position: i64,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<> {
        let start = start.clone();
        self.run(move |db| db.start_passed(&start, position))
    }

    /// Keeps `record`, the run `start` starts with the occurrence at `position`, and moves
    /// `start` past it, in one transaction.
    pub(crate) fn run_started(
        &self,
        record: Record,
        start: &Start,
        position: i64,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<> {
        let start = start.clone();
        self.run(move |db| db.run_save(&record, Some((&start, position))))
    }
}

#[cfg(test)]
mod tests {
    use agentd_tools::workflow::Definition;
    use agentd_tools::workflow::run::{Limits, Run};
    use serde_json::json;

    use super::*;
    use crate::store::scratch;

    fn start(workflow: &str) -> Start {
        Start {
            workflow: workflow.to_owned(),
            node: "#0".to_owned(),
            stream: "alerts".to_owned(),
        }
    }

    /// A start not seen before stands at its stream's end and stays there; a run kept with
    /// an occurrence moves it, and so does an occurrence passed over.
    #[tokio::test]
    async fn a_start_stands_at_the_end_then_where_its_runs_moved_it() {
        let (_dir, store) = scratch().await;
        assert_eq!(store.start_position(&start("empty")).await.unwrap(), 0);
        let records = vec![b"{\"id\":\"e1\"}".to_vec(), b"{\"id\":\"e2\"}".to_vec()];
        store
            .save_document("doc", "{}", "alerts", records)
            .await
            .unwrap();
        let end = store.read("alerts", 0, 10).await.unwrap()[1].seq;
        let late = start("late");
        assert_eq!(store.start_position(&late).await.unwrap(), end);
        assert_eq!(store.start_position(&start("empty")).await.unwrap(), 0);

        let body = json!({"steps": [{"id": "a", "type": "wait", "on": {"duration": 1}}]});
        let definition = Definition::parse("empty", &body).unwrap();
        let run = Run::start("r1", definition, json!({}), "u", Limits::default(), 0).unwrap();
        let first = end - 1;
        store
            .run_started(run.record().clone(), &start("empty"), first)
            .await
            .unwrap();
        assert!(store.run_get("r1").await.unwrap().is_some());
        assert_eq!(store.start_position(&start("empty")).await.unwrap(), first);
        store.start_passed(&start("empty"), end).await.unwrap();
        assert_eq!(store.start_position(&start("empty")).await.unwrap(), end);

        // Out of force, forgotten: back, it stands at the end.
        store.start_passed(&late, first).await.unwrap();
        store.starts_keep(vec![start("empty")]).await.unwrap();
        assert_eq!(store.start_position(&late).await.unwrap(), end);
        store.start_passed(&start("empty"), first).await.unwrap();
        store.starts_keep(vec![start("empty")]).await.unwrap();
        assert_eq!(store.start_position(&start("empty")).await.unwrap(), first);
    }
}
