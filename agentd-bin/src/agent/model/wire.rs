//! The Chat Completions wire, with no IO: the body of a request built from a [`Request`],
//! and an answer read from its bytes as they arrive ([`Answer`]) — an event stream of
//! `chat.completion.chunk`s ended by `data: [DONE]`, or one `chat.completion` JSON object.
//!
//! Both forms go through one accumulator: a whole answer's `message` is read as the one
//! delta of a stream. Content deltas are joined; tool-call deltas are gathered by their
//! `index` (the id and name come in the first, the arguments are joined); the last
//! `finish_reason` and `usage` seen are kept.
//!
//! A reply calls at most [`CALLS_MAX`] tools: the delta that begins one more refuses the
//! answer ([`ModelError::TooManyCalls`]), so that none of its calls runs and its turn fails
//! (the reply is not kept: the conversation goes on from the messages before it).

use std::collections::BTreeMap;

use mcp_transport::sse::Decoder;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::{Finish, Message, ModelError, Reply, Request, ToolCall, Usage};
use crate::cause::Cause;

/// The most tool calls one reply makes.
pub(crate) const CALLS_MAX: usize = 64;

/// The body of the request that asks `model` to complete `request`, its answer streamed
/// with its usage, at most `max_output_tokens` written (`max_completion_tokens`, the name
/// the API gives it now; `max_tokens` is refused by its newer models).
pub(crate) fn body(request: &Request<'_>, model: &str, max_output_tokens: Option<u64>) -> Vec<u8> {
    let messages = request
        .messages
        .iter()
        .map(|m| WireMessage::from(&**m))
        .collect();
    let tools = request
        .tools
        .iter()
        .map(|f| Tool {
            kind: "function",
            function: ToolFunction {
                name: &f.name,
                description: &f.description,
                parameters: &f.parameters,
            },
        })
        .collect();
    let body = Body {
        model,
        messages,
        tools,
        max_completion_tokens: max_output_tokens,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
    };
    // Strings and JSON values only: serialising cannot fail.
    serde_json::to_vec(&body).unwrap_or_default()
}

/// An answer read as it arrives: its bytes are pushed, then it is finished at the end of
/// the body. It holds at most `limit` bytes, whatever its form.
#[derive(Debug)]
pub(crate) struct Answer {
    form: Form,
    completion: Completion,
    received: usize,
    limit: usize,
}

/// How an answer comes.
#[derive(Debug)]
enum Form {
    /// An event stream; `done` once `data: [DONE]` came.
    Stream {
        /// Boxed: it holds the buffers of the event being read.
        decoder: Box<Decoder>,
        done: bool,
    },
    /// One JSON object, read whole at the end.
    Json(Vec<u8>),
}

impl Answer {
    /// An answer in an event stream (`text/event-stream`) when `streamed`, else one JSON
    /// object; at most `limit` bytes.
    pub(crate) fn new(streamed: bool, limit: usize) -> Self {
        let form = match streamed {
            true => Form::Stream {
                decoder: Box::new(Decoder::new(limit)),
                done: false,
            },
            false => Form::Json(Vec::new()),
        };
        Self {
            form,
            completion: Completion::default(),
            received: 0,
            limit,
        }
    }

    /// Takes bytes of the body; `true` once the answer is complete (`data: [DONE]` came:
    /// what follows is not read).
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Result<bool, ModelError> {
        if let Form::Stream { done: true, .. } = self.form {
            return Ok(true);
        }
        self.received = self.received.saturating_add(bytes.len());
        if self.received > self.limit {
            let detail = format!("the answer is over {} bytes", self.limit);
            return Err(decode(detail));
        }
        match &mut self.form {
            Form::Json(buffer) => {
                buffer.extend_from_slice(bytes);
                Ok(false)
            }
            Form::Stream { decoder, done } => {
                decoder.push(bytes);
                while let Some(event) = decoder.next_event() {
                    let event = event.map_err(|e| caused(e.to_string(), e))?;
                    if event.data.is_empty() {
                        continue;
                    }
                    if event.data.trim() == "[DONE]" {
                        *done = true;
                        return Ok(true);
                    }
                    let chunk = serde_json::from_str(&event.data).map_err(|e| {
                        caused(format!("a chunk is not a completion chunk: {e}"), e)
                    })?;
                    self.completion.add(chunk)?;
                }
                Ok(false)
            }
        }
    }

