//! `agentd check`: every server dialed once, and how each went.

use std::process::ExitCode;

use serde_json::json;

use super::servers::{connect_all, exit};
use crate::config::Config;

/// `agentd check`: 0 when every server connected, 1 otherwise.
pub(crate) async fn check(config: Config, as_json: bool) -> ExitCode {
    let mut all = true;
    for (server, result) in connect_all(&config).await {
        all &= result.is_ok();
        let line = match &result {
            Ok(c) => json!({"server": server.name, "ok": true, "protocol": c.revision().as_str(),
                "tools": c.catalog().tools().len(), "error": null}),
            Err(e) => {
                json!({"server": server.name, "ok": false, "protocol": null, "tools": null, "error": e.to_string()})
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
    exit(all)
}
