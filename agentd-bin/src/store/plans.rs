//! The plans: at most one per unit, a list of steps with a version that every change adds 1
//! to (a new plan is version 1; a cleared one is gone).

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

#[cfg(test)]
use agentd_tools::plan::Status as StepStatus;
pub(crate) use agentd_tools::plan::{Plan, Step, Update};

use super::db::{Db, check_len, from_sql, to_sql};
use super::error::Error;
use super::handle::Store;

// The tools' bounds, kept here too: the store takes nothing past them.
pub(crate) use agentd_tools::plan::{STEPS_MAX, TITLE_MAX};

/// The plan as kept in its row (the version has a column of its own).
#[derive(Serialize, Deserialize)]
struct Kept {
    steps: Vec<Step>,
}

/// `Invalid` unless `steps` are at most 100, each titled 1..=500 bytes.
fn check_steps(steps: &[Step]) -> Result<(), Error> {
    if steps.len() > STEPS_MAX {
        return Err(Error::invalid(
            "/steps",
            format!("at most {STEPS_MAX} steps, not {}", steps.len()),
        ));
    }
    for (i, step) in steps.iter().enumerate() {
        check_len(&format!("/steps/{i}/title"), &step.title, 1, TITLE_MAX)?;
    }
    Ok(())
}

/// `unit`'s plan, if it has one.
fn current(db: &Connection, unit: &str) -> Result<Option<Plan>, Error> {
    let row: Option<(String, i64)> = db
        .prepare_cached("SELECT plan, version FROM plans WHERE unit = ?1")?
        .query_row(params![unit], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    row.map(|(text, version)| {
        let kept: Kept = serde_json::from_str(&text).map_err(Error::Corrupt)?;
        Ok(Plan::new(kept.steps, from_sql(version)))
    })
    .transpose()
}

/// Keeps `plan` as `unit`'s.
fn write(db: &Connection, unit: &str, plan: Plan) -> Result<Plan, Error> {
    let kept = Kept { steps: plan.steps };
    let text = serde_json::to_string(&kept).map_err(Error::Corrupt)?;
    db.prepare_cached(
        "INSERT INTO plans (unit, plan, version) VALUES (?1, ?2, ?3)
         ON CONFLICT (unit) DO UPDATE SET plan = ?2, version = ?3",
    )?
    .execute(params![unit, text, to_sql(plan.version)])?;
    Ok(Plan::new(kept.steps, plan.version))
}

const NO_PLAN: Error = Error::NotFound { what: "plan" };

impl Db {
    fn plan_create(&mut self, unit: &str, steps: Vec<Step>) -> Result<Plan, Error> {
        check_steps(&steps)?;
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        if current(&tx, unit)?.is_some() {
            return Err(Error::Exists { what: "plan" });
        }
        let plan = write(&tx, unit, Plan::new(steps, 1))?;
        tx.commit()?;
        Ok(plan)
    }

    fn plan_update(&mut self, unit: &str, change: Update) -> Result<Plan, Error> {
        if let Update::Steps(steps) = &change {
            check_steps(steps)?;
        }
        let tx = self
            .sql
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut plan = current(&tx, unit)?.ok_or(NO_PLAN)?;
        match change {
            Update::Steps(steps) => plan.steps = steps,
            Update::Step {
                index,
                status,
                title,
            } => {
                let step = plan
                    .steps
                    .get_mut(index)
                    .ok_or(Error::NotFound { what: "step" })?;
                if let Some(title) = title {
                    check_len("/title", &title, 1, TITLE_MAX)?;
                    step.title = title;
                }
                if let Some(status) = status {
                    step.status = status;
                }
            }
            _ => return Err(Error::invalid("", "an update this store does not make")),
        }
        plan.version += 1;
        let plan = write(&tx, unit, plan)?;
        tx.commit()?;
        Ok(plan)
    }

    fn plan_clear(&mut self, unit: &str) -> Result<bool, Error> {
        let cleared = self
            .sql
            .prepare_cached("DELETE FROM plans WHERE unit = ?1")?
            .execute(params![unit])?;
        Ok(cleared > 0)
    }
}

impl Store {
    /// `plan.create`: `unit`'s plan of `steps`, version 1; [`Error::Exists`] when it has one.
    pub(crate) fn plan_create(
        &self,
        unit: &str,
        steps: Vec<Step>,
    ) -> impl Future<Output = Result<Plan, Error>> + Send + use<> {
        let unit = unit.to_owned();
        self.run(move |db| db.plan_create(&unit, steps))
    }

    /// `plan.get`: `unit`'s plan, if it has one.
    pub(crate) fn plan_get(
        &self,
        unit: &str,
    ) -> impl Future<Output = Result<Option<Plan>, Error>> + Send + use<> {
        let unit = unit.to_owned();
        self.run(move |db| current(&db.sql, &unit))
    }

    /// `plan.update`: `unit`'s plan changed, its version one more; [`Error::NotFound`] when
    /// it has none, or no step of that index.
    pub(crate) fn plan_update(
        &self,
        unit: &str,
        change: Update,
    ) -> impl Future<Output = Result<Plan, Error>> + Send + use<> {
        let unit = unit.to_owned();
        self.run(move |db| db.plan_update(&unit, change))
    }

    /// `plan.clear`: deletes `unit`'s plan; whether it had one.
    pub(crate) fn plan_clear(
        &self,
        unit: &str,
    ) -> impl Future<Output = Result<bool, Error>> + Send + use<> {
        let unit = unit.to_owned();
        self.run(move |db| db.plan_clear(&unit))
    }
}

#[cfg(test)]
mod tests {
    use super::super::scratch;
    use super::*;

    fn steps(titles: &[&str]) -> Vec<Step> {
        titles
            .iter()
            .map(|t| Step::new(t, StepStatus::Pending))
            .collect()
    }

    #[tokio::test]
    async fn create_get_update_clear() {
        let (_dir, store) = scratch().await;
        assert_eq!(store.plan_get("u").await.unwrap(), None);
        let plan = store.plan_create("u", steps(&["a", "b"])).await.unwrap();
        assert_eq!((plan.steps.len(), plan.version), (2, 1));
        let e = store.plan_create("u", steps(&["c"])).await.unwrap_err();
        assert!(matches!(e, Error::Exists { what: "plan" }), "{e:?}");
        assert_eq!(e.code(), "exists");

        let change = Update::Step {
            index: 1,
            status: Some(StepStatus::InProgress),
            title: None,
        };
        let plan = store.plan_update("u", change).await.unwrap();
        assert_eq!(plan.steps[1].status, StepStatus::InProgress);
        assert_eq!((plan.steps[1].title.as_str(), plan.version), ("b", 2));
        let change = Update::Step {
            index: 0,
            status: Some(StepStatus::Done),
            title: Some("A".into()),
        };
        store.plan_update("u", change).await.unwrap();
        let plan = store.plan_get("u").await.unwrap().unwrap();
        assert_eq!(plan.steps[0], Step::new("A", StepStatus::Done));
        assert_eq!(plan.version, 3);
        let plan = store
            .plan_update("u", Update::Steps(steps(&["x"])))
            .await
            .unwrap();
        assert_eq!((plan.steps, plan.version), (steps(&["x"]), 4));
        assert_eq!(
            serde_json::to_value(store.plan_get("u").await.unwrap()).unwrap(),
            serde_json::json!({"steps": [{"title": "x", "status": "pending"}], "version": 4})
        );

        // A step that is not there: refused, nothing changed.
        let change = Update::Step {
            index: 1,
            status: Some(StepStatus::Failed),
            title: None,
        };
        let e = store.plan_update("u", change).await.unwrap_err();
        assert!(matches!(e, Error::NotFound { what: "step" }), "{e:?}");
        assert_eq!(store.plan_get("u").await.unwrap().unwrap().version, 4);

        assert!(store.plan_clear("u").await.unwrap());
        assert!(!store.plan_clear("u").await.unwrap());
        assert_eq!(store.plan_get("u").await.unwrap(), None);
        let e = store
            .plan_update("u", Update::Steps(Vec::new()))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::NotFound { what: "plan" }), "{e:?}");
        // Another plan begins at version 1.
        assert_eq!(store.plan_create("u", Vec::new()).await.unwrap().version, 1);
    }

    #[tokio::test]
    async fn steps_and_titles_are_bounded() {
        let (_dir, store) = scratch().await;
        let most = vec!["t"; STEPS_MAX];
        store.plan_create("u", steps(&most)).await.unwrap();
        let too_many = vec!["t"; STEPS_MAX + 1];
        let e = store.plan_create("v", steps(&too_many)).await.unwrap_err();
        assert!(
            matches!(&e, Error::Invalid { pointer, .. } if pointer == "/steps"),
            "{e:?}"
        );
        let e = store
            .plan_update("u", Update::Steps(steps(&too_many)))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Error::Invalid { pointer, .. } if pointer == "/steps"),
            "{e:?}"
        );

        let at = "t".repeat(TITLE_MAX);
        let past = "t".repeat(TITLE_MAX + 1);
        store.plan_create("w", steps(&[&at])).await.unwrap();
        for bad in [past.as_str(), ""] {
            let e = store
                .plan_create("x", steps(&["ok", bad]))
                .await
                .unwrap_err();
            assert!(
                matches!(&e, Error::Invalid { pointer, .. } if pointer == "/steps/1/title"),
                "{e:?}"
            );
            let change = Update::Step {
                index: 0,
                status: Some(StepStatus::Done),
                title: Some(bad.to_owned()),
            };
            let e = store.plan_update("w", change).await.unwrap_err();
            assert!(
                matches!(&e, Error::Invalid { pointer, .. } if pointer == "/title"),
                "{e:?}"
            );
        }
        // Nothing of the refused changes was kept.
        assert_eq!(store.plan_get("x").await.unwrap(), None);
        let plan = store.plan_get("w").await.unwrap().unwrap();
        assert_eq!((plan.steps, plan.version), (steps(&[&at]), 1));
    }
}