    /// The reply, once the body has ended. A stream that ended before `data: [DONE]` is
    /// taken when a `finish_reason` came (the usage may then be missing), else refused.
    pub(crate) fn finish(self) -> Result<Reply, ModelError> {
        let mut completion = self.completion;
        match self.form {
            Form::Json(buffer) => {
                let chunk = serde_json::from_slice(&buffer)
                    .map_err(|e| caused(format!("the answer is not a completion: {e}"), e))?;
                completion.add(whole(chunk))?;
            }
            Form::Stream { done: true, .. } => {}
            Form::Stream { .. } if completion.finish.is_some() => {}
            Form::Stream { .. } => {
                return Err(decode("the stream ended before its answer did"));
            }
        }
        completion.reply()
    }
}

/// A whole answer's tool calls, which carry no `index`, numbered in their order.
fn whole(mut chunk: Chunk) -> Chunk {
    for choice in chunk.choices.iter_mut().flatten() {
        let calls = choice.delta.as_mut().and_then(|d| d.tool_calls.as_mut());
        for (i, call) in calls.into_iter().flatten().enumerate() {
            call.index.get_or_insert(i);
        }
    }
    chunk
}

/// [`ModelError::Decode`] of `detail` alone.
fn decode(detail: impl Into<String>) -> ModelError {
    ModelError::decode(detail, None)
}

/// [`ModelError::Decode`] of `detail`, `error` under it.
fn caused(detail: String, error: impl std::error::Error + Send + Sync + 'static) -> ModelError {
    ModelError::decode(detail, Some(Cause::new(error)))
}

/// The answer gathered so far.
#[derive(Debug, Default)]
struct Completion {
    text: String,
    /// By `index`: at most [`CALLS_MAX`].
    calls: BTreeMap<usize, PartialCall>,
    /// The index of the call begun last.
    last: Option<usize>,
    finish: Option<String>,
    usage: Usage,
}

