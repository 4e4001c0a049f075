//! What the agent asks a model and what it answers: a conversation's messages and the tools
//! it may call in, the model's text or tool calls and the tokens it used out.
//!
//! [`Model`] is the boundary the turns are written against; the OpenAI-compatible Chat
//! Completions provider implements it over hyper.

pub(crate) mod chat;
pub(crate) mod retry;
mod wire;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::fmt;
use std::future::Future;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;

use crate::cause::{self, Cause};

/// One message of a conversation, as the model is shown it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub(crate) enum Message {
    /// The system prompt: the instruction, and notes such as a subagent's resources.
    System {
        /// Its text.
        text: String,
    },
    /// What a person or another unit said.
    User {
        /// Its text.
        text: String,
    },
    /// What the model answered: text, tool calls, or both.
    Assistant {
        /// Its text, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// The tools it called, in its order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        calls: Vec<ToolCall>,
    },
    /// The result of one tool call, sent back to the model.
    Tool {
        /// The call it answers ([`ToolCall::id`]).
        call_id: String,
        /// The result, as the model reads it.
        text: String,
    },
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ToolCall {
    /// The model's id for it, echoed in the [`Message::Tool`] that answers it.
    pub(crate) id: String,
    /// The function's name, as offered ([`Function::name`]).
    pub(crate) name: String,
    /// Its arguments: JSON text, as the model wrote them (not checked here).
    pub(crate) arguments: String,
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Function {
    /// Its name, as models accept them (`^[a-zA-Z0-9_-]{1,64}$`).
    pub(crate) name: String,
    /// What it does.
    pub(crate) description: String,
    /// The JSON Schema of its arguments.
    pub(crate) parameters: Value,
}

/// One completion asked of the model. It borrows what it can (a conversation's history, the
/// tools offered), so that asking again costs no copy of them.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Request<'a> {
    /// The conversation so far, the system prompt first.
    pub(crate) messages: Vec<Cow<'a, Message>>,
    /// The tools it may call; none for a call that must answer in text.
    pub(crate) tools: Cow<'a, [Function]>,
}

#[cfg(test)]
impl Request<'_> {
    /// A request owning `messages` and `tools`.
    pub(crate) fn owned(messages: Vec<Message>, tools: Vec<Function>) -> Request<'static> {
        Request {
            messages: messages.into_iter().map(Cow::Owned).collect(),
            tools: Cow::Owned(tools),
        }
    }
}

/// Tokens a completion used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct Usage {
    /// Tokens read (the prompt).
    pub(crate) input: u64,
    /// Tokens written (the answer).
    pub(crate) output: u64,
}

impl Usage {
    /// Both together.
    pub(crate) fn total(self) -> u64 {
        self.input.saturating_add(self.output)
    }
}

/// Why the model stopped writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finish {
    /// It ended its answer.
    Stop,
    /// It called tools and waits for their results.
    ToolCalls,
    /// It reached `max_output_tokens`.
    Length,
    /// Its provider filtered the answer.
    ContentFilter,
}

/// The model's answer to a [`Request`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reply {
    /// Its text, if any.
    pub(crate) text: Option<String>,
    /// The tools it called, in its order.
    pub(crate) calls: Vec<ToolCall>,
    /// Why it stopped.
    pub(crate) finish: Finish,
    /// The tokens it used.
    pub(crate) usage: Usage,
}

/// Why a completion was not had.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum ModelError {
    /// The deadline passed (retries included).
    Deadline,
    /// The provider answered an HTTP status that is not retried, or a retried one past the
    /// deadline.
    Status {
        /// The status.
        status: u16,
        /// The start of its body, at most 200 bytes.
        detail: String,
    },
    /// The connection failed, or the provider's address or key cannot be used.
    Transport {
        /// How, with every cause.
        detail: String,
        /// The error underneath, when there is one.
        source: Option<Cause>,
    },
    /// The answer was not a Chat Completions answer.
    Decode {
        /// What was wrong.
        detail: String,
        /// The error underneath (the event stream's, the JSON's), when there is one.
        source: Option<Cause>,
    },
    /// The reply called more tools than the bound: none of them runs.
    TooManyCalls {
        /// The bound ([`wire::CALLS_MAX`]).
        max: usize,
    },
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Deadline => f.write_str("the model did not answer before the deadline"),
            Self::Status { status, detail } => write!(f, "the model answered {status}: {detail}"),
            Self::Transport { detail, .. } => {
                write!(f, "the model could not be reached: {detail}")
            }
            Self::Decode { detail, .. } => {
                write!(f, "the model's answer was not understood: {detail}")
            }
            Self::TooManyCalls { max } => {
                write!(f, "the model's reply called more than {max} tools at once")
            }
        }
    }
}

impl ModelError {
    /// [`ModelError::Transport`] of `error`, told with its causes.
    pub(crate) fn transport(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Transport {
            detail: cause::chain(&error),
            source: Some(Cause::new(error)),
        }
    }

    /// [`ModelError::Decode`] of `detail`, with `source` under it.
    pub(crate) fn decode(detail: impl Into<String>, source: Option<Cause>) -> Self {
        Self::Decode {
            detail: detail.into(),
            source,
        }
    }
}

impl std::error::Error for ModelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Transport { source, .. } | Self::Decode { source, .. } => {
                source.as_ref().map(Cause::error)
            }
            Self::Deadline | Self::Status { .. } | Self::TooManyCalls { .. } => None,
        }
    }
}

/// A model: completes a conversation, before `deadline`.
pub(crate) trait Model: Send + Sync + 'static {
    /// The model's reply to `request`; [`ModelError::Deadline`] when `deadline` passes first.
    fn complete(
        &self,
        request: &Request<'_>,
        deadline: Instant,
    ) -> impl Future<Output = Result<Reply, ModelError>> + Send;
}

/// A shared model is a model: the agent's conversations and its subagents ask the same one.
impl<M: Model> Model for std::sync::Arc<M> {
    fn complete(
        &self,
        request: &Request,
        deadline: Instant,
    ) -> impl Future<Output = Result<Reply, ModelError>> + Send {
        M::complete(self, request, deadline)
    }
}
