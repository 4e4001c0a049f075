//! `agentd call`: one tool called, its result printed as JSON.

use std::process::ExitCode;

use super::{connect_one, object_arguments};
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
    let (server, client) = match connect_one(&config, server).await {
        Ok(connected) => connected,
        Err(code) => return code,
    };
    let agent = agentd_tools::AgentMeta::new(
        format!("cli-{}", std::process::id()),
        config.instance.clone(),
    );
    let outcome = client
        .call_tool_with(tool, arguments, Some(&agent.to_meta()), |_| {})
        .await;
    let _ = client.close().await;
    match outcome {
        Ok(result) => {
            crate::say!(
                "{}",
                serde_json::to_string_pretty(&result).unwrap_or_default()
            );
            if result.is_error() {
                eprintln!("agentd: {}/{tool} ran and failed", server.name);
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("agentd: {}/{tool}: {e}", server.name);
            ExitCode::FAILURE
        }
    }
}