/// A tool call whose deltas are still coming.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl Completion {
    /// Adds one chunk: its first choice's delta, its finish reason, its usage.
    fn add(&mut self, chunk: Chunk) -> Result<(), ModelError> {
        if let Some(error) = chunk.error {
            return Err(decode(format!("the provider sent an error: {error}")));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Usage {
                input: usage.prompt_tokens,
                output: usage.completion_tokens,
            };
        }
        // One completion is asked for (`n` is 1): other choices are not ours.
        let choice = chunk.choices.into_iter().flatten().find(|c| c.index == 0);
        let Some(choice) = choice else {
            return Ok(());
        };
        if let Some(reason) = choice.finish_reason {
            self.finish = Some(reason);
        }
        let Some(delta) = choice.delta else {
            return Ok(());
        };
        if let Some(content) = delta.content {
            self.text.push_str(&content);
        }
        for call in delta.tool_calls.into_iter().flatten() {
            self.add_call(call)?;
        }
        Ok(())
    }

    /// Adds one tool-call delta to the call of its `index`. A delta without one (some
    /// servers send each call whole) begins a call when it carries a new id (at the index
    /// after the call begun last), else continues the call begun last.
    fn add_call(&mut self, delta: CallDelta) -> Result<(), ModelError> {
        let index = match (delta.index, self.last) {
            (Some(index), _) => index,
            (None, None) => 0,
            (None, Some(last)) => match &delta.id {
                Some(id)
                    if !id.is_empty() && self.calls.get(&last).is_some_and(|c| c.id != *id) =>
                {
                    last.checked_add(1)
                        .ok_or_else(|| decode(format!("tool call {last} has no index after it")))?
                }
                _ => last,
            },
        };
        if !self.calls.contains_key(&index) {
            if self.calls.len() == CALLS_MAX {
                return Err(ModelError::TooManyCalls { max: CALLS_MAX });
            }
            self.last = Some(index);
        }
        let call = self.calls.entry(index).or_default();
        if let Some(id) = delta.id
            && call.id.is_empty()
        {
            call.id = id;
        }
        let Some(function) = delta.function else {
            return Ok(());
        };
        if let Some(name) = function.name
            && call.name.is_empty()
        {
            call.name = name;
        }
        if let Some(arguments) = function.arguments {
            call.arguments.push_str(&arguments);
        }
        Ok(())
    }

    /// The reply: a call without a name is refused; one without an id is given
    /// `call_<index>`, which the conversation echoes back.
    fn reply(self) -> Result<Reply, ModelError> {
        let calls = self
            .calls
            .into_iter()
            .map(|(index, c)| match c.name.is_empty() {
                true => Err(decode(format!("tool call {index} has no name"))),
                false => Ok(ToolCall {
                    id: match c.id.is_empty() {
                        true => format!("call_{index}"),
                        false => c.id,
                    },
                    name: c.name,
                    arguments: c.arguments,
                }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let finish = match self.finish.as_deref() {
            Some("stop") => Finish::Stop,
            Some("length") => Finish::Length,
            Some("content_filter") => Finish::ContentFilter,
            Some("tool_calls" | "function_call") => Finish::ToolCalls,
            // None, or a server's own word: the calls tell.
            _ if calls.is_empty() => Finish::Stop,
            _ => Finish::ToolCalls,
        };
        Ok(Reply {
            text: (!self.text.is_empty()).then_some(self.text),
            calls,
            finish,
            usage: self.usage,
        })
    }
}

/// A `chat.completion.chunk`, or a whole `chat.completion` (its `message` read as the
/// delta). Fields not read here are ignored. Every field read may be absent or `null`, and
/// both read the same: a choice's `index` is 0, a token count is 0 ([`nullable`]), and an
/// optional field (a content, a list of tool calls, a piece of a call, a finish reason, the
/// usage, an error) is none. A value of another kind (a string where a number goes, a `null`
/// inside a list) makes the chunk no completion chunk.
#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default, deserialize_with = "nullable")]
    index: u32,
    #[serde(default, alias = "message")]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Debug, Deserialize)]
struct CallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default, deserialize_with = "nullable")]
    prompt_tokens: u64,
    #[serde(default, deserialize_with = "nullable")]
    completion_tokens: u64,
}

/// A field whose `null` reads as its default, as its absence does.
fn nullable<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(
    field: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(field)?.unwrap_or_default())
}

/// The request's body.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    /// Left out when there are none: an empty list is refused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u64>,
    stream: bool,
    stream_options: StreamOptions,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// A message as the API takes it.
#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        /// `null` beside tool calls when there is no text.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

impl<'a> From<&'a Message> for WireMessage<'a> {
    fn from(message: &'a Message) -> Self {
        match message {
            Message::System { text } => Self::System { content: text },
            Message::User { text } => Self::User { content: text },
            Message::Assistant { text, calls } => Self::Assistant {
                // A message with neither text nor calls still has content.
                content: match (text, calls.is_empty()) {
                    (Some(text), _) => Some(text),
                    (None, true) => Some(""),
                    (None, false) => None,
                },
                tool_calls: calls
                    .iter()
                    .map(|c| WireCall {
                        id: &c.id,
                        kind: "function",
                        function: CallFunction {
                            name: &c.name,
                            arguments: &c.arguments,
                        },
                    })
                    .collect(),
            },
            Message::Tool { call_id, text } => Self::Tool {
                tool_call_id: call_id,
                content: text,
            },
        }
    }
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: CallFunction<'a>,
}

#[derive(Serialize)]
struct CallFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct Tool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: ToolFunction<'a>,
}

#[derive(Serialize)]
struct ToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

#[cfg(test)]
mod tests;
