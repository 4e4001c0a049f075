//! Executing an attempt of a step ([`Steps::execute`]): an `mcp.tool` or `mcp.resource` step
//! over the supervisor's connection to its server (waited for while the server joins), a
//! `tool` step through agentd's own tools as `Caller::workflow(run, step)` (one naming
//! `server/tool` through the supervisor's tool registry, which the daemon's [`Tools`]
//! reach), an `agent` step through [`Agent`]. The whole of an attempt is bounded by its
//! deadline; an `mcp.tool` call or a registry call still running then, or when the run gives
//! it up, is cancelled on the wire.
//!
//! An `mcp.tool` call carries `_meta`: `agent/run_id` and `agent/run` (the run's id),
//! `agent/instance`, `traceparent` (the run's id is its trace id, a span per attempt),
//! `agent/idempotency_key` (the step's one key) and `agent/attempt`. What fails it in a way
//! another attempt may not meet is retryable: a transport failure, a JSON-RPC error, the
//! deadline, a result with `isError` (`tool_error`); a server not configured is not.

use std::sync::Arc;

use agentd_tools::workflow::run::{Call, Execute, Failure, Resolved};
use agentd_tools::{AgentMeta, Caller};
use mcp_negotiate::Client;
use mcp_wire::CompleteParams;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::parts::{Agent, Servers, Tools};

/// What the steps of runs reach.
#[derive(Debug, Clone)]
pub(super) struct Steps {
    pub(super) instance: String,
    pub(super) servers: Arc<dyn Servers>,
    /// The own tools in force (none until the daemon hands them over).
    pub(super) tools: watch::Receiver<Option<Arc<dyn Tools>>>,
    pub(super) agent: Arc<dyn Agent>,
}

/// A failure of an attempt cut at its deadline.
fn cut() -> Failure {
    Failure::retryable("timed_out", "cut at the step's timeout")
}

/// A failure of an attempt the run gave up.
fn given_up() -> Failure {
    Failure::new("cancelled", "given up")
}

impl Steps {
    /// Attempt `execute` of a step of run `run`, by `deadline`, given up at `cancel`.
    pub(super) async fn execute(
        &self,
        run: &str,
        execute: &Execute,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        if let Call::McpTool { .. } = &execute.call {
            // Its cancellation goes on the wire.
            return self.mcp_tool(run, execute, deadline, cancel).await;
        }
        let caller = Caller::workflow(run, &execute.id);
        if let Call::Tool { .. } | Call::Agent { .. } = &execute.call {
            // Given up, a registry call is cancelled on the wire, an agent step's subagent
            // killed: each is told, rather than dropped.
            let tools = tokio::select! {
                tools = self.tools() => tools?,
                () = sleep_until(deadline) => return Err(cut()),
                () = cancel.cancelled() => return Err(given_up()),
            };
            let stop = Box::pin(async move {
                tokio::select! {
                    () = sleep_until(deadline) => {}
                    () = cancel.cancelled() => {}
                }
            });
            let done = match &execute.call {
                Call::Agent { prompt } => {
                    let within = deadline.saturating_duration_since(Instant::now());
                    self.agent
                        .answer(&*tools, &caller, prompt, within, stop)
                        .await
                }
                Call::Tool { name, arguments } => {
                    let called = tools.call(&caller, name, arguments.clone(), stop).await;
                    called.map_err(|e| Failure::new(e.code(), e.to_string()))
                }
                _ => Err(Failure::new(
                    "invalid",
                    "a step this build does not execute",
                )),
            };
            return match done {
                Ok(answer) => Ok(answer),
                Err(_) if cancel.is_cancelled() => Err(given_up()),
                Err(_) if Instant::now() >= deadline => Err(cut()),
                Err(failure) => Err(failure),
            };
        }
        let executed = async {
            match &execute.call {
                Call::Resource { server, op } => self.resource(server, op).await,
                _ => Err(Failure::new(
                    "invalid",
                    "a step this build does not execute",
                )),
            }
        };
        tokio::select! {
            executed = executed => executed,
            () = sleep_until(deadline) => Err(cut()),
            () = cancel.cancelled() => Err(given_up()),
        }
    }

