//! `agentd call`: one tool called, its result printed as JSON.

use std::process::ExitCode;

use super::json::{object_arguments, say_json};
use super::servers::ask_one;
use crate::config::Config;

/// `agentd call SERVER TOOL [ARGUMENTS]`: the result printed as JSON. Exits 0 when the tool
/// ran, 1 when it ran and failed (`isError`: the result is printed all the same, so a script
/// can tell) or the call failed, 2 when the command is wrong.
pub(crate) async fn call(
    config: Config,
    server: &str,
    tool: &str,
    arguments: Option<&str>,
) -> ExitCode {
    let arguments = match object_arguments(arguments) {
        Ok(arguments) => arguments,
        Err(code) => return code,
    };
    let agent = agentd_tools::AgentMeta::new(
        format!("cli-{}", std::process::id()),
        config.instance.clone(),
    );
    let meta = agent.to_meta();
    let called = ask_one(&config, server, tool, async |c| {
        c.call_tool_with(tool, arguments, Some(&meta), |_| {}).await
    })
    .await;
    let result = match called {
        Ok(result) => result,
        Err(code) => return code,
    };
    say_json(&result);
    if result.is_error() {
        eprintln!("agentd: {server}: {tool} ran and failed");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
