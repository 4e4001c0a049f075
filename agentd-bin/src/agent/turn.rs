//! One turn of a conversation: the model is shown the conversation (a system prompt first)
//! with the tools it may call; each tool call of its reply runs (those of one reply at once)
//! and its result goes back; again, until it answers without a tool call, or a round in which
//! it called `finish` ends.
//!
//! Every message is appended to the conversation's durable history as it happens (a tool's
//! result as its call ends, so in the order the calls end), and the tokens of every model
//! call are added to the conversation's count. The turn has a deadline: the model's calls
//! are bounded by it, each tool call by what is left of it ([`Runner`]), and no round starts
//! once it has passed.
//!
//! [`request`] is the pure part: what the model is shown, from the history as it is. A
//! history whose tool calls lack a result (a turn that ended in the middle of a round: the
//! daemon stopped, the store failed) is shown with a result saying so for each, so that
//! every call the model sees is answered.

use std::collections::BTreeSet;
use std::fmt;

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use tokio::time::Instant;

use super::calls::{FINISH, OwnTools, Planned, Runner, plan};
use super::meta::{Place, TurnIds, call_meta};
use super::model::{Function, Message, Model, ModelError, Request, ToolCall};
use super::names::Offer;
use crate::store::{self, Store};

/// The system prompt of every request, until the instance has an instruction.
pub(crate) const SYSTEM: &str = "You are agentd, an agent daemon. Answer the messages of \
    this conversation. Use the tools offered when they help; when the work asked for is \
    done, say so, or call finish.";

/// What the model reads for a call of the history that has no result.
const LOST: &str = "error: the call's result was lost: its turn ended before it came";

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

/// Where a turn keeps what happens: the conversation's history and the tokens it used.
/// Each method sends at once (in the order called) and resolves once it is kept.
pub(crate) trait History: Send + Sync {
    /// Appends `message`.
    fn append(
        &self,
        message: &Message,
    ) -> impl Future<Output = Result<(), store::Error>> + Send + 'static;

    /// Adds `tokens` to the conversation's count.
    fn used(&self, tokens: u64) -> impl Future<Output = Result<(), store::Error>> + Send + 'static;
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
    /// The instance, the conversation and the turn's number.
    pub(crate) place: Place<'a>,
    /// The turn's run id and trace.
    pub(crate) ids: TurnIds,
    /// A fresh random span id for each call.
    pub(crate) spans: fn() -> [u8; 8],
}

impl<M: Model, O: OwnTools + ?Sized, H: History> Turn<'_, M, O, H> {
    /// Runs the turn over `history` (the conversation so far, the turn's first messages
    /// included), which it extends as it goes.
    pub(crate) async fn run(&self, history: &mut Vec<Message>) -> Result<Ended, TurnError> {
        let deadline = self.runner.deadline;
        let mut rounds = 0;
        loop {
            if Instant::now() >= deadline {
                return Err(TurnError::Deadline);
            }
            rounds += 1;
            let request = request(SYSTEM, history, self.offer.functions());
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
            history.push(said);
            used.await?;
            appended.await?;
            if reply.calls.is_empty() {
                return Ok(Ended {
                    text: reply.text,
                    finished: false,
                    rounds,
                });
            }
            let finished = self.calls(rounds, &reply.calls, history).await?;
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
    /// call ends: whether one was a `finish` that ended the unit.
    async fn calls(
        &self,
        round: u32,
        calls: &[ToolCall],
        history: &mut Vec<Message>,
    ) -> Result<bool, TurnError> {
        let mut running: FuturesUnordered<_> = calls
            .iter()
            .enumerate()
            .map(|(index, call)| {
                let meta = call_meta(self.place, &self.ids, round, index, (self.spans)());
                let planned: Planned = plan(self.offer, call);
                async move { (call.id.clone(), self.runner.run(planned, meta).await) }
            })
            .collect();
        let mut appended = Vec::with_capacity(calls.len());
        let mut finished = false;
        while let Some((call_id, done)) = running.next().await {
            finished |= done.finished;
            let result = Message::Tool {
                call_id,
                text: done.text,
            };
            // Sent now; its answer is awaited with the others'.
            appended.push(self.history.append(&result));
            history.push(result);
        }
        for appended in appended {
            appended.await?;
        }
        Ok(finished)
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

/// What the model is shown: the system prompt, then `history` with a result for each call
/// that has none ([`LOST`], right after its reply's other results; a result of no call
/// shown is left out), and the functions it may call.
pub(crate) fn request(system: &str, history: &[Message], tools: &[Function]) -> Request {
    let mut messages = Vec::with_capacity(history.len() + 1);
    messages.push(Message::System {
        text: system.to_owned(),
    });
    // The calls of the last reply not answered yet, in its order.
    let mut waiting: Vec<String> = Vec::new();
    let unanswered = |waiting: &mut Vec<String>, messages: &mut Vec<Message>| {
        for call_id in waiting.drain(..) {
            messages.push(Message::Tool {
                call_id,
                text: LOST.to_owned(),
            });
        }
    };
    for message in history {
        match message {
            Message::Tool { call_id, .. } => {
                let Some(at) = waiting.iter().position(|id| id == call_id) else {
                    continue;
                };
                waiting.remove(at);
            }
            other => {
                unanswered(&mut waiting, &mut messages);
                if let Message::Assistant { calls, .. } = other {
                    let mut ids = BTreeSet::new();
                    // A reply that gave two calls one id is answered once for it.
                    waiting = calls
                        .iter()
                        .filter(|c| ids.insert(c.id.as_str()))
                        .map(|c| c.id.clone())
                        .collect();
                }
            }
        }
        messages.push(message.clone());
    }
    unanswered(&mut waiting, &mut messages);
    Request {
        messages,
        tools: tools.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Message {
        Message::User { text: text.into() }
    }

    fn asked(ids: &[&str]) -> Message {
        Message::Assistant {
            text: None,
            calls: ids
                .iter()
                .map(|id| ToolCall {
                    id: (*id).into(),
                    name: "f".into(),
                    arguments: "{}".into(),
                })
                .collect(),
        }
    }

    fn result(id: &str) -> Message {
        Message::Tool {
            call_id: id.into(),
            text: "ok".into(),
        }
    }

    fn lost(id: &str) -> Message {
        Message::Tool {
            call_id: id.into(),
            text: LOST.into(),
        }
    }

    #[test]
    fn the_system_prompt_comes_first_with_the_tools() {
        let tools = [Function {
            name: "f".into(),
            description: "d".into(),
            parameters: serde_json::json!({"type": "object"}),
        }];
        let request = request("sys", &[user("hi")], &tools);
        assert_eq!(
            request.messages,
            [Message::System { text: "sys".into() }, user("hi")]
        );
        assert_eq!(request.tools, tools);
    }

    #[test]
    fn every_call_shown_has_a_result() {
        let history = [
            user("a"),
            asked(&["1", "2", "3"]),
            result("2"),
            user("b"),
            asked(&["4", "4"]),
            result("9"),
            asked(&["5"]),
        ];
        let shown = request("s", &history, &[]).messages;
        assert_eq!(
            shown[1..],
            [
                user("a"),
                asked(&["1", "2", "3"]),
                result("2"),
                lost("1"),
                lost("3"),
                user("b"),
                asked(&["4", "4"]),
                lost("4"),
                asked(&["5"]),
                lost("5"),
            ]
        );
        // A whole history is shown as it is.
        let whole = [user("a"), asked(&["1"]), result("1"), user("b")];
        assert_eq!(request("s", &whole, &[]).messages[1..], whole);
    }

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