    /// The own tools, once the daemon handed them over.
    async fn tools(&self) -> Result<Arc<dyn Tools>, Failure> {
        let mut served = self.tools.clone();
        let tools = match served.wait_for(Option::is_some).await {
            Ok(tools) => tools.clone(),
            Err(_) => None,
        };
        tools.ok_or_else(|| Failure::new("shutting_down", "the own tools are not served"))
    }

    /// The connection to `server`, once it is made.
    async fn connection(&self, server: &str) -> Result<Arc<Client>, Failure> {
        self.servers.connection(server).await.ok_or_else(|| {
            let unknown = agentd_tools::Error::UnknownServer {
                server: server.to_owned(),
            };
            Failure::new(unknown.code(), unknown.to_string())
        })
    }

    async fn mcp_tool(
        &self,
        run: &str,
        execute: &Execute,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<Value, Failure> {
        let Call::McpTool {
            server,
            tool,
            arguments,
            idempotency_key,
        } = &execute.call
        else {
            unreachable!("an mcp.tool attempt")
        };
        let client = tokio::select! {
            client = self.connection(server) => client?,
            () = sleep_until(deadline) => return Err(cut()),
            () = cancel.cancelled() => return Err(given_up()),
        };
        let key = idempotency_key.clone();
        let mut meta = AgentMeta::for_work(run, &self.instance, traceparent(run), key);
        meta.attempt = Some(execute.attempt);
        meta.run = Some(run.to_owned());
        let meta = meta.to_meta();
        let stop = async {
            tokio::select! {
                () = sleep_until(deadline) => {}
                () = cancel.cancelled() => {}
            }
        };
        let called = client
            .call_tool_until(tool, Some(arguments.clone()), Some(&meta), |_| {}, stop)
            .await;
        match called {
            Ok(result) if result.is_error() => Err(Failure::retryable(
                "tool_error",
                crate::content::said(&result),
            )),
            Ok(result) => serde_json::to_value(&result)
                .map_err(|e| Failure::new("server", format!("an unreadable result: {e}"))),
            Err(mcp_negotiate::Error::Cancelled) if cancel.is_cancelled() => Err(given_up()),
            Err(mcp_negotiate::Error::Cancelled) => Err(cut()),
            Err(e) => Err(Failure::retryable("server", e.to_string())),
        }
    }

    async fn resource(&self, server: &str, op: &Resolved) -> Result<Value, Failure> {
        let client = self.connection(server).await?;
        let answered = match op {
            Resolved::List => client
                .list_resources()
                .await
                .map(|resources| json!({"resources": resources})),
            Resolved::Templates => client
                .list_resource_templates()
                .await
                .map(|templates| json!({"resourceTemplates": templates})),
            Resolved::Read { uri } => client.read_resource(uri).await.and_then(to_value),
            Resolved::Prompt { name, arguments } => client
                .get_prompt(name, Some(arguments.clone()))
                .await
                .and_then(to_value),
            Resolved::Complete(params) => {
                let params: CompleteParams = serde_json::from_value(params.clone())
                    .map_err(|e| Failure::new("invalid", format!("not a completion: {e}")))?;
                client.complete(&params).await.and_then(to_value)
            }
            _ => return Err(Failure::new("invalid", "an op this build does not ask")),
        };
        answered.map_err(|e| Failure::retryable("server", e.to_string()))
    }
}

fn to_value<T: serde::Serialize>(value: T) -> Result<Value, mcp_negotiate::Error> {
    // What was just read is JSON.
    Ok(serde_json::to_value(value).unwrap_or(Value::Null))
}

/// `00-<run>-<span>-01` when the run's id is a trace id, a fresh span.
fn traceparent(run: &str) -> Option<String> {
    crate::agent::meta::run_traceparent(run, crate::clock::random_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_id_is_the_trace_of_its_calls() {
        let run = "0af7651916cd43dd8448eb211c80319c";
        let parent = traceparent(run).unwrap();
        assert!(parent.starts_with(&format!("00-{run}-")), "{parent}");
        assert_eq!(parent.len(), 55);
        assert!(parent.ends_with("-01"));
        assert_eq!(traceparent("run-1"), None);
        assert_eq!(traceparent(&"0".repeat(32)), None);
        assert_eq!(traceparent(&"A".repeat(32)), None);
    }
}
