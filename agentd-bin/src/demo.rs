//! `agentd demo`: the supervisor against the reference server, in-process, on loopback: one
//! endpoint per revision, each held as `agentd run` holds a server, a tool called on each, a
//! resource subscription firing, and the connection closed as at shutdown; and the agent's
//! turn against the first, with the embedded scripted model ([`turn`]).

mod turn;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use agentd_tools::AgentMeta;
use mcp_reference_server::{Options, ReferenceServer};
use serde_json::json;
use tokio::sync::broadcast;

use crate::config::Server;
use crate::daemon::server::{Handle, Shared, Stop};
use crate::daemon::subscriptions::SubscriptionError;

/// The instance the demo logs as.
pub(crate) const INSTANCE: &str = "demo";
const URI: &str = "demo://counter";
/// Who owns the demo's subscription.
const OWNER: &str = "demo";
/// How long the demo waits for a server to connect.
const DIAL: Duration = Duration::from_secs(10);
/// How long the demo waits for the subscribed resource to change.
const CHANGE: Duration = Duration::from_secs(5);
/// How long the demo gives a server to close.
const DRAIN: Duration = Duration::from_secs(5);

/// Why the demo failed: on which server, at which step.
#[derive(Debug)]
pub(crate) struct DemoError {
    server: String,
    step: Step,
}

/// The demo's step that failed.
#[derive(Debug)]
#[non_exhaustive]
enum Step {
    /// The server did not connect within [`DIAL`].
    NotConnected,
    /// `tools/call add` failed.
    Call(mcp_negotiate::Error),
    /// The subscription was not taken.
    Subscribe(SubscriptionError),
    /// The subscribed resource did not change within [`CHANGE`].
    NoChange,
    /// The changed resource could not be read.
    Read(mcp_negotiate::Error),
    /// The subscription could not be let go.
    Release(SubscriptionError),
    /// The agent's turn had no answer.
    Turn(turn::DemoTurnError),
}

impl fmt::Display for DemoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.server)?;
        match &self.step {
            Step::NotConnected => write!(
                f,
                "not connected within {}",
                humantime::format_duration(DIAL)
            ),
            Step::Call(e) => write!(f, "tools/call add: {e}"),
            Step::Subscribe(e) => write!(f, "subscribe: {e}"),
            Step::NoChange => write!(f, "no change within {}", humantime::format_duration(CHANGE)),
            Step::Read(e) => write!(f, "read: {e}"),
            Step::Release(e) => write!(f, "release: {e}"),
            Step::Turn(e) => write!(f, "the agent's turn: {e}"),
        }
    }
}

impl std::error::Error for DemoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.step {
            Step::Call(e) | Step::Read(e) => Some(e),
            Step::Subscribe(e) | Step::Release(e) => Some(e),
            Step::Turn(e) => Some(e),
            Step::NotConnected | Step::NoChange => None,
        }
    }
}

/// Runs the demo; the summary lines, or what failed.
pub(crate) async fn run() -> Result<Vec<String>, DemoError> {
    let mut modern = Options::default();
    modern.legacy = false;
    let mut legacy = Options::default();
    legacy.modern = false;
    let shared = Shared::new(INSTANCE, Arc::default());
    let mut summary = Vec::new();
    for (name, options) in [("weather-2026", modern), ("weather-2025", legacy)] {
        let server = Arc::new(ReferenceServer::start(options).await);
        let config = Server {
            name: name.to_owned(),
            url: server.url(),
            timeout: Duration::from_secs(60),
            headers: Vec::new(),
            tags: Default::default(),
        };
        let held = Handle::start(&shared, config.clone(), None);
        // The agent's turn runs against the first server.
        let agent = summary.is_empty().then_some(config);
        let outcome = one(name, &server, &held, &shared, agent).await;
        held.stop(Stop::Shutdown);
        match outcome {
            Ok(lines) => summary.extend(lines),
            Err(e) => {
                shared.drain(DRAIN).await;
                return Err(e);
            }
        }
    }
    shared.drain(DRAIN).await;
    Ok(summary)
}

/// Calls `add` on a held server, and waits for a subscribed resource to change; with `turn_on`
/// (the server's configuration), runs the agent's turn against it.
async fn one(
    name: &str,
    server: &Arc<ReferenceServer>,
    held: &Handle,
    shared: &Shared,
    turn_on: Option<Server>,
) -> Result<Vec<String>, DemoError> {
    let failed = |step| DemoError {
        server: name.to_owned(),
        step,
    };
    let connection = tokio::time::timeout(DIAL, held.reach().connection())
        .await
        .ok()
        .flatten()
        .ok_or_else(|| failed(Step::NotConnected))?;
    let tools = connection.catalog().tools().len();
    let revision = connection.revision();

    let agent = AgentMeta::new("demo-run-1", INSTANCE);
    let arguments = json!({"a": 2, "b": 3}).as_object().cloned();
    let result = connection
        .call_tool_with("add", arguments, Some(&agent.to_meta()), |_| {})
        .await
        .map_err(|e| failed(Step::Call(e)))?;
    let sum = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .unwrap_or("?")
        .to_owned();

    let mut updates = shared.updates();
    held.reach()
        .subscribe(URI, OWNER)
        .await
        .map_err(|e| failed(Step::Subscribe(e)))?;
    let toucher = server.clone();
    tokio::spawn(async move {
        // Change the resource once the server holds the subscription.
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
    let fired = tokio::time::timeout(CHANGE, async {
        loop {
            match updates.recv().await {
                Ok(update) if update.server == name => return Some(update.uri),
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .await
    .ok()
    .flatten()
    .ok_or_else(|| failed(Step::NoChange))?;
    let content = connection
        .read_resource(&fired)
        .await
        .map_err(|e| failed(Step::Read(e)))?;
    let now = match content.contents.first() {
        Some(mcp_wire::ResourceContents::Text { text, .. }) => text.clone(),
        _ => "?".to_owned(),
    };
    held.reach()
        .release(URI, OWNER)
        .await
        .map_err(|e| failed(Step::Release(e)))?;
    let mut lines = vec![
        format!("{name}: reached at {revision} ({tools} tools); add(2, 3) = {sum}"),
        format!("{name}: subscribed to {URI}; it changed and now reads {now}"),
    ];
    if let Some(config) = turn_on {
        let turn = turn::run(name, config, held.id, &connection).await;
        lines.extend(turn.map_err(|e| failed(Step::Turn(e)))?);
    }
    Ok(lines)
}
