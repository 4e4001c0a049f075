//! `agentd tools`: every server's tools, dialed once, or as the running daemon holds them.

use std::process::ExitCode;

use super::daemon::ask;
use super::servers::{connect_all, exit};
use crate::config::Config;
use crate::control::{Catalogue, Request};

/// `agentd tools`: every server's tools (`server/tool`, a tab, the description's first
/// line), each server dialed once, or with `running` the running daemon's catalogue.
pub(crate) async fn tools(config: Config, running: bool) -> ExitCode {
    if running {
        return held(&config).await;
    }
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
    exit(all)
}

/// The running daemon's tool catalogue, in the same lines.
async fn held(config: &Config) -> ExitCode {
    let request = Request::Catalogue(Catalogue { catalogue: true });
    let catalogue = match ask(config, &request, super::tool::CODES).await {
        Ok(catalogue) => catalogue,
        Err(code) => return code,
    };
    for server in catalogue.as_array().into_iter().flatten() {
        let name = server["server"].as_str().unwrap_or_default();
        for tool in server["tools"].as_array().into_iter().flatten() {
            let about = tool["description"].as_str().unwrap_or_default();
            crate::say!(
                "{name}/{}\t{}",
                tool["name"].as_str().unwrap_or_default(),
                about.lines().next().unwrap_or("")
            );
        }
        for dropped in server["dropped"].as_array().into_iter().flatten() {
            crate::say!(
                "{name}/{}\t(left out: {})",
                dropped["tool"].as_str().unwrap_or_default(),
                dropped["reason"].as_str().unwrap_or_default()
            );
        }
    }
    ExitCode::SUCCESS
}
