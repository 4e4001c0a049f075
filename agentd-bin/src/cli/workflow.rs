//! `agentd workflow run` and `agentd workflow status`: workflow runs on the running daemon,
//! through its control socket (the tools `workflow.run`, `workflow.status` and
//! `workflow.list`, called by an operator acting as root).
//!
//! Exit statuses: 0 ok (the run as it stands printed as JSON); 1 the daemon could not answer;
//! 2 bad usage, or an input that is not JSON; 3 the daemon is not running; 4 no workflow or
//! run of that name; 6 the input does not fit the workflow's input schema (the message names
//! the JSON pointer and the rule).

use std::process::ExitCode;

use serde_json::{Value, json};

use agentd_tools::workflow::LIST_MAX;

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

/// `agentd workflow status RUN`: the run as it stands, printed as JSON. Without a run, every
/// run the store keeps, oldest first, a summary a line.
pub(crate) async fn workflow_status(config: &Config, run: Option<&str>) -> ExitCode {
    let Some(run) = run else {
        let list = |arguments| async move {
            ask(config, &request("workflow.list", arguments), CODES).await
        };
        return match every_run(list, |run| crate::say!("{run}")).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(code) => code,
        };
    };
    call(config, "workflow.status", json!({"run": run})).await
}

/// Lists every run through `list` (`workflow.list` with its arguments), a page of
/// [`LIST_MAX`] after another, each run's summary told to `each`; the first refusal.
async fn every_run<F, E>(
    mut list: impl FnMut(Value) -> F,
    mut each: impl FnMut(&Value),
) -> Result<(), E>
where
    F: Future<Output = Result<Value, E>>,
{
    let mut arguments = json!({"limit": LIST_MAX});
    loop {
        let page = list(arguments.clone()).await?;
        page["runs"]
            .as_array()
            .into_iter()
            .flatten()
            .for_each(&mut each);
        match &page["next"] {
            Value::String(next) => arguments["after"] = json!(next),
            _ => return Ok(()),
        }
    }
}

/// The call of `tool` with `arguments`, as an operator acting as root.
fn request(tool: &str, arguments: Value) -> Request {
    Request::Tool(ToolCall {
        tool: tool.to_owned(),
        arguments,
        ..ToolCall::default()
    })
}

/// Calls `tool` with `arguments` as an operator acting as root; prints its result.
async fn call(config: &Config, tool: &str, arguments: Value) -> ExitCode {
    match ask(config, &request(tool, arguments), CODES).await {
        Ok(result) => {
            crate::say!("{result}");
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 250 runs are listed whole, a page of 100 after another, each page asked after the
    /// last run of the one before; the pages' refusal is the listing's.
    #[tokio::test]
    async fn every_run_is_listed_page_after_page() {
        let runs: Vec<Value> = (0..250)
            .map(|n| json!({"run": format!("r{n:03}")}))
            .collect();
        let mut asked = Vec::new();
        let list = |arguments: Value| {
            asked.push(arguments.clone());
            let after = arguments["after"].as_str().map(str::to_owned);
            let from = after.map_or(0, |a| a[1..].parse::<usize>().unwrap() + 1);
            let page: Vec<Value> = runs.iter().skip(from).take(100).cloned().collect();
            let next = match from + 100 < runs.len() {
                true => json!(page.last().unwrap()["run"]),
                false => Value::Null,
            };
            std::future::ready(Ok::<_, ()>(json!({"runs": page, "next": next})))
        };
        let mut listed = Vec::new();
        every_run(list, |run| listed.push(run.clone()))
            .await
            .unwrap();
        assert_eq!(listed, runs);
        let afters: Vec<&Value> = asked.iter().map(|a| &a["after"]).collect();
        assert_eq!(afters, [&Value::Null, &json!("r099"), &json!("r199")]);
        assert!(asked.iter().all(|a| a["limit"] == 100));

        let refused = every_run(|_| std::future::ready(Err::<Value, _>(3)), |_| {}).await;
        assert_eq!(refused, Err(3));
    }
}
