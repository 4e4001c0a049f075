//! `agentd workflow run` and `agentd workflow status`: workflow runs on the running daemon,
//! through its control socket (the tools `workflow.run` and `workflow.status`, called by an
//! operator acting as root).
//!
//! Exit statuses: 0 ok (the run as it stands printed as JSON); 1 the daemon could not answer;
//! 2 bad usage, or an input that is not JSON; 3 the daemon is not running; 4 no workflow or
//! run of that name; 6 the input does not fit the workflow's input schema (the message names
//! the JSON pointer and the rule).

use std::process::ExitCode;

use serde_json::{Value, json};

use super::daemon::{Codes, ask};
use crate::config::Config;
use crate::control::{Request, ToolCall};

/// The exit statuses of the daemon's refusals.
const CODES: Codes = &[
    ("not_found", 4),
    ("unknown_run", 4),
    ("invalid_arguments", 6),
];

/// `agentd workflow run NAME [INPUT]`: starts a run of `workflow` with `input` (JSON, `{}`
/// when not given); the run printed as JSON.
pub(crate) async fn workflow_run(config: &Config, workflow: &str, input: Option<&str>) -> ExitCode {
    let input: Value = match input.map(serde_json::from_str).transpose() {
        Ok(input) => input.unwrap_or_else(|| json!({})),
        Err(e) => {
            eprintln!("agentd: the input must be JSON: {e}");
            return ExitCode::from(2);
        }
    };
    call(
        config,
        "workflow.run",
        json!({"workflow": workflow, "input": input}),
    )
    .await
}

/// `agentd workflow status RUN`: the run as it stands, printed as JSON.
pub(crate) async fn workflow_status(config: &Config, run: &str) -> ExitCode {
    call(config, "workflow.status", json!({"run": run})).await
}

/// Calls `tool` with `arguments` as an operator acting as root; prints its result.
async fn call(config: &Config, tool: &str, arguments: Value) -> ExitCode {
    let request = Request::Tool(ToolCall {
        tool: tool.to_owned(),
        arguments,
        ..ToolCall::default()
    });
    match ask(config, &request, CODES).await {
        Ok(result) => {
            crate::say!("{result}");
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}
