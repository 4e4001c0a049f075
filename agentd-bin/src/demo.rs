//! `agentd demo`: the MCP client stack against the reference server, in-process, on
//! loopback: one endpoint per revision, a tool called on each, a resource subscription firing.

use std::sync::Arc;
use std::time::Duration;

use agentd_tests::reference::{Options, ReferenceServer};
use mcp_negotiate::{Change, Connection, Dialer, Kind, Watch};
use mcp_transport::driver::Config;
use mcp_wire::AgentMeta;
use serde_json::json;

use crate::log::{Level, event};

const INSTANCE: &str = "demo";
const URI: &str = "demo://counter";

/// Runs the demo; the summary lines, or what failed.
pub(crate) async fn run() -> Result<Vec<String>, String> {
    let mut modern = Options::default();
    modern.legacy = false;
    let mut legacy = Options::default();
    legacy.modern = false;
    let mut summary = Vec::new();
    for (name, options) in [("weather-2026", modern), ("weather-2025", legacy)] {
        let server = Arc::new(ReferenceServer::start(options).await);
        summary.extend(one(name, &server).await?);
    }
    Ok(summary)
}

/// Connects to one server, calls `add`, and waits for a subscribed resource to change.
async fn one(name: &str, server: &Arc<ReferenceServer>) -> Result<Vec<String>, String> {
    let kind = Kind::Supervisor {
        instance: INSTANCE.into(),
    };
    let dialer = Dialer::new(&server.url(), Config::default(), kind).map_err(|e| e.to_string())?;
    let connection = match Connection::connect(dialer).await {
        Ok(connection) => Arc::new(connection),
        Err(e) => {
            let err = mcp_wire::log_text(&e.to_string());
            event(
                INSTANCE,
                Level::Warn,
                "mcp.connect.fail",
                &[("server", json!(name)), ("err", json!(err))],
            );
            return Err(format!("{name}: {e}"));
        }
    };
    let tools = connection.catalog().tools().len();
    let revision = connection.revision();
    event(
        INSTANCE,
        Level::Info,
        "mcp.connect",
        &[
            ("server", json!(name)),
            ("protocol", json!(revision.as_str())),
            ("tools", json!(tools)),
        ],
    );

    let agent = AgentMeta::new("demo-run-1", INSTANCE);
    let arguments = json!({"a": 2, "b": 3}).as_object().cloned();
    let result = connection
        .call_tool("add", arguments, Some(&agent), |_| {})
        .await
        .map_err(|e| format!("{name}: tools/call add: {e}"))?;
    let sum = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .unwrap_or("?")
        .to_owned();

    let mut watch = Watch::new(connection.clone());
    watch
        .subscribe(URI)
        .await
        .map_err(|e| format!("{name}: subscribe: {e}"))?;
    watch.open().await.map_err(|e| format!("{name}: {e}"))?;
    let toucher = server.clone();
    tokio::spawn(async move {
        // A listen opens with the watch's first turn: change the resource once it is held.
        for _ in 0..100 {
            if toucher.listens() > 0 || toucher.methods().iter().any(|m| m == "resources/subscribe")
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        toucher.touch(URI).await;
    });
    let fired = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match watch.next().await {
                Ok(Some(Change::ResourceUpdated { uri })) => return Ok(uri),
                Ok(Some(_)) => {}
                Ok(None) => return Err("the server pushes nothing".to_owned()),
                Err(e) => return Err(e.to_string()),
            }
        }
    })
    .await
    .map_err(|_| format!("{name}: no change within 5 s"))?
    .map_err(|e| format!("{name}: {e}"))?;
    let content = connection
        .read_resource(&fired)
        .await
        .map_err(|e| format!("{name}: read: {e}"))?;
    let now = match content.contents.first() {
        Some(mcp_wire::ResourceContents::Text { text, .. }) => text.clone(),
        _ => "?".to_owned(),
    };
    connection
        .close()
        .await
        .map_err(|e| format!("{name}: close: {e}"))?;
    Ok(vec![
        format!("{name}: reached at {revision} ({tools} tools); add(2, 3) = {sum}"),
        format!("{name}: subscribed to {URI}; it changed and now reads {now}"),
    ])
}
