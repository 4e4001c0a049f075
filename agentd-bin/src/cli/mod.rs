//! The one-shot commands that read a configuration and dial its servers once, a file each:
//! `check`, `tools`, `call`, `resources`, `read`, `prompts`, `prompt`, and `events call`
//! (through the running daemon's control socket).

mod call;
mod check;
mod events;
mod prompts;
mod resources;
mod tools;

use std::path::Path;
use std::process::ExitCode;

use mcp_negotiate::{Client, Recovery};
use mcp_wire::ServerCapabilities;
use serde_json::{Map, Value};
use tokio::task::JoinSet;

pub(crate) use call::call;
pub(crate) use check::check;
pub(crate) use events::events_call;
pub(crate) use prompts::{prompt, prompts};
pub(crate) use resources::{read, resources};
pub(crate) use tools::tools;

use crate::config::{self, Config, Server};
use crate::dial::{DialError, connect, connected, failed};

/// Loads the configuration, or says why not (naming the key and the position).
pub(crate) fn load(path: &Path) -> Result<Config, ExitCode> {
    config::load(path, &|name| std::env::var(name).ok()).map_err(|e| {
        eprintln!("agentd: {e}");
        ExitCode::from(2)
    })
}

/// Dials every server at once; each result in the configuration's order.
async fn connect_all(config: &Config) -> Vec<(Server, Result<Client, DialError>)> {
    let mut set = JoinSet::new();
    for (i, server) in config.servers.iter().cloned().enumerate() {
        let instance = config.instance.clone();
        set.spawn(async move {
            let result = connect(&instance, &server, Recovery::AtOnce).await;
            match &result {
                Ok(c) => connected(&instance, &server.name, c, None),
                Err(e) => failed(&instance, &server.name, &e.to_string(), None, None),
            }
            (i, server, result)
        });
    }
    let mut results: Vec<_> = set.join_all().await;
    results.sort_by_key(|(i, ..)| *i);
    results.into_iter().map(|(_, s, r)| (s, r)).collect()
}

/// Every server that `offers` what `list` asks for, dialed at once and asked, in the
/// configuration's order: what each listed, and whether every server answered (a failure
/// is said on stderr; a server that does not offer it is passed over).
async fn list_each<T>(
    config: &Config,
    offers: fn(&ServerCapabilities) -> bool,
    list: impl AsyncFn(&Client) -> Result<T, mcp_negotiate::Error>,
) -> (bool, Vec<(Server, T)>) {
    let mut all = true;
    let mut listed = Vec::new();
    for (server, result) in connect_all(config).await {
        let client = match result {
            Ok(client) => client,
            Err(e) => {
                all = false;
                eprintln!("agentd: {}: {e}", server.name);
                continue;
            }
        };
        let answer = match offers(&client.capabilities()) {
            true => Some(list(&client).await),
            false => None,
        };
        let _ = client.close().await;
        match answer {
            Some(Ok(items)) => listed.push((server, items)),
            Some(Err(e)) => {
                all = false;
                eprintln!("agentd: {}: {e}", server.name);
            }
            None => {}
        }
    }
    (all, listed)
}

/// Dials the server named `name`: exit 2 when the configuration has none, 1 when it cannot
/// be reached.
async fn connect_one(config: &Config, name: &str) -> Result<(Server, Client), ExitCode> {
    let Some(server) = config.servers.iter().find(|s| s.name == name) else {
        eprintln!("agentd: no server {name:?} in the configuration");
        return Err(ExitCode::from(2));
    };
    match connect(&config.instance, server, Recovery::AtOnce).await {
        Ok(client) => Ok((server.clone(), client)),
        Err(e) => {
            eprintln!("agentd: {}: {e}", server.name);
            Err(ExitCode::FAILURE)
        }
    }
}

/// Asks the server named `name` once: dialed, `ask`ed, closed. The answer, or the exit
/// status when there is none (2: no such server; 1: it failed, said as `server: what: why`).
async fn ask_one<T>(
    config: &Config,
    name: &str,
    what: &str,
    ask: impl AsyncFnOnce(&Client) -> Result<T, mcp_negotiate::Error>,
) -> Result<T, ExitCode> {
    let (server, client) = connect_one(config, name).await?;
    let answer = ask(&client).await;
    let _ = client.close().await;
    answer.map_err(|e| {
        eprintln!("agentd: {}: {what}: {e}", server.name);
        ExitCode::FAILURE
    })
}

/// Prints `value` as indented JSON.
fn say_json(value: &impl serde::Serialize) {
    crate::say!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

/// Arguments given on the command line: none, or a JSON object (anything else is exit 2).
fn object_arguments(arguments: Option<&str>) -> Result<Option<Map<String, Value>>, ExitCode> {
    match arguments.map(serde_json::from_str::<Value>) {
        None => Ok(None),
        Some(Ok(Value::Object(map))) => Ok(Some(map)),
        Some(_) => {
            eprintln!("agentd: the arguments must be a JSON object");
            Err(ExitCode::from(2))
        }
    }
}

/// 0 when everything went, 1 otherwise.
fn exit(all: bool) -> ExitCode {
    match all {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    }
}
