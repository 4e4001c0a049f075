//! `message.send`: a message into one of the instance's own conversations, appended to
//! its durable inbox with its sender (the calling unit) and the time. A subagent's
//! conversation ([`subagent::conversation`](crate::subagent::conversation)) is refused: it
//! is sent to with `subagent.send`, which runs the subagent again when it had settled.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::Error;
use crate::schema::parse;

/// A conversation id's largest size, in bytes.
pub const CONVERSATION_MAX: usize = 128;

/// A message of an inbox.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Message {
    /// Its id: its place in the conversation's inbox, from 1.
    pub id: u64,
    /// The unit that sent it ([`Caller::unit`](crate::Caller::unit)).
    pub from: String,
    /// Its text.
    pub text: String,
    /// When it was sent, in Unix milliseconds.
    pub at_ms: i64,
}

impl Message {
    /// Message `id` from `from` saying `text` at `at_ms`.
    pub fn new(id: u64, from: &str, text: &str, at_ms: i64) -> Self {
        Self {
            id,
            from: from.to_owned(),
            text: text.to_owned(),
            at_ms,
        }
    }
}

/// The durable inboxes of the instance's conversations.
pub trait Messages: Send + Sync {
    /// Appends `text` from `from` at `at_ms` to `conversation`'s inbox; its id (ids count
    /// from 1 in each conversation).
    fn send(
        &self,
        conversation: &str,
        from: &str,
        text: &str,
        at_ms: i64,
    ) -> impl Future<Output = Result<u64, Error>> + Send;

    /// The first message of `conversation`'s inbox whose id is past `after`, if any.
    fn after(
        &self,
        conversation: &str,
        after: u64,
    ) -> impl Future<Output = Result<Option<Message>, Error>> + Send;
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendArgs {
    conversation: String,
    text: String,
}

/// Checks a conversation id: 1..=128 bytes.
pub(crate) fn check_conversation(tool: &str, pointer: &str, id: &str) -> Result<(), Error> {
    if id.is_empty() || id.len() > CONVERSATION_MAX {
        return Err(Error::invalid(
            tool,
            pointer,
            "maxLength",
            "a conversation id is 1 to 128 bytes",
        ));
    }
    Ok(())
}

/// Runs `message.send` from `from` at `at_ms`, its text at most `max` bytes.
pub(crate) async fn send(
    messages: &impl Messages,
    from: &str,
    at_ms: i64,
    max: usize,
    arguments: Value,
) -> Result<Value, Error> {
    let tool = "message.send";
    let args: SendArgs = parse(tool, arguments)?;
    check_conversation(tool, "/conversation", &args.conversation)?;
    if crate::subagent::of_conversation(&args.conversation).is_some() {
        return Err(Error::invalid(
            tool,
            "/conversation",
            "subagent",
            "a subagent's conversation is sent to with subagent.send",
        ));
    }
    if args.text.len() > max {
        return Err(Error::TooLarge {
            what: "text",
            size: args.text.len(),
            max,
        });
    }
    let id = messages
        .send(&args.conversation, from, &args.text, at_ms)
        .await?;
    Ok(json!({"id": id}))
}
