//! `agentd tools`: every server's tools.

use std::process::ExitCode;

use super::servers::{connect_all, exit};
use crate::config::Config;

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
    exit(all)
}
