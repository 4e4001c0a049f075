//! Human gates: the questions put to a person, `ask_human`'s and servers' elicitations, kept
//! in the store ([`crate::store::questions`]) while their askers wait, and answered by an
//! operator (`agentd human list`, `agentd human answer`, through the control socket).
//!
//! The [`Gate`] gives each question its id, writes it, and waits for its answer on a oneshot,
//! at most the asker's timeout and never past shutdown. An answer is checked against the
//! question's schema by the store, in the transaction that records it: a refused answer
//! leaves the question open. A question whose asker stops waiting, however it stops (its
//! timeout, shutdown, or its future dropped: a turn abandoned, an elicitation past its
//! 300 s), is withdrawn: marked cancelled, no longer listed, and logged (`human.withdrawn`)
//! once the store says it was still open (an answer recorded meanwhile is kept, and nothing
//! is logged). At a start the questions left open by the last run are cancelled, since nobody
//! waits on them any more.
//!
//! A server's elicitation (form mode) is a question from the server ([`Gate::elicitor`]):
//! its message is the question, its `requestedSchema` the schema; an answer is `accept` with
//! the answer as the form's content, and no answer within 300 s is `cancel`. An elicitation
//! whose schema is not an object schema that compiles, or whose message is past the
//! question's bound, is answered `cancel` without being asked.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use agentd_tools::Error;
use agentd_tools::human::{self, Humans, Origin, Question, Reply};
use agentd_tools::wait::Clock as _;
use mcp_transport::driver::Elicitor;
use mcp_wire::{ElicitAction, ElicitRequestParams, ElicitResult};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::Clock;
use crate::dial::ELICITATION_TIMEOUT;
use crate::store::{self, Store};
use crate::telemetry::catalogue::own;

/// The questions of the instance, and their askers waiting.
#[derive(Debug)]
pub(crate) struct Gate {
    store: Store,
    instance: String,
    clock: Clock,
    /// The next question's id.
    next: AtomicU64,
    /// Where each waiting asker hears its answer, by question id.
    waiting: Mutex<HashMap<u64, oneshot::Sender<Value>>>,
    /// Where the withdrawals of askers gone are awaited, to be logged.
    tasks: TaskTracker,
}

impl Gate {
    /// The gate of `instance` over `store`, its waits ending at `shutdown`, the withdrawals
    /// of askers gone awaited on `tasks`: the questions a last run left open are cancelled
    /// first.
    pub(crate) async fn start(
        store: Store,
        instance: &str,
        shutdown: CancellationToken,
        tasks: &TaskTracker,
    ) -> Result<Arc<Self>, store::Error> {
        let clock = Clock::new(shutdown);
        let restarted = store.questions_restart(clock.now_ms()).await?;
        Ok(Arc::new(Self {
            store,
            instance: instance.to_owned(),
            clock,
            next: AtomicU64::new(restarted.next),
            waiting: Mutex::default(),
            tasks: tasks.clone(),
        }))
    }

    /// The elicitor of a connection to `server`: its elicitations become questions from it.
    pub(crate) fn elicitor(self: &Arc<Self>, server: &str) -> Elicitation {
        Elicitation {
            gate: self.clone(),
            server: server.to_owned(),
        }
    }

    fn waiting(&self) -> MutexGuard<'_, HashMap<u64, oneshot::Sender<Value>>> {
        // A panic under the lock leaves a map that is still whole.
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks question `id` cancelled, unless answered meanwhile (the request is sent at
    /// once: it is made even when its answer is not awaited): whether it was, then logged.
    fn withdraw(
        &self,
        id: u64,
        origin: &Origin,
    ) -> impl Future<Output = Result<bool, store::Error>> + Send + use<> {
        self.waiting().remove(&id);
        let cancelled = self.store.question_cancel(id, self.clock.now_ms());
        let (instance, origin) = (self.instance.clone(), origin.clone());
        async move {
            let withdrawn = cancelled.await?;
            if withdrawn {
                own::human_withdrawn(&instance, id, origin.kind(), origin.from());
            }
            Ok(withdrawn)
        }
    }

    /// The answer to a server's elicitation: the answer to the question it becomes, or cancel.
    async fn elicit(&self, server: &str, params: ElicitRequestParams) -> ElicitResult {
        let cancel = ElicitResult::new(ElicitAction::Cancel);
        let schema = params.requested_schema.as_ref().map(|s| s.parse::<Value>());
        let Some(Ok(schema)) = schema else {
            return cancel;
        };
        // A form's content is an object: only an object schema can be answered with one.
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return cancel;
        }
        let origin = Origin::elicitation(server);
        let asked = self.ask(origin, &params.message, &schema, ELICITATION_TIMEOUT);
        match asked.await {
            Ok(Reply {
                answer: Some(Value::Object(content)),
                ..
            }) => ElicitResult::accept(content),
            _ => cancel,
        }
    }
}

