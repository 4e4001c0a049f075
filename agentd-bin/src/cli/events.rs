//! `agentd events tail` (a stream of the store, printed) and `agentd events call` (one events
//! tool called on the running daemon).

use std::process::ExitCode;

use serde_json::Value;

use super::json::object_arguments;
use super::tool::{answered, ask};
use crate::config::Config;
use crate::control::{EventsCall, Request};
use crate::store::{self, Limits, Store};

/// `agentd events call`: one events tool called on the running daemon; its result printed
/// as JSON, the exit statuses those of `agentd tool call`.
pub(crate) async fn events_call(
    config: &Config,
    owner: String,
    kind: String,
    tool: String,
    arguments: Option<&str>,
) -> ExitCode {
    let arguments = match object_arguments(arguments) {
        Ok(arguments) => arguments.map_or_else(|| Value::Object(Default::default()), Value::Object),
        Err(code) => return code,
    };
    let request = Request::Events(EventsCall {
        tool,
        arguments,
        owner,
        kind,
    });
    answered(ask(config, &request).await)
}

/// `agentd events tail`: every record of `stream`, oldest first, one JSON line each.
pub(crate) async fn events_tail(config: &Config, stream: &str) -> ExitCode {
    match tail(config, stream).await {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agentd: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Prints the records of `stream`, a thousand at a time; how many.
async fn tail(config: &Config, stream: &str) -> Result<usize, store::Error> {
    let store = Store::open(&config.store_path, Limits::from(config)).await?;
    let mut after = 0;
    let mut printed = 0;
    loop {
        let entries = store.read(stream, after, 1000).await?;
        let Some(last) = entries.last() else {
            store.close().await;
            return Ok(printed);
        };
        after = last.seq;
        for entry in &entries {
            crate::say!("{}", String::from_utf8_lossy(&entry.bytes));
        }
        printed += entries.len();
    }
}
