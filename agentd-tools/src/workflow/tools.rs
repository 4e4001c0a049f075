//! The `workflow.*` tools: their arguments read, their calls into [`Workflows`], their answers.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::definition::Definition;
use super::run::{Record, Status};
use super::service::{Command, Defined, Filter, Workflows};
use crate::Error;
use crate::schema::parse;
use crate::wait::{self, Clock, Woke};

/// The page of `workflow.list` when the call says nothing.
pub const LIST_DEFAULT: usize = 50;
/// The largest page of `workflow.list`.
pub const LIST_MAX: usize = 100;
/// `workflow.wait`'s timeout when the call says nothing.
pub const WAIT_DEFAULT: Duration = wait::AWAIT_DEFAULT;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Define {
    name: String,
    definition: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Name {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Start {
    workflow: String,
    input: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Of {
    run: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Until {
    run: String,
    timeout: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Signalled {
    run: String,
    signal: String,
    payload: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct List {
    workflow: Option<String>,
    status: Option<String>,
    after: Option<String>,
    limit: Option<usize>,
}

/// Runs workflow tool `tool` for `unit`, its arguments checked against its schema.
pub(crate) async fn call(
    workflows: &impl Workflows,
    clock: &impl Clock,
    unit: &str,
    tool: &str,
    arguments: Value,
) -> Result<Value, Error> {
    let defined =
        |d: Defined| json!({"workflow": d.workflow, "version": d.version, "steps": d.steps});
    match tool {
        "workflow.create" | "workflow.update" => {
            let Define { name, definition } = parse(tool, arguments)?;
            let definition =
                Definition::parse(&name, &definition).map_err(|e| match e.pointer {
                    // The name is not inside the definition.
                    ref p if p.is_empty() && e.rule == "name" => {
                        Error::invalid(tool, "/name", e.rule, e.to_string())
                    }
                    _ => e.to_tool_error(tool),
                })?;
            let made = match tool {
                "workflow.create" => workflows.create(definition).await?,
                _ => workflows.update(definition).await?,
            };
            Ok(defined(made))
        }
        "workflow.delete" => {
            let Name { name } = parse(tool, arguments)?;
            Ok(json!({"deleted": workflows.delete(&name).await?}))
        }
        "workflow.run" => {
            let Start { workflow, input } = parse(tool, arguments)?;
            let input = input.unwrap_or_else(|| json!({}));
            Ok(workflows.run(&workflow, input, unit).await?.to_value())
        }
        "workflow.status" => {
            let Of { run } = parse(tool, arguments)?;
            Ok(workflows.status(&run).await?.to_value())
        }
        "workflow.list" => {
            let args: List = parse(tool, arguments)?;
            let status = match args.status.as_deref() {
                None => None,
                Some(name) => Some(Status::parse(name).ok_or_else(|| {
                    Error::invalid(
                        tool,
                        "/status",
                        "enum",
                        "running, paused, completed, failed or cancelled",
                    )
                })?),
            };
            let limit = args.limit.unwrap_or(LIST_DEFAULT);
            if limit > LIST_MAX {
                return Err(Error::TooLarge {
                    what: "limit",
                    size: limit,
                    max: LIST_MAX,
                });
            }
            let filter = Filter {
                workflow: args.workflow,
                status,
                after: args.after,
                limit,
            };
            let page = workflows.list(filter).await?;
            let next = match (page.more, page.runs.last()) {
                (true, Some(last)) => json!(last.id),
                _ => Value::Null,
            };
            let runs: Vec<Value> = page.runs.iter().map(Record::summary).collect();
            Ok(json!({"runs": runs, "next": next}))
        }
        "workflow.wait" => {
            let Until { run, timeout } = parse(tool, arguments)?;
            let timeout = match &timeout {
                Some(t) => wait::duration(tool, "/timeout", t)?,
                None => WAIT_DEFAULT,
            };
            settled(workflows, clock, &run, timeout).await
        }
        _ => {
            let (run, command) = match tool {
                "workflow.signal" => {
                    let Signalled {
                        run,
                        signal,
                        payload,
                    } = parse(tool, arguments)?;
                    let payload = payload.unwrap_or(Value::Null);
                    (
                        run,
                        Command::Signal {
                            name: signal,
                            payload,
                        },
                    )
                }
                _ => {
                    let Of { run } = parse(tool, arguments)?;
                    let command = match tool {
                        "workflow.cancel" => Command::Cancel,
                        "workflow.pause" => Command::Pause,
                        _ => Command::Resume,
                    };
                    (run, command)
                }
            };
            Ok(workflows.command(&run, command).await?.to_value())
        }
    }
}

/// Run `run` once it ended, or as it is once `timeout` passed first.
async fn settled(
    workflows: &impl Workflows,
    clock: &impl Clock,
    run: &str,
    timeout: Duration,
) -> Result<Value, Error> {
    let millis = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let deadline = clock.now_ms().saturating_add(millis(timeout));
    loop {
        let record = workflows.status(run).await?;
        let left = deadline.saturating_sub(clock.now_ms());
        if record.status.settled() || left <= 0 {
            return Ok(record.to_value());
        }
        let left = Duration::from_millis(u64::try_from(left).unwrap_or(0));
        if clock.changed(left).await == Woke::ShuttingDown {
            return Err(Error::ShuttingDown);
        }
    }
}
