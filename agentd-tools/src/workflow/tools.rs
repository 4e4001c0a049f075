//! The `workflow.*` tools: their arguments read, their calls into [`Workflows`], their answers.

use serde::Deserialize;
use serde_json::{Value, json};

use super::definition::Definition;
use super::run::{Record, Status};
use super::service::{Command, Defined, Filter, Workflows};
use crate::Error;
use crate::schema::parse;

/// The page of `workflow.list` when the call says nothing.
pub const LIST_DEFAULT: usize = 50;
/// The largest page of `workflow.list`.
pub const LIST_MAX: usize = 100;

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

/// Runs workflow tool `tool` for `unit`, its arguments checked against its schema
/// (`workflow.wait` waits on the clock: [`crate::wait`] runs it).
pub(crate) async fn call(
    workflows: &impl Workflows,
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
            let next = page.next.as_deref().map_or(Value::Null, |n| json!(n));
            let runs: Vec<Value> = page.runs.iter().map(Record::summary).collect();
            Ok(json!({"runs": runs, "next": next}))
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
                        "workflow.resume" => Command::Resume,
                        _ => {
                            return Err(Error::UnknownTool {
                                tool: tool.to_owned(),
                            });
                        }
                    };
                    (run, command)
                }
            };
            Ok(workflows.command(&run, command).await?.to_value())
        }
    }
}
