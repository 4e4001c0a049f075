//! `agentd events call`: one events tool called on the running daemon.

use std::process::ExitCode;

use serde_json::{Value, json};

use crate::config::Config;

/// `agentd events call`: one events tool called on the running daemon; its result printed
/// as JSON.
pub(crate) async fn events_call(
    config: &Config,
    owner: String,
    kind: String,
    tool: String,
    arguments: Option<&str>,
) -> ExitCode {
    let arguments = match arguments.map(serde_json::from_str::<Value>) {
        None => json!({}),
        Some(Ok(arguments @ Value::Object(_))) => arguments,
        Some(_) => {
            eprintln!("agentd: the arguments are a JSON object");
            return ExitCode::from(2);
        }
    };
    let request = crate::control::Request {
        tool,
        arguments,
        owner,
        kind,
    };
    match crate::control::call(&config.store_path, &request).await {
        Ok(result) => {
            crate::say!("{result}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("agentd: {e}");
            ExitCode::FAILURE
        }
    }
}
