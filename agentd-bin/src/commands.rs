//! The commands that read a configuration: `check`, `tools`, `call`, `events call`.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use mcp_negotiate::{Client, Recovery};
use serde_json::{Map, Value, json};
use tokio::task::JoinSet;

use crate::config::{self, Config, Server};
use crate::dial::{connect, connected, failed};

/// Loads the configuration, or says why not (naming the key and the position).
pub(crate) fn load(path: &Path) -> Result<Config, ExitCode> {
    config::load(path, &|name| std::env::var(name).ok()).map_err(|e| {
        eprintln!("agentd: {e}");
        ExitCode::from(2)
    })
}

/// Dials every server at once; each result in the configuration's order.
async fn connect_all(config: &Config) -> Vec<(Server, Result<Client, String>)> {
    let mut set = JoinSet::new();
    for (i, server) in config.servers.iter().cloned().enumerate() {
        let instance = config.instance.clone();
        set.spawn(async move {
            let result = connect(&instance, &server, Recovery::AtOnce).await;
            match &result {
                Ok(c) => connected(&instance, &server.name, c, None),
                Err(e) => failed(&instance, &server.name, &e.to_string(), None, None),
            }
            let result = result.map_err(|e| e.to_string());
            (i, server, result)
        });
    }
    let mut results: Vec<_> = set.join_all().await;
    results.sort_by_key(|(i, ..)| *i);
    results.into_iter().map(|(_, s, r)| (s, r)).collect()
}

/// `agentd check`: 0 when every server connected, 1 otherwise.
pub(crate) async fn check(config: Config, as_json: bool) -> ExitCode {
    let mut all = true;
    for (server, result) in connect_all(&config).await {
        all &= result.is_ok();
        let line = match &result {
            Ok(c) => json!({"server": server.name, "ok": true, "protocol": c.revision().as_str(),
                "tools": c.catalog().tools().len(), "error": null}),
            Err(e) => {
                json!({"server": server.name, "ok": false, "protocol": null, "tools": null, "error": e})
            }
        };
        match (as_json, &result) {
            (true, _) => crate::say!("{line}"),
            (false, Ok(c)) => crate::say!(
                "{}: ok, {} ({} tools)",
                server.name,
                c.revision(),
                c.catalog().tools().len()
            ),
            (false, Err(e)) => crate::say!("{}: failed: {e}", server.name),
        }
        if let Ok(c) = result {
            let _ = c.close().await;
        }
    }
    match all {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    }
}

/// `agentd tools`: every server's tools.
pub(crate) async fn tools(config: Config) -> ExitCode {
    let mut all = true;
    for (server, result) in connect_all(&config).await {
        match result {
            Ok(c) => {
                for tool in c.catalog().tools() {
                    let about = tool.description.as_deref().unwrap_or("");
                    crate::say!(
                        "{}/{}\t{}",
                        server.name,
                        tool.name,
                        about.lines().next().unwrap_or("")
                    );
                }
                for dropped in c.catalog().dropped() {
                    crate::say!(
                        "{}/{}\t(left out: {})",
                        server.name,
                        dropped.tool,
                        dropped.reason
                    );
                }
                let _ = c.close().await;
            }
            Err(e) => {
                all = false;
                eprintln!("agentd: {}: {e}", server.name);
            }
        }
    }
    match all {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    }
}

/// `agentd call`: one call, its result printed as JSON.
pub(crate) async fn call(
    config: Config,
    server: &str,
    tool: &str,
    arguments: Option<&str>,
) -> ExitCode {
    let Some(server) = config.servers.iter().find(|s| s.name == server) else {
        eprintln!("agentd: no server {server:?} in the configuration");
        return ExitCode::from(2);
    };
    let arguments: Option<Map<String, Value>> = match arguments.map(serde_json::from_str) {
        None => None,
        Some(Ok(Value::Object(map))) => Some(map),
        Some(_) => {
            eprintln!("agentd: the arguments must be a JSON object");
            return ExitCode::from(2);
        }
    };
    let connection = match connect(&config.instance, server, Recovery::AtOnce).await {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("agentd: {}: {e}", server.name);
            return ExitCode::FAILURE;
        }
    };
    let agent = agentd_tools::AgentMeta::new(
        format!("cli-{}", std::process::id()),
        config.instance.clone(),
    );
    let outcome = connection
        .call_tool_with(tool, arguments, Some(&agent.to_meta()), |_| {})
        .await;
    let _ = connection.close().await;
    match outcome {
        Ok(result) => {
            crate::say!(
                "{}",
                serde_json::to_string_pretty(&result).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("agentd: {}/{tool}: {e}", server.name);
            ExitCode::FAILURE
        }
    }
}

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
    let request = crate::socket::Request {
        tool,
        arguments,
        owner,
        kind,
    };
    match crate::socket::call(&config.store_path, &request).await {
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
