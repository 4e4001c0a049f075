//! `instruction.read` and `instruction.subscribe`: the instruction the agent follows, an MCP
//! resource that the daemon reads through its connection to the resource's server and uses
//! as the system prompt.
//!
//! The instruction is the resource's text contents, joined by a newline, at most
//! [`TEXT_MAX`] bytes: a resource holding a blob is refused (`not_text`), one past the bound
//! `too_large`, and the instruction read before stays. It is followed by a subscription
//! where the server offers them, else by a refresh on a period; an MCP Events binding whose
//! `into` is [`STREAM`] reads it again at each occurrence.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::Error;
use crate::schema::{Empty, parse};

/// The largest instruction, in bytes of text.
pub const TEXT_MAX: usize = 64 * 1024;

/// The stream a binding appends into to have the instruction read again at each occurrence
/// (`into = "instruction"`).
pub const STREAM: &str = "instruction";

/// Where the instruction is read from: a server, by its configured name, and a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Source {
    /// The server.
    pub server: String,
    /// The resource's URI.
    pub uri: String,
}

impl Source {
    /// Resource `uri` of `server`.
    pub fn new(server: &str, uri: &str) -> Self {
        Self {
            server: server.to_owned(),
            uri: uri.to_owned(),
        }
    }
}

/// The instruction as it is followed now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Current {
    /// Where it is read from; none when no instruction is configured.
    pub source: Option<Source>,
    /// Its text as last read; none before the first read of this source.
    pub text: Option<String>,
    /// When it was last read, in Unix milliseconds.
    pub read_at_ms: Option<i64>,
    /// Whether the server holds a subscription to it (else its refresh follows it).
    pub subscribed: bool,
}

impl Current {
    /// The answer of `instruction.read`: `{"server", "uri", "text", "read_at_ms",
    /// "subscribed"}`, each null when unknown.
    pub fn to_value(&self) -> Value {
        let source = self.source.as_ref();
        json!({
            "server": source.map(|s| &s.server),
            "uri": source.map(|s| &s.uri),
            "text": self.text,
            "read_at_ms": self.read_at_ms,
            "subscribed": self.subscribed,
        })
    }
}

/// The instruction, as the daemon follows it.
pub trait Instruction: Send + Sync {
    /// The instruction as followed now.
    fn current(&self) -> impl Future<Output = Result<Current, Error>> + Send;

    /// Follows `uri` of `server` (the current source's server when `None`) from now on, once
    /// it is read: subscribed where the server offers subscriptions, and the instruction as
    /// read. A read that fails leaves the current source followed: [`Error::NotFound`] for a
    /// server not configured (or none named and none followed), [`Error::NotConnected`],
    /// [`Error::Server`], [`Error::NotText`] or [`Error::TooLarge`].
    fn follow(
        &self,
        server: Option<&str>,
        uri: &str,
    ) -> impl Future<Output = Result<Current, Error>> + Send;
}

/// Checks a URI to follow: a concrete URI, not a template (`{`), which no server lets
/// anyone subscribe to; the rule it breaks.
pub fn check_uri(uri: &str) -> Result<(), &'static str> {
    match uri.is_empty() || uri.contains('{') {
        true => Err("a concrete resource URI, not a template"),
        false => Ok(()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SubscribeArgs {
    uri: String,
    server: Option<String>,
}

/// Runs `instruction.read` or `instruction.subscribe`.
pub(crate) async fn call(
    instruction: &impl Instruction,
    name: &str,
    arguments: Value,
) -> Result<Value, Error> {
    match name {
        "instruction.read" => {
            let Empty {} = parse(name, arguments)?;
            Ok(instruction.current().await?.to_value())
        }
        _ => {
            let args: SubscribeArgs = parse(name, arguments)?;
            check_uri(&args.uri).map_err(|rule| Error::invalid(name, "/uri", "concrete", rule))?;
            let followed = instruction.follow(args.server.as_deref(), &args.uri);
            Ok(followed.await?.to_value())
        }
    }
}
