//! Why a tool call did nothing: [`Error`], with a stable `code` word for each kind.

use std::fmt;

use serde_json::{Value, json};

use crate::Scope;
use crate::runtime::Refused;

/// Why a tool call, or a service call under it, did nothing. Each kind has a stable
/// [`code`](Self::code); [`to_value`](Self::to_value) is the answer a caller hears.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// No tool of that name exists (`unknown_tool`).
    UnknownTool {
        /// The name asked for.
        tool: String,
    },
    /// The tool is not granted to the caller's scope (`not_granted`).
    NotGranted {
        /// The tool.
        tool: String,
        /// The scope whose grants were checked, when there is one.
        scope: Option<Scope>,
    },
    /// The arguments do not fit the tool's input schema (`invalid_arguments`).
    InvalidArguments {
        /// The tool.
        tool: String,
        /// The JSON pointer of the value that failed, inside the arguments.
        pointer: String,
        /// The rule it broke (a JSON Schema keyword, or a rule of the tool).
        rule: String,
        /// What is wrong, in words.
        message: String,
    },
    /// A value past its bound (`too_large`); nothing changed.
    TooLarge {
        /// What is too large (`value`, `content`, `summary`, `text`, `steps`, `limit`, …).
        what: &'static str,
        /// Its size (bytes, or items).
        size: usize,
        /// The bound.
        max: usize,
    },
    /// A memory key that is empty, past 256 bytes or holds a control character (`bad_key`).
    BadKey {
        /// Why.
        reason: &'static str,
    },
    /// A compare-and-set found another version (`version_mismatch`); nothing changed.
    VersionMismatch {
        /// The key.
        key: String,
        /// Its version now (0 when absent).
        current: u64,
    },
    /// A queue operation on a value that is not an array (`not_an_array`).
    NotAnArray {
        /// The key.
        key: String,
    },
    /// The thing to create exists already (`exists`).
    Exists {
        /// What exists.
        what: String,
    },
    /// The thing asked for does not exist (`not_found`).
    NotFound {
        /// What is missing.
        what: String,
    },
    /// The tool is in the catalogue but not built yet (`not_built`).
    NotBuilt {
        /// The tool.
        tool: String,
    },
    /// No workflow run of that id (`unknown_run`).
    UnknownRun {
        /// The id.
        run: String,
    },
    /// No subagent of that id (`unknown_subagent`).
    UnknownSubagent {
        /// The id.
        subagent: String,
    },
    /// No agent runs (no model is configured), so no subagent can run (`no_agent`).
    NoAgent,
    /// The subagent is running, and must settle first (`running`).
    Running {
        /// The subagent's id.
        subagent: String,
    },
    /// As many workflow runs as the bound allows are under way: the run is refused, and may
    /// be asked for again once one ends (`too_many_runs`).
    TooManyRuns {
        /// The bound (`limits.run_concurrency`).
        max: usize,
    },
    /// The unit finished already (`already_finished`).
    AlreadyFinished {
        /// The unit.
        unit: String,
    },
    /// The store failed (`store`); the change may not have been made.
    Store {
        /// What failed.
        detail: String,
    },
    /// The daemon is shutting down (`shutting_down`).
    ShuttingDown,
    /// An answer to a question that does not fit its schema (`bad_answer`); the question
    /// stays open.
    BadAnswer {
        /// The JSON pointer of the value that failed, inside the answer.
        pointer: String,
        /// The rule it broke (a JSON Schema keyword).
        rule: String,
        /// What is wrong, in words.
        message: String,
    },
    /// The runtime MCP Events subscriptions refused (`refused`).
    Refused(Refused),
    /// The MCP server is configured but not connected now (`not_connected`).
    NotConnected {
        /// The server.
        server: String,
    },
    /// The MCP server failed a request, or could not be reached (`server`).
    Server {
        /// The server.
        server: String,
        /// What failed.
        detail: String,
    },
    /// A resource holds binary contents where text is needed (`not_text`).
    NotText {
        /// The resource's URI.
        uri: String,
    },
    /// The model failed, or did not answer in time (`model`).
    Model {
        /// What failed.
        detail: String,
    },
    /// A model-only tool was called outside a model's turn, where it has no context
    /// (`model_only`).
    ModelOnly {
        /// The tool.
        tool: String,
    },
    /// The tool is built and granted, but nothing implements it here (`not_offered`).
    NotOffered {
        /// The tool.
        tool: String,
        /// Why, and what would offer it.
        reason: String,
    },
    /// A command could not be started (`cannot_start`).
    CannotStart {
        /// The program.
        program: String,
        /// Why.
        detail: String,
    },
    /// No MCP server of that name is configured (`unknown_server`).
    UnknownServer {
        /// The server.
        server: String,
    },
    /// A server's tool answered with `isError` (`tool_error`).
    ToolError {
        /// The tool, as `server/tool`.
        tool: String,
        /// The text it answered.
        detail: String,
    },
    /// The call was cut at its caller's bound before it answered (`cut`); a server's call
    /// cut so is cancelled on the wire.
    Cut {
        /// The tool.
        tool: String,
    },
}