/// Withdraws a question whose asker stopped waiting before it was answered, however it
/// stopped.
struct Asked<'a> {
    gate: &'a Gate,
    id: u64,
    origin: &'a Origin,
    waiting: bool,
}

impl Drop for Asked<'_> {
    fn drop(&mut self) {
        if !self.waiting {
            return;
        }
        let withdrawn = self.gate.withdraw(self.id, self.origin);
        // Sent already; its answer is awaited to be logged, on the gate's tasks when there
        // is a runtime to run them (a runtime shutting down drops its tasks unlogged).
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let logged = async move { drop(withdrawn.await) };
            self.gate.tasks.spawn_on(logged, &runtime);
        }
    }
}

impl Humans for Gate {
    async fn ask(
        &self,
        origin: Origin,
        text: &str,
        schema: &Value,
        timeout: Duration,
    ) -> Result<Reply, Error> {
        human::check_question(text)?;
        human::check_schema(schema)?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (told, mut told_on) = oneshot::channel();
        self.waiting().insert(id, told);
        // Sent at once, before anything can drop this future: a withdrawal comes after it.
        let opened = self
            .store
            .question_open(id, &origin, text, schema, self.clock.now_ms());
        let mut asked = Asked {
            gate: self,
            id,
            origin: &origin,
            waiting: true,
        };
        if let Err(e) = opened.await {
            asked.waiting = false;
            self.waiting().remove(&id);
            return Err(e.into_tool("ask_human", ""));
        }
        own::human_asked(&self.instance, id, origin.kind(), origin.from());
        let answer = tokio::select! {
            answer = &mut told_on => answer.ok(),
            _ = self.clock.sleep(timeout) => None,
        };
        asked.waiting = false;
        if let Some(answer) = answer {
            return Ok(Reply::new(id, Some(answer)));
        }
        // Unanswered in time: withdrawn, unless an answer was recorded meanwhile.
        let withdrawn = self.withdraw(id, &origin).await;
        if withdrawn.map_err(|e| e.into_tool("ask_human", ""))? {
            return Ok(Reply::new(id, None));
        }
        let kept = self.store.question(id).await;
        let kept = kept.map_err(|e| e.into_tool("ask_human", ""))?;
        Ok(Reply::new(id, kept.and_then(|q| q.answer)))
    }

    async fn open(&self) -> Result<Vec<Question>, Error> {
        let open = self.store.questions_open().await;
        let open = open.map_err(|e| e.into_tool("human", ""))?;
        Ok(open
            .into_iter()
            .map(|q| Question::new(q.id, q.origin, &q.text, q.schema, q.asked_ms))
            .collect())
    }

    async fn answer(&self, id: u64, answer: Value) -> Result<(), Error> {
        let at = self.clock.now_ms();
        let answered = self.store.question_answer(id, &answer, at).await;
        let origin = answered.map_err(|e| match e {
            store::Error::NotFound { .. } => Error::NotFound {
                what: format!("open question {id}"),
            },
            e => e.into_tool("human", ""),
        })?;
        own::human_answered(&self.instance, id, origin.kind(), origin.from());
        if let Some(told) = self.waiting().remove(&id) {
            // An asker gone meanwhile hears nothing; the answer is kept all the same.
            let _ = told.send(answer);
        }
        Ok(())
    }
}

/// The gate as the elicitor of one server's connections.
#[derive(Debug, Clone)]
pub(crate) struct Elicitation {
    gate: Arc<Gate>,
    server: String,
}

impl Elicitor for Elicitation {
    fn elicit(
        &self,
        params: ElicitRequestParams,
    ) -> Pin<Box<dyn Future<Output = ElicitResult> + Send + '_>> {
        Box::pin(self.gate.elicit(&self.server, params))
    }
}

#[cfg(test)]
mod tests;
