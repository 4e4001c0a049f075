//! `agentd prompts` and `agentd prompt`: what a server's prompts are, and one of them got.

use std::collections::BTreeMap;
use std::process::ExitCode;

use serde_json::{Value, json};

use mcp_wire::ServerCapabilities;

use super::json::{object_arguments, say_json};
use super::servers::{ask_one, exit, list_each};
use crate::config::Config;

/// `agentd prompts [--json]`: every server's prompts, a line each (`server/name`, its
/// arguments, a required one marked `*`, and the first line of its description), or one JSON
/// object a line.
pub(crate) async fn prompts(config: Config, as_json: bool) -> ExitCode {
    let (all, listed) = list_each(&config, ServerCapabilities::prompts, async |c| {
        c.list_prompts().await
    })
    .await;
    for (server, prompts) in listed {
        for p in prompts {
            if as_json {
                crate::say!("{}", json!({"server": server.name, "prompt": p}));
                continue;
            }
            let arguments: Vec<String> = p
                .arguments
                .iter()
                .flatten()
                .map(|a| match a.required {
                    Some(true) => format!("{}*", a.name),
                    _ => a.name.clone(),
                })
                .collect();
            let about = p.description.as_deref().unwrap_or("");
            crate::say!(
                "{}/{}\t{}\t{}",
                server.name,
                p.name,
                arguments.join(","),
                about.lines().next().unwrap_or("")
            );
        }
    }
    exit(all)
}

/// `agentd prompt SERVER NAME [ARGUMENTS] [--json]`: the prompt got with its arguments (a
/// JSON object of strings), each message as `role: text`, or the whole result as JSON.
pub(crate) async fn prompt(
    config: Config,
    server: &str,
    name: &str,
    arguments: Option<&str>,
    as_json: bool,
) -> ExitCode {
    let arguments = match object_arguments(arguments) {
        Ok(arguments) => arguments,
        Err(code) => return code,
    };
    let mut strings = BTreeMap::new();
    for (key, value) in arguments.into_iter().flatten() {
        let Value::String(value) = value else {
            eprintln!("agentd: a prompt's arguments are strings ({key} is not)");
            return ExitCode::from(2);
        };
        strings.insert(key, value);
    }
    let arguments = (!strings.is_empty()).then_some(strings);
    let got = ask_one(&config, server, name, async |c| {
        c.get_prompt(name, arguments).await
    })
    .await;
    let result = match got {
        Ok(result) => result,
        Err(code) => return code,
    };
    if as_json {
        say_json(&result);
        return ExitCode::SUCCESS;
    }
    for message in &result.messages {
        let role = serde_json::to_value(message.role).unwrap_or_default();
        let role = role.as_str().unwrap_or("?");
        match message.content.as_text() {
            Some(text) => crate::say!("{role}: {text}"),
            None => crate::say!(
                "{role}: {}",
                serde_json::to_string(&message.content).unwrap_or_default()
            ),
        }
    }
    ExitCode::SUCCESS
}
