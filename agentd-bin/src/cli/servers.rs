//! The configured servers, dialed and asked, for the one-shot commands.

use std::process::ExitCode;

use mcp_negotiate::{Client, Recovery};
use mcp_wire::ServerCapabilities;
use tokio::task::JoinSet;

use crate::config::{Config, Server};
use crate::dial::{DialError, connect, connected, failed};

/// Dials every server at once; each result in the configuration's order.
pub(super) async fn connect_all(config: &Config) -> Vec<(Server, Result<Client, DialError>)> {
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
pub(super) async fn list_each<T>(
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
pub(super) async fn connect_one(config: &Config, name: &str) -> Result<(Server, Client), ExitCode> {
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
pub(super) async fn ask_one<T>(
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

/// 0 when everything went, 1 otherwise.
pub(super) fn exit(all: bool) -> ExitCode {
    match all {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    }
}
