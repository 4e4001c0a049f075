//! The demo's turn: the agent, over a store in a directory of its own (removed after), answers
//! one message with the embedded scripted model ([`Scripted`]), which calls `add` on a held
//! reference server, then `memory.set` with the sum, then answers; the transcript is the
//! conversation's history as the store keeps it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mcp_negotiate::{Client, Start};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent::conversations::{Agent, Held, ROOT, SayError, Setup};
use crate::agent::instruction::Instruction;
use crate::agent::model::Message;
use crate::agent::scripted::{Scripted, calls, text};
use crate::agent::servers::Unheld;
use crate::agent::skills::Skills;
use crate::agent::subagents::Subagents;
use crate::agent::workers::{Elicitors, Followed};
use crate::config::{self, Server};
use crate::human::Gate;
use crate::store::{self, Limits, Store};
use crate::tools::{Own, Parts};
use crate::workflows;

/// What the operator says.
const ASKED: &str = "What is 2 + 3? Keep the sum in memory as \"sum\".";

/// Why the demo's turn failed.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum DemoTurnError {
    /// The store's temporary directory could not be made.
    Dir(std::io::Error),
    /// The store could not be opened or read.
    Store(store::Error),
    /// The turn had no answer.
    Say(SayError),
}

impl std::fmt::Display for DemoTurnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Dir(e) => write!(f, "the store's directory: {e}"),
            Self::Store(e) => write!(f, "the store: {e}"),
            Self::Say(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DemoTurnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Dir(e) => Some(e),
            Self::Store(e) => Some(e),
            Self::Say(e) => Some(e),
        }
    }
}

/// Runs one turn of the root conversation against `server` (held as `name`, its actor `actor`,
/// over `connection`): the transcript's lines.
pub(crate) async fn run(
    name: &str,
    server: Server,
    actor: u64,
    connection: &Client,
) -> Result<Vec<String>, DemoTurnError> {
    // A fresh directory of its own, removed however the turn ends.
    let dir = tempfile::Builder::new()
        .prefix("agentd-demo-")
        .tempdir()
        .map_err(DemoTurnError::Dir)?;
    in_dir(dir.path(), name, server, actor, connection).await
}

async fn in_dir(
    dir: &Path,
    name: &str,
    server: Server,
    actor: u64,
    connection: &Client,
) -> Result<Vec<String>, DemoTurnError> {
    let store = Store::open(dir, Limits::default()).await;
    let store = store.map_err(DemoTurnError::Store)?;
    let shutdown = CancellationToken::new();
    let tasks = TaskTracker::new();
    let said = turn(&store, &shutdown, &tasks, name, server, actor, connection).await;
    shutdown.cancel();
    tasks.close();
    tasks.wait().await;
    let lines = match said {
        Ok(_) => transcript(&store).await,
        Err(e) => Err(e),
    };
    store.close().await;
    lines
}

async fn turn(
    store: &Store,
    shutdown: &CancellationToken,
    tasks: &TaskTracker,
    name: &str,
    server: Server,
    actor: u64,
    connection: &Client,
) -> Result<Option<String>, DemoTurnError> {
    let instance = super::INSTANCE;
    let toml = format!("instance = \"{instance}\"");
    let config = config::parse("demo", &toml, &|_| None).expect("the demo's configuration");
    let gate = Gate::start(store.clone(), instance, shutdown.clone(), tasks).await;
    let gate = gate.map_err(DemoTurnError::Store)?;
    let instruction = Instruction::start(instance, None, Arc::new(Unheld), tasks, shutdown.clone());
    let skills = Skills::start(instance, &[], Arc::new(Unheld), tasks, shutdown.clone());
    let subagents = Subagents::start(store.clone()).await;
    let runs = workflows::Setup {
        instance: instance.to_owned(),
        store: store.clone(),
        servers: Arc::new(workflows::NoServers),
        agent: Arc::new(workflows::Subagent),
        limits: config.run_limits(),
        bounds: workflows::Bounds::default(),
        configured: Vec::new(),
    };
    let parts = Parts {
        humans: gate.clone(),
        instruction: instruction.clone(),
        skills: skills.clone(),
        subagents: subagents.map_err(DemoTurnError::Store)?,
        workflows: workflows::Workflows::start(runs, tasks, shutdown.clone()),
        servers: Arc::new(workflows::NoServers),
        nofile: None,
    };
    let own = Own::new(
        store.clone(),
        &config,
        shutdown.clone(),
        Arc::default(),
        Arc::default(),
        parts,
    );
    let held = Held {
        followed: Followed {
            server,
            actor,
            start: Start::Like(connection.reached_by()),
        },
        catalog: connection.catalog(),
    };
    let setup = Setup {
        instance: instance.to_owned(),
        own: Arc::new(own),
        servers: BTreeMap::from([(name.to_owned(), held)]),
        turn_timeout: Duration::from_secs(60),
        budget_tokens: None,
        instruction,
        skills,
    };
    let add = format!("{name}__add");
    let model = Scripted::new([
        calls(&[("call_1", &add, r#"{"a": 2, "b": 3}"#)]),
        calls(&[("call_2", "memory_set", r#"{"key": "sum", "value": 5}"#)]),
        text("2 + 3 = 5; I kept it in memory as \"sum\"."),
    ]);
    let elicitors: Elicitors = Arc::new(
        move |server: &str| -> Arc<dyn mcp_transport::driver::Elicitor> {
            Arc::new(gate.elicitor(server))
        },
    );
    let agent = Agent::start(
        model,
        setup,
        store.clone(),
        elicitors,
        tasks,
        shutdown.clone(),
    );
    let said = agent.say(ROOT, ASKED).await.map_err(DemoTurnError::Say);
    agent.let_workers_go();
    said
}

/// The root conversation's history, a line a message (a call, its result).
async fn transcript(store: &Store) -> Result<Vec<String>, DemoTurnError> {
    let history = store.conversation_history::<Message>(ROOT, 0, 100).await;
    let history = history.map_err(DemoTurnError::Store)?;
    let mut lines = vec![format!("{ROOT}: one turn of the embedded scripted model")];
    for entry in history {
        match entry.message {
            Message::User { text } => lines.push(format!("  user: {text}")),
            Message::System { text } => lines.push(format!("  system: {text}")),
            Message::Assistant { text, calls } => {
                if let Some(text) = text {
                    lines.push(format!("  assistant: {text}"));
                }
                for call in calls {
                    let called = format!("{}({})", call.name, call.arguments);
                    lines.push(format!("  assistant calls {called}"));
                }
            }
            Message::Tool { text, .. } => lines.push(format!("  tool: {text}")),
        }
    }
    Ok(lines)
}
