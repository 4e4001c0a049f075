//! `agentd tool list` and `agentd tool call`: agentd's own tools on the running daemon,
//! through its control socket, the events tools among them (called for an owner; `agentd
//! events call` is the same call).
//!
//! Exit statuses: 0 ok; 1 the tool ran and failed (`agentd: CODE: message`); 2 bad usage, or
//! arguments that are not a JSON object; 3 the daemon is not running; 4 unknown tool; 5 not
//! granted to the scope, or a contract tool nothing implements (not offered); 6 invalid
//! arguments.

use std::process::ExitCode;

use serde_json::Value;

use super::daemon::{Codes, ask};
use super::json::{object_arguments, say_json};
use crate::config::Config;
use crate::control::{List, Request, ToolCall};

/// The exit statuses of the daemon's refusals (`agentd tools --running` too).
pub(super) const CODES: Codes = &[
    ("unknown_tool", 4),
    ("not_granted", 5),
    ("not_offered", 5),
    ("invalid_arguments", 6),
];

/// The ids of the unit a call is made in, the scope it acts as, and the owner an events
/// tool is called for.
#[derive(Debug, Clone, Default)]
pub(crate) struct Unit {
    /// The scope (`root` when not given).
    pub(crate) scope: Option<String>,
    /// The owner (of an events tool's call).
    pub(crate) owner: Option<String>,
    pub(crate) conversation: Option<String>,
    pub(crate) run: Option<String>,
    pub(crate) step: Option<String>,
    pub(crate) subagent: Option<String>,
}

/// `agentd tool list`: the tools offered to `scope`, a line each (`name  description`), then
/// each contract tool granted to it and not offered (`name  not offered: reason`); or the
/// JSON object of them, `{"tools": […], "not_offered": […]}`.
pub(crate) async fn tool_list(config: &Config, scope: String, json: bool) -> ExitCode {
    let request = Request::List(List { list: scope });
    let listed = match ask(config, &request, CODES).await {
        Ok(listed) => listed,
        Err(code) => return code,
    };
    if json {
        say_json(&listed);
        return ExitCode::SUCCESS;
    }
    if !listed["tools"].is_array() {
        eprintln!("agentd: not a list of tools: {listed}");
        return ExitCode::FAILURE;
    }
    let text = |tool: &Value, key: &str| tool[key].as_str().unwrap_or_default().to_owned();
    let tools = listed["tools"].as_array().into_iter().flatten();
    let offered = tools.map(|t| (text(t, "name"), text(t, "description")));
    let not_offered = listed["not_offered"].as_array().into_iter().flatten();
    let not_offered = not_offered.map(|t| {
        let reason = format!("not offered: {}", text(t, "reason"));
        (text(t, "name"), reason)
    });
    for (name, description) in offered.chain(not_offered) {
        crate::say!("{name:<22}{description}");
    }
    ExitCode::SUCCESS
}

/// `agentd tool call`: one own tool called by an operator acting as the unit's scope; its
/// result printed as JSON.
pub(crate) async fn tool_call(
    config: &Config,
    tool: String,
    arguments: Option<&str>,
    unit: Unit,
) -> ExitCode {
    let arguments = match object_arguments(arguments) {
        Ok(arguments) => arguments.map_or_else(|| Value::Object(Default::default()), Value::Object),
        Err(code) => return code,
    };
    let request = Request::Tool(ToolCall {
        tool,
        arguments,
        scope: unit.scope,
        owner: unit.owner,
        conversation: unit.conversation,
        run: unit.run,
        step: unit.step,
        subagent: unit.subagent,
    });
    answered(ask(config, &request, CODES).await)
}

/// Prints the result of a call, or says why there is none: the exit status.
fn answered(answer: Result<Value, ExitCode>) -> ExitCode {
    match answer {
        Ok(result) => {
            crate::say!("{result}");
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}
