//! One turn of a conversation: the model is shown the conversation ([`context`](super::context):
//! the instruction as the system prompt, the skills loaded, the summary of what was compacted,
//! the history) with the tools it may call; each tool call of its reply runs (those of one
//! reply at once) and its result goes back; again, until it answers without a tool call, or a
//! round in which it called `finish` ends.
//!
//! Every message is appended to the conversation's durable history as it happens (a tool's
//! result as its call ends, so in the order the calls end), and the tokens of every model
//! call are added to the conversation's count. The turn has a deadline: the model's calls
//! are bounded by it, each tool call by what is left of it ([`Runner`]), and no round starts
//! once it has passed.
//!
//! The system prompt is read once, when the turn starts; the skills' messages at each round,
//! so that a skill loaded or unloaded in a round is in, or gone from, the next request. The
//! model-only tools (`think`, `decide`, `context.compact`) reason over the round they were
//! called in ([`Round`]): the messages the model was shown, its model and deadline, its
//! tokens counted as the turn's; a compaction takes effect once the round's calls end, and is
//! kept in the store.

use std::borrow::Cow;
use std::fmt;
use std::sync::Mutex;

use agentd_tools::reasoning::{Answer, Compacted, Reasoning};
use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use tokio::time::Instant;

use super::calls::{FINISH, OwnTools, Planned, Runner, plan};
use super::context::{Context, Summary, request};
use super::meta::{Place, TurnIds, call_meta};
use super::model::{Message, Model, ModelError, Request, ToolCall};
use super::names::Offer;
use super::skills::Skills;
use crate::store::{self, Store};

/// The system prompt of every request, until the instance has an instruction.
pub(crate) const SYSTEM: &str = "You are agentd, an agent daemon. Answer the messages of \
    this conversation. Use the tools offered when they help; when the work asked for is \
    done, say so, or call finish.";

/// Why a turn ended without an answer.
#[derive(Debug)]
#[non_exhaustive]
pub(crate) enum TurnError {
    /// The deadline passed.
    Deadline,
    /// The model failed.
    Model(ModelError),
    /// The history could not be written.
    Store(store::Error),
}

impl fmt::Display for TurnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Deadline => f.write_str("the turn's deadline passed"),
            Self::Model(e) => e.fmt(f),
            Self::Store(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for TurnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Deadline => None,
            Self::Model(e) => Some(e),
            Self::Store(e) => Some(e),
        }
    }
}

impl From<store::Error> for TurnError {
    fn from(e: store::Error) -> Self {
        Self::Store(e)
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ended {
    /// The model's last text: its answer (after a `finish` without text, the summary it
    /// gave `finish`).
    pub(crate) text: Option<String>,
    /// Whether a `finish` ended it.
    pub(crate) finished: bool,
    /// How many times the model was asked.
    pub(crate) rounds: u32,
}

/// Where a turn keeps what happens: the conversation's history, the tokens it used, and
/// the summary that replaces its first messages. Each method sends at once (in the order
/// called) and resolves once it is kept.
pub(crate) trait History: Send + Sync {
    /// Appends `message`.
    fn append(
        &self,
        message: &Message,
    ) -> impl Future<Output = Result<(), store::Error>> + Send + 'static;

    /// Adds `tokens` to the conversation's count.
    fn used(&self, tokens: u64) -> impl Future<Output = Result<(), store::Error>> + Send + 'static;

    /// Keeps `summary`, in place of the one kept before.
    fn compacted(
        &self,
        summary: &Summary,
    ) -> impl Future<Output = Result<(), store::Error>> + Send + 'static;
}

/// The history of turn `turn` of `conversation`, in the store.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Durable<'a> {
    /// The store.
    pub(crate) store: &'a Store,
    /// The conversation.
    pub(crate) conversation: &'a str,
    /// The turn.
    pub(crate) turn: u64,
}

impl History for Durable<'_> {
    fn append(
        &self,
        message: &Message,
    ) -> impl Future<Output = Result<(), store::Error>> + Send + 'static {
        let at_ms = crate::clock::wall_ms();
        let appended =
            (self.store).conversation_append(self.conversation, self.turn, message, at_ms);
        async move { appended.await.map(drop) }
    }

    fn used(&self, tokens: u64) -> impl Future<Output = Result<(), store::Error>> + Send + 'static {
        let used = self.store.conversation_tokens(self.conversation, tokens);
        async move { used.await.map(drop) }
    }

    fn compacted(
        &self,
        summary: &Summary,
    ) -> impl Future<Output = Result<(), store::Error>> + Send + 'static {
        let through = u64::try_from(summary.through()).unwrap_or(u64::MAX);
        (self.store).conversation_summary(self.conversation, through, summary.text())
    }
}

