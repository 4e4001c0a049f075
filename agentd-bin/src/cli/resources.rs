//! `agentd resources` and `agentd read`: what a server's resources are, and what one holds.

use std::process::ExitCode;

use mcp_wire::{ResourceContents, ServerCapabilities};
use serde_json::json;

use super::json::say_json;
use super::servers::{ask_one, exit, list_each};
use crate::config::Config;

/// `agentd resources [--json]`: every server's resources and resource templates, a line
/// each (`server`, URI or template, name, media type), or one JSON object a line.
pub(crate) async fn resources(config: Config, as_json: bool) -> ExitCode {
    let (all, listed) = list_each(&config, ServerCapabilities::resources, async |c| {
        let resources = c.list_resources().await?;
        // Templates are optional: a server without them answers -32601.
        match c.list_resource_templates().await {
            Err(mcp_negotiate::Error::Rpc(e)) if e.code == mcp_wire::code::METHOD_NOT_FOUND => {
                Ok((resources, Vec::new()))
            }
            listed => listed.map(|templates| (resources, templates)),
        }
    })
    .await;
    for (server, (resources, templates)) in listed {
        for r in resources {
            match as_json {
                true => crate::say!("{}", json!({"server": server.name, "resource": r})),
                false => crate::say!(
                    "{}\t{}\t{}\t{}",
                    server.name,
                    r.uri,
                    r.name,
                    r.mime_type.as_deref().unwrap_or("")
                ),
            }
        }
        for t in templates {
            match as_json {
                true => crate::say!("{}", json!({"server": server.name, "template": t})),
                false => crate::say!(
                    "{}\t{}\t{}\t{}",
                    server.name,
                    t.uri_template,
                    t.name,
                    t.mime_type.as_deref().unwrap_or("")
                ),
            }
        }
    }
    exit(all)
}

/// `agentd read SERVER URI [--json]`: the resource's contents, its text as it is (a blob as
/// its size and media type), or the whole result as JSON.
pub(crate) async fn read(config: Config, server: &str, uri: &str, as_json: bool) -> ExitCode {
    let read = ask_one(&config, server, uri, async |c| c.read_resource(uri).await).await;
    let result = match read {
        Ok(result) => result,
        Err(code) => return code,
    };
    if as_json {
        say_json(&result);
        return ExitCode::SUCCESS;
    }
    for contents in &result.contents {
        match contents {
            ResourceContents::Text { text, .. } => crate::say!("{text}"),
            ResourceContents::Blob {
                blob, mime_type, ..
            } => crate::say!(
                "({} bytes of base64, {})",
                blob.len(),
                mime_type.as_deref().unwrap_or("no media type")
            ),
            other => crate::say!("{}", serde_json::to_string(other).unwrap_or_default()),
        }
    }
    ExitCode::SUCCESS
}