impl Error {
    /// The stable word naming the kind of error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownTool { .. } => "unknown_tool",
            Self::NotGranted { .. } => "not_granted",
            Self::InvalidArguments { .. } => "invalid_arguments",
            Self::TooLarge { .. } => "too_large",
            Self::BadKey { .. } => "bad_key",
            Self::VersionMismatch { .. } => "version_mismatch",
            Self::NotAnArray { .. } => "not_an_array",
            Self::Exists { .. } => "exists",
            Self::NotFound { .. } => "not_found",
            Self::NotBuilt { .. } => "not_built",
            Self::UnknownRun { .. } => "unknown_run",
            Self::UnknownSubagent { .. } => "unknown_subagent",
            Self::NoAgent => "no_agent",
            Self::Running { .. } => "running",
            Self::TooManyRuns { .. } => "too_many_runs",
            Self::AlreadyFinished { .. } => "already_finished",
            Self::Store { .. } => "store",
            Self::ShuttingDown => "shutting_down",
            Self::BadAnswer { .. } => "bad_answer",
            Self::Refused(_) => "refused",
            Self::NotConnected { .. } => "not_connected",
            Self::Server { .. } => "server",
            Self::NotText { .. } => "not_text",
            Self::Model { .. } => "model",
            Self::ModelOnly { .. } => "model_only",
            Self::NotOffered { .. } => "not_offered",
            Self::CannotStart { .. } => "cannot_start",
            Self::UnknownServer { .. } => "unknown_server",
            Self::ToolError { .. } => "tool_error",
            Self::Cut { .. } => "cut",
        }
    }

    /// The error as a caller hears it: `{"code", "message"}`, with `pointer` and `rule` for
    /// `invalid_arguments` and `bad_answer`, `current` for `version_mismatch`, `max` for
    /// `too_large`.
    pub fn to_value(&self) -> Value {
        let mut answer = json!({"code": self.code(), "message": self.to_string()});
        match self {
            Self::InvalidArguments { pointer, rule, .. }
            | Self::BadAnswer { pointer, rule, .. } => {
                answer["pointer"] = json!(pointer);
                answer["rule"] = json!(rule);
            }
            Self::VersionMismatch { current, .. } => answer["current"] = json!(current),
            Self::TooLarge { max, .. } | Self::TooManyRuns { max } => answer["max"] = json!(max),
            _ => {}
        }
        answer
    }

    /// `invalid_arguments` of `tool` at `pointer` for breaking `rule`.
    pub(crate) fn invalid(
        tool: &str,
        pointer: &str,
        rule: &str,
        message: impl Into<String>,
    ) -> Self {
        Self::InvalidArguments {
            tool: tool.to_owned(),
            pointer: pointer.to_owned(),
            rule: rule.to_owned(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownTool { tool } => write!(f, "no tool is named {tool:?}"),
            Self::NotGranted {
                tool,
                scope: Some(scope),
            } => write!(f, "{tool} is not granted to {scope}"),
            Self::NotGranted { tool, scope: None } => {
                write!(f, "{tool} is not offered to this caller")
            }
            Self::InvalidArguments {
                tool,
                pointer,
                rule,
                message,
            } => write!(
                f,
                "{tool}: arguments at {pointer:?} break {rule}: {message}"
            ),
            Self::TooLarge { what, size, max } => write!(f, "{what} of {size} is past {max}"),
            Self::BadKey { reason } => write!(f, "bad key: {reason}"),
            Self::VersionMismatch { key, current } => {
                write!(f, "{key:?} is at version {current}")
            }
            Self::NotAnArray { key } => write!(f, "{key:?} does not hold an array"),
            Self::Exists { what } => write!(f, "{what} exists already"),
            Self::NotFound { what } => write!(f, "no {what}"),
            Self::NotBuilt { tool } => write!(f, "{tool} is not built yet"),
            Self::UnknownRun { run } => write!(f, "no run {run:?}"),
            Self::UnknownSubagent { subagent } => write!(f, "no subagent {subagent:?}"),
            Self::NoAgent => f.write_str("the agent is not running: no model is configured"),
            Self::Running { subagent } => {
                write!(f, "subagent {subagent:?} is running: kill it first")
            }
            Self::TooManyRuns { max } => write!(
                f,
                "{max} workflow runs are under way, the most allowed: ask again once one ends"
            ),
            Self::AlreadyFinished { unit } => write!(f, "{unit} finished already"),
            Self::Store { detail } => write!(f, "store: {detail}"),
            Self::ShuttingDown => f.write_str("shutting down"),
            Self::BadAnswer {
                pointer,
                rule,
                message,
            } => write!(f, "the answer at {pointer:?} breaks {rule}: {message}"),
            Self::Refused(refused) => refused.fmt(f),
            Self::NotConnected { server } => write!(f, "server {server:?} is not connected"),
            Self::Server { server, detail } => write!(f, "server {server:?}: {detail}"),
            Self::NotText { uri } => write!(f, "{uri} holds binary contents, not text"),
            Self::Model { detail } => write!(f, "the model: {detail}"),
            Self::ModelOnly { tool } => write!(
                f,
                "{tool} is the model's: it runs in a turn, over the context the model was shown"
            ),
            Self::NotOffered { tool, reason } => write!(f, "{tool} is not offered: {reason}"),
            Self::CannotStart { program, detail } => {
                write!(f, "{program:?} cannot start: {detail}")
            }
            Self::UnknownServer { server } => write!(f, "no server {server:?} is configured"),
            Self::ToolError { tool, detail } => {
                write!(f, "tool {tool:?} answered an error: {detail}")
            }
            Self::Cut { tool } => write!(f, "{tool} was cut at its bound before it answered"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Refused(refused) => Some(refused),
            _ => None,
        }
    }
}

impl From<Refused> for Error {
    fn from(refused: Refused) -> Self {
        Self::Refused(refused)
    }
}