/// A turn, ready to run.
#[derive(Debug)]
pub(crate) struct Turn<'a, M, O: ?Sized, H> {
    /// The model.
    pub(crate) model: &'a M,
    /// Where its tool calls run, and its deadline.
    pub(crate) runner: Runner<'a, O>,
    /// The tools offered.
    pub(crate) offer: &'a Offer,
    /// Where the history is kept.
    pub(crate) history: &'a H,
    /// The system prompt: the instruction as it is when the turn starts.
    pub(crate) system: Message,
    /// The skills, of which the caller's unit's loaded ones are shown.
    pub(crate) skills: &'a Skills,
    /// The instance, the conversation and the turn's number.
    pub(crate) place: Place<'a>,
    /// The turn's run id and trace.
    pub(crate) ids: TurnIds,
    /// A fresh random span id for each call.
    pub(crate) spans: fn() -> [u8; 8],
}

impl<M: Model, O: OwnTools + ?Sized, H: History> Turn<'_, M, O, H> {
    /// Runs the turn over `context` (the conversation so far, the turn's first messages
    /// included), whose history it extends as it goes.
    pub(crate) async fn run(&self, context: &mut Context) -> Result<Ended, TurnError> {
        let deadline = self.runner.deadline;
        let unit = self.runner.caller.unit();
        let mut rounds = 0;
        loop {
            if Instant::now() >= deadline {
                return Err(TurnError::Deadline);
            }
            rounds += 1;
            let skills = self.skills.messages(&unit);
            let request = request(&self.system, skills, context, self.offer.functions());
            let reply = match self.model.complete(&request, deadline).await {
                Ok(reply) => reply,
                Err(ModelError::Deadline) => return Err(TurnError::Deadline),
                Err(e) => return Err(TurnError::Model(e)),
            };
            let used = self.history.used(reply.usage.total());
            let said = Message::Assistant {
                text: reply.text.clone(),
                calls: reply.calls.clone(),
            };
            let appended = self.history.append(&said);
            used.await?;
            appended.await?;
            if reply.calls.is_empty() {
                context.history.push(said);
                return Ok(Ended {
                    text: reply.text,
                    finished: false,
                    rounds,
                });
            }
            let round = Round {
                model: self.model,
                history: self.history,
                shown: &request.messages,
                context: &*context,
                deadline,
                compacted: Mutex::default(),
            };
            let (results, finished) = self.calls(rounds, &reply.calls, &round).await?;
            let compacted = round
                .compacted
                .into_inner()
                .unwrap_or_else(|p| p.into_inner());
            drop(request);
            context.history.push(said);
            context.history.extend(results);
            if let Some(summary) = compacted {
                self.history.compacted(&summary).await?;
                context.summary = Some(summary);
            }
            if finished {
                let summary = || summary(self.offer, &reply.calls);
                return Ok(Ended {
                    text: reply.text.or_else(summary),
                    finished: true,
                    rounds,
                });
            }
        }
    }

    /// Runs the calls of the model's `round`th reply at once, each result appended as its
    /// call ends: the results in that order, and whether one was a `finish` that ended the
    /// unit.
    async fn calls(
        &self,
        round: u32,
        calls: &[ToolCall],
        reasoning: &dyn Reasoning,
    ) -> Result<(Vec<Message>, bool), TurnError> {
        let mut running: FuturesUnordered<_> = calls
            .iter()
            .enumerate()
            .map(|(index, call)| {
                let meta = call_meta(self.place, &self.ids, round, index, (self.spans)());
                let planned: Planned = plan(self.offer, call);
                async move {
                    let done = self.runner.run(planned, meta, reasoning).await;
                    (call.id.clone(), done)
                }
            })
            .collect();
        let mut appended = Vec::with_capacity(calls.len());
        let mut results = Vec::with_capacity(calls.len());
        let mut finished = false;
        while let Some((call_id, done)) = running.next().await {
            finished |= done.finished;
            let result = Message::Tool {
                call_id,
                text: done.text,
            };
            // Sent now; its answer is awaited with the others'.
            appended.push(self.history.append(&result));
            results.push(result);
        }
        for appended in appended {
            appended.await?;
        }
        Ok((results, finished))
    }
}

/// The summary given to the first `finish` of `calls`, if it gave one.
fn summary(offer: &Offer, calls: &[ToolCall]) -> Option<String> {
    calls.iter().find_map(|call| match plan(offer, call) {
        Planned::Own { tool, arguments } if tool == FINISH => {
            arguments["summary"].as_str().map(str::to_owned)
        }
        _ => None,
    })
}

/// A round of a turn, as its model-only tools reason over it: the model, the messages it was
/// shown, the context they came from, the turn's deadline; the tokens of each call are the
/// turn's, and a compaction is held until the round's calls end (the last to end is kept).
struct Round<'r, M, H> {
    model: &'r M,
    history: &'r H,
    shown: &'r [Cow<'r, Message>],
    context: &'r Context,
    deadline: Instant,
    compacted: Mutex<Option<Summary>>,
}

impl<M: Model, H: History> Round<'_, M, H> {
    /// The model's text for `request`, its tokens counted.
    async fn text(&self, request: Request<'_>) -> Result<String, agentd_tools::Error> {
        let reply = self.model.complete(&request, self.deadline).await;
        let reply = reply.map_err(|e| agentd_tools::Error::Model {
            detail: e.to_string(),
        })?;
        let used = self.history.used(reply.usage.total()).await;
        used.map_err(|e| agentd_tools::Error::Store {
            detail: e.to_string(),
        })?;
        Ok(reply.text.unwrap_or_default())
    }
}

impl<M: Model, H: History> Reasoning for Round<'_, M, H> {
    fn ask<'a>(&'a self, prompt: &'a str) -> Answer<'a, String> {
        let mut messages: Vec<Cow<'_, Message>> =
            self.shown.iter().map(|m| Cow::Borrowed(&**m)).collect();
        messages.push(Cow::Owned(Message::User {
            text: prompt.to_owned(),
        }));
        let request = Request {
            messages,
            tools: Cow::Borrowed(&[]),
        };
        Box::pin(self.text(request))
    }

    fn compact<'a>(&'a self, keep: usize, prompt: &'a str) -> Answer<'a, Compacted> {
        Box::pin(async move {
            let context = self.context;
            let (from, cut) = (context.summarized(), context.cut(keep));
            let total = context.history.len();
            if cut == from {
                return Ok(Compacted::new(from, total - from, None));
            }
            let messages = [
                Message::System {
                    text: prompt.to_owned(),
                },
                Message::User {
                    text: context.transcript(cut),
                },
            ];
            let request = Request {
                messages: messages.into_iter().map(Cow::Owned).collect(),
                tools: Cow::Borrowed(&[]),
            };
            let text = self.text(request).await?;
            if text.trim().is_empty() {
                return Err(agentd_tools::Error::Model {
                    detail: "the model wrote no summary".to_owned(),
                });
            }
            let summary = Summary::new(cut, text.clone());
            *self.compacted.lock().unwrap_or_else(|p| p.into_inner()) = Some(summary);
            Ok(Compacted::new(cut, total - cut, Some(text)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finish_without_text_ends_with_its_summary() {
        let own = ["memory.set", "finish"].map(|t| agentd_tools::tool(t).unwrap());
        let (offer, _) = Offer::new(own, []);
        let call = |name: &str, arguments: &str| ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: arguments.into(),
        };
        let calls = [
            call("memory_set", "{}"),
            call("finish", r#"{"status": "done", "summary": "all set"}"#),
        ];
        assert_eq!(summary(&offer, &calls).as_deref(), Some("all set"));
        assert_eq!(summary(&offer, &[call("finish", "{")]), None);
        assert_eq!(summary(&offer, &[]), None);
    }
}
