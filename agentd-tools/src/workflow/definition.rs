//! Workflow definitions: a name, a JSON Schema of the input, labels and steps, checked whole
//! before anything runs ([`Definition::parse`]).
//!
//! A definition's body (what `[[workflows]]` and `workflow.create` give, its name aside) is a
//! JSON object:
//!
//! ```json
//! {
//!   "input": {"type": "object", "properties": {"city": {"type": "string"}}},
//!   "labels": {"team": "ops"},
//!   "steps": [
//!     {"id": "fetch", "type": "mcp.tool", "server": "weather", "tool": "get_weather",
//!      "arguments": {"location": "{{input.city}}"}, "timeout": "30s",
//!      "retries": {"max": 3, "delay": "1s", "max_delay": "30s"},
//!      "idempotency": {"value": "{{input.city}}"}},
//!     {"id": "doc", "type": "mcp.resource", "server": "weather", "read": "docs://{{input.city}}"},
//!     {"id": "note", "type": "tool", "name": "memory.set",
//!      "arguments": {"key": "last", "value": "{{steps.fetch.output.content[0].text}}"}},
//!     {"id": "go", "type": "wait", "on": {"signal": {"name": "go"}}, "timeout": "1h"},
//!     {"id": "sum", "type": "agent", "prompt": "Summarize {{steps.doc.output}}"}
//!   ]
//! }
//! ```
//!
//! Steps, each with an `id` (1 to 64 of `A-Za-z0-9_-`, unique in the workflow) and a `type`:
//! - `mcp.tool` {`server`, `tool`, `arguments`, `timeout`, `retries`, `idempotency`}: a tool
//!   of a server, its `arguments` templated; retried `retries.max` times at most (0 to 10),
//!   `retries.delay` after the first failure (1 s unless given), doubling to
//!   `retries.max_delay` (60 s unless given); every attempt carries the step's one
//!   idempotency key, `idempotency.value` (templated) when given;
//! - `mcp.resource` {`server`, and one of `list: true`, `read: URI`, `templates: true`,
//!   `prompt: {name, arguments}`, `complete: {ref, argument, context}`}: `resources/list`,
//!   `resources/read`, `resources/templates/list`, `prompts/get`, `completion/complete`;
//! - `tool` {`name`, `arguments`}: one of agentd's own tools granted to workflows (a contract
//!   tool among them), or a tool of the supervisor's registry named `server/tool` (checked
//!   at each call, `unknown_server` or `unknown_tool` when the catalogue has no such tool);
//! - `agent` {`prompt`}: a model turn whose answer is the step's output;
//! - `wait` {`on`: `{resource: {server, uri}}` | `{signal: {name}}` | `{duration: D}`}.
//!
//! Every step may have a `timeout`: an executed step's bound (the run's `limits.step_timeout`
//! when not given), a wait's longest wait (none when not given). A duration is a humantime
//! string (`"500ms"`, `"30s"`, `"1h 30m"`) or milliseconds, 1 ms to 30 days.
//!
//! Templates (see [`super::template`]) are checked here: a path that does not
//! parse, or names no step run before, refuses the definition, naming the step and the JSON
//! pointer of the string ([`DefinitionError`]).
//!
//! `starts` says what starts a run besides `workflow.run` (which always may): a list of
//! starts, each with an optional `id` (its node in log lines; `#<index>` when not given,
//! unique in the workflow) and one of
//! - `subscribe` {`server`, `uri`}: a change of a server's resource (`notifications/
//!   resources/updated`) starts a run with input `{server, uri}`; a concrete URI only;
//! - `event` {`stream`}: each MCP Events occurrence appended to a stream starts a run with
//!   the Stream event as input;
//! - `manual` {}: `workflow.run` alone, the default (said for clarity; it arms nothing).
//!
//! ```json
//! {"starts": [{"id": "doc", "subscribe": {"server": "weather", "uri": "docs://today"}},
//!             {"event": {"stream": "alerts"}}, {"manual": {}}], "steps": [...]}
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::template::{self, Template, TemplateError, is_name_char};
use crate::memory::serialized_len;
use crate::{Error, Scope};

/// A workflow's name, and a step's id: at most this many bytes.
pub const NAME_MAX: usize = 64;
/// The most steps of a workflow.
pub const STEPS_MAX: usize = 100;
/// A definition's body, compact JSON: at most this many bytes.
pub const DEFINITION_MAX: usize = 64 * 1024;
/// The most labels of a workflow.
pub const LABELS_MAX: usize = 16;
/// A label's value: at most this many bytes (its key: [`NAME_MAX`]).
pub const LABEL_MAX: usize = 256;
/// The most retries of an `mcp.tool` step.
pub const RETRIES_MAX: u32 = 10;
/// The first retry's delay when a step says nothing.
pub const RETRY_DELAY: Duration = Duration::from_secs(1);
/// The longest retry delay when a step says nothing.
pub const RETRY_DELAY_MAX: Duration = Duration::from_secs(60);
/// The longest duration a definition gives (a timeout, a wait, a retry delay).
pub const DURATION_MAX: Duration = Duration::from_secs(30 * 24 * 3600);

/// The most starts of a workflow.
pub const STARTS_MAX: usize = 16;

/// What starts a run of a workflow besides `workflow.run`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Start {
    /// Its node: its `id`, or `#<index>` when it gives none.
    pub node: String,
    /// What starts the run.
    pub on: StartOn,
}

/// What a start waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartOn {
    /// A change of resource `uri` of `server`; the run's input is `{server, uri}`.
    Subscribe {
        /// The server.
        server: String,
        /// The resource, a concrete URI.
        uri: String,
    },
    /// An MCP Events occurrence appended to `stream`; the run's input is its Stream event.
    Event {
        /// The stream.
        stream: String,
    },
    /// `workflow.run` alone (the default).
    Manual,
}

/// Why a definition is refused: the step (when it is a step's fault), the JSON pointer of
/// what is wrong inside the body, the rule it breaks, and what is wrong in words.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DefinitionError {
    /// The step's id (or its index, `#2`, when it has no id yet).
    pub step: Option<String>,
    /// Where, as a JSON pointer into the body (`/steps/1/arguments/city`).
    pub pointer: String,
    /// The rule: `shape`, `name`, `unique`, `bound`, `schema`, `template`, `duration`,
    /// `tool`.
    pub rule: &'static str,
    /// What is wrong.
    pub message: String,
}

impl DefinitionError {
    fn new(pointer: impl Into<String>, rule: &'static str, message: impl Into<String>) -> Self {
        Self {
            step: None,
            pointer: pointer.into(),
            rule,
            message: message.into(),
        }
    }

    fn of(mut self, step: &str) -> Self {
        self.step.get_or_insert_with(|| step.to_owned());
        self
    }

    /// The error as `tool` says it: `invalid_arguments` at `/definition` and the pointer.
    pub fn to_tool_error(&self, tool: &str) -> Error {
        Error::invalid(
            tool,
            &format!("/definition{}", self.pointer),
            self.rule,
            self.to_string(),
        )
    }
}

impl fmt::Display for DefinitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(step) = &self.step {
            write!(f, "step {step:?}: ")?;
        }
        write!(f, "{}: {}", self.pointer, self.message)
    }
}

impl std::error::Error for DefinitionError {}

/// A workflow, checked.
#[derive(Clone)]
pub struct Definition {
    /// Its name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its steps, in order.
    pub steps: Vec<Step>,
    /// What starts a run besides `workflow.run`, in order.
    pub starts: Vec<Start>,
    input: Option<Arc<jsonschema::Validator>>,
    body: Value,
}

impl fmt::Debug for Definition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Definition")
            .field("name", &self.name)
            .field("labels", &self.labels)
            .field("steps", &self.steps)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Definition {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.body == other.body
    }
}

/// A step.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Step {
    /// Its id, unique in the workflow.
    pub id: String,
    /// What it does.
    pub kind: Kind,
    /// Its bound, when it gives one.
    pub timeout: Option<Duration>,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Kind {
    /// A tool of a server.
    McpTool(McpTool),
    /// A read of a server's resources, prompts or completions.
    McpResource {
        /// The server.
        server: String,
        /// What it asks.
        op: ResourceOp,
    },
    /// One of agentd's own tools.
    Tool {
        /// The tool.
        name: String,
        /// Its arguments, templated.
        arguments: Value,
    },
    /// A model turn whose answer is the output.
    Agent {
        /// The prompt, templated.
        prompt: String,
    },
    /// A wait.
    Wait(Wait),
}

impl Kind {
    /// The step's type, as a definition names it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::McpTool(_) => "mcp.tool",
            Self::McpResource { .. } => "mcp.resource",
            Self::Tool { .. } => "tool",
            Self::Agent { .. } => "agent",
            Self::Wait(_) => "wait",
        }
    }
}

/// An `mcp.tool` step.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct McpTool {
    /// The server.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// Its arguments, templated.
    pub arguments: Map<String, Value>,
    /// How it is retried.
    pub retries: Retries,
    /// Its idempotency key, templated, when given (else one of the run and the step).
    pub idempotency: Option<String>,
}

/// How a step is retried: at most `max` times, `delay` after the first failure, doubling to
/// `max_delay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retries {
    /// Retries at most.
    pub max: u32,
    /// The first delay.
    pub delay: Duration,
    /// The longest delay.
    pub max_delay: Duration,
}

impl Retries {
    /// No retries.
    pub const NONE: Self = Self {
        max: 0,
        delay: RETRY_DELAY,
        max_delay: RETRY_DELAY_MAX,
    };

    /// `max` retries on the default schedule.
    pub fn new(max: u32) -> Self {
        Self { max, ..Self::NONE }
    }

    /// The delay before retry `n` (from 1).
    pub fn delay(&self, n: u32) -> Duration {
        let doubled = self
            .delay
            .checked_mul(1 << n.saturating_sub(1).min(30))
            .unwrap_or(self.max_delay);
        doubled.min(self.max_delay)
    }
}

/// What an `mcp.resource` step asks.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ResourceOp {
    /// `resources/list`.
    List,
    /// `resources/read` of a URI, templated.
    Read {
        /// The URI.
        uri: String,
    },
    /// `resources/templates/list`.
    Templates,
    /// `prompts/get`.
    Prompt {
        /// The prompt's name.
        name: String,
        /// Its arguments, templated; each renders to a string.
        arguments: Map<String, Value>,
    },
    /// `completion/complete`: `{ref, argument, context}`, templated.
    Complete(Value),
}

/// What a `wait` step waits for.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Wait {
    /// A change of a resource (subscribed while waiting).
    Resource {
        /// The server.
        server: String,
        /// The URI, templated.
        uri: String,
    },
    /// A signal sent to the run (`workflow.signal`).
    Signal {
        /// Its name.
        name: String,
    },
    /// A duration.
    Duration(Duration),
}

impl Definition {
    /// Checks `body` as the definition of workflow `name`.
    pub fn parse(name: &str, body: &Value) -> Result<Self, DefinitionError> {
        check_name(name, "").map_err(|e| DefinitionError {
            pointer: String::new(),
            ..e
        })?;
        let size = serialized_len(body);
        if size > DEFINITION_MAX {
            return Err(DefinitionError::new(
                "",
                "bound",
                format!("a definition of {size} bytes is past {DEFINITION_MAX}"),
            ));
        }
        let raw: Body = from(body, "")?;
        if raw.name.as_ref().is_some_and(|n| n != name) {
            return Err(DefinitionError::new(
                "/name",
                "name",
                format!("the body names another workflow than {name:?}"),
            ));
        }
        let starts = starts(&raw.starts)?;
        if raw.labels.len() > LABELS_MAX {
            return Err(DefinitionError::new(
                "/labels",
                "bound",
                format!("{} labels are past {LABELS_MAX}", raw.labels.len()),
            ));
        }
        for (key, value) in &raw.labels {
            let at = format!("/labels/{key}");
            if key.is_empty() || key.len() > NAME_MAX || value.len() > LABEL_MAX {
                return Err(DefinitionError::new(
                    at,
                    "bound",
                    format!(
                        "a label's key is 1 to {NAME_MAX} bytes, its value at most {LABEL_MAX}"
                    ),
                ));
            }
        }
        let input = match &raw.input {
            None => None,
            Some(schema) if !schema.is_object() => {
                return Err(DefinitionError::new(
                    "/input",
                    "schema",
                    "the input is described by a JSON Schema object",
                ));
            }
            Some(schema) => Some(Arc::new(
                jsonschema::validator_for(schema)
                    .map_err(|e| DefinitionError::new("/input", "schema", e.to_string()))?,
            )),
        };
        if raw.steps.is_empty() || raw.steps.len() > STEPS_MAX {
            return Err(DefinitionError::new(
                "/steps",
                "bound",
                format!("1 to {STEPS_MAX} steps, not {}", raw.steps.len()),
            ));
        }
        let ids: Vec<String> = raw
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| match s.get("id") {
                Some(Value::String(id)) => Ok(id.clone()),
                _ => Err(DefinitionError::new(
                    format!("/steps/{i}/id"),
                    "shape",
                    "every step has an id, a string",
                )
                .of(&format!("#{i}"))),
            })
            .collect::<Result<_, _>>()?;
        let mut steps = Vec::with_capacity(ids.len());
        for (i, value) in raw.steps.iter().enumerate() {
            let id = &ids[i];
            let at = format!("/steps/{i}");
            check_name(id, &format!("{at}/id")).map_err(|e| e.of(id))?;
            if ids[..i].contains(id) {
                return Err(DefinitionError::new(
                    format!("{at}/id"),
                    "unique",
                    format!("two steps are named {id:?}"),
                )
                .of(id));
            }
            let before: Vec<&str> = ids[..i].iter().map(String::as_str).collect();
            let after: Vec<&str> = ids[i..].iter().map(String::as_str).collect();
            let step = step(value, &at, (&before, &after)).map_err(|e| e.of(id))?;
            steps.push(step);
        }
        Ok(Self {
            name: name.to_owned(),
            labels: raw.labels,
            steps,
            starts,
            input,
            body: body.clone(),
        })
    }

    /// The body it was parsed from.
    pub fn body(&self) -> &Value {
        &self.body
    }

    /// Checks a run's `input` against the input schema: the JSON pointer of the first value
    /// that fails, the keyword it breaks, and what is wrong.
    pub fn check_input(&self, input: &Value) -> Result<(), (String, String, String)> {
        let Some(validator) = &self.input else {
            return Ok(());
        };
        match validator.iter_errors(input).next() {
            None => Ok(()),
            Some(e) => Err((
                e.instance_path().as_str().to_owned(),
                e.kind().keyword().to_owned(),
                e.to_string(),
            )),
        }
    }

    /// The step of id `id`, with its index.
    pub fn step(&self, id: &str) -> Option<(usize, &Step)> {
        self.steps.iter().enumerate().find(|(_, s)| s.id == id)
    }
}

/// A definition's body as it is read.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    /// The workflow's own name, when the body repeats it.
    name: Option<String>,
    input: Option<Value>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    steps: Vec<Value>,
    #[serde(default)]
    starts: Vec<Value>,
}

/// A start as it is read.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStart {
    id: Option<String>,
    subscribe: Option<RawSubscribe>,
    event: Option<RawEvent>,
    manual: Option<Empty>,
}

/// `manual`'s body: nothing.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSubscribe {
    server: String,
    uri: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    stream: String,
}

/// The starts of a body: at most [`STARTS_MAX`], each exactly one of `subscribe`, `event`
/// and `manual`, their nodes unique.
fn starts(raw: &[Value]) -> Result<Vec<Start>, DefinitionError> {
    if raw.len() > STARTS_MAX {
        return Err(DefinitionError::new(
            "/starts",
            "bound",
            format!("{} starts are past {STARTS_MAX}", raw.len()),
        ));
    }
    let mut starts: Vec<Start> = Vec::with_capacity(raw.len());
    for (i, value) in raw.iter().enumerate() {
        let at = format!("/starts/{i}");
        let start: RawStart = from(value, &at)?;
        let node = match start.id {
            Some(id) => {
                check_name(&id, &format!("{at}/id"))?;
                id
            }
            None => format!("#{i}"),
        };
        if starts.iter().any(|s| s.node == node) {
            let message = format!("two starts are named {node:?}");
            return Err(DefinitionError::new(format!("{at}/id"), "unique", message));
        }
        let on = match (start.subscribe, start.event, start.manual) {
            (Some(RawSubscribe { server, uri }), None, None) => {
                if server.is_empty() || uri.is_empty() || uri.contains('{') {
                    return Err(DefinitionError::new(
                        format!("{at}/subscribe"),
                        "shape",
                        "a subscribe start names a server and a concrete URI",
                    ));
                }
                StartOn::Subscribe { server, uri }
            }
            (None, Some(RawEvent { stream }), None) => {
                if stream.is_empty() {
                    let message = "an event start names a stream";
                    return Err(DefinitionError::new(
                        format!("{at}/event"),
                        "shape",
                        message,
                    ));
                }
                StartOn::Event { stream }
            }
            (None, None, Some(_)) => StartOn::Manual,
            _ => {
                return Err(DefinitionError::new(
                    at,
                    "shape",
                    "a start is one of subscribe, event and manual",
                ));
            }
        };
        starts.push(Start { node, on });
    }
    Ok(starts)
}

/// `value` read as `T`, or a `shape` error at `at`.
fn from<T: serde::de::DeserializeOwned>(value: &Value, at: &str) -> Result<T, DefinitionError> {
    T::deserialize(value).map_err(|e| DefinitionError::new(at, "shape", e.to_string()))
}

/// A workflow's name, or a step's id: 1 to 64 of `A-Za-z0-9_-` (a workflow's may hold `.`).
fn check_name(name: &str, at: &str) -> Result<(), DefinitionError> {
    let dots = at.is_empty();
    let ok = !name.is_empty()
        && name.len() <= NAME_MAX
        && name.chars().all(|c| is_name_char(c) || (dots && c == '.'));
    if ok {
        return Ok(());
    }
    let what = if dots {
        "a workflow's name"
    } else {
        "a step's id"
    };
    Err(DefinitionError::new(
        at,
        "name",
        format!("{what} is 1 to {NAME_MAX} of A-Za-z0-9_-, not {name:?}"),
    ))
}

/// A duration: a humantime string, or milliseconds; 1 ms to [`DURATION_MAX`].
pub(crate) fn duration(value: &Value, at: &str) -> Result<Duration, DefinitionError> {
    let d = match value {
        Value::String(text) => humantime::parse_duration(text).ok(),
        Value::Number(n) => n.as_u64().map(Duration::from_millis),
        _ => None,
    };
    d.filter(|d| *d >= Duration::from_millis(1) && *d <= DURATION_MAX)
        .ok_or_else(|| {
            DefinitionError::new(
                at,
                "duration",
                format!("{value} is not a duration of 1 ms to 30 days (\"30s\", or milliseconds)"),
            )
        })
}

/// Which steps a template may read: those before, and not those from this one on.
type Order<'a> = (&'a [&'a str], &'a [&'a str]);

/// Checks the templates of `value` (at `at`).
fn templates(value: &Value, at: &str, (before, after): Order<'_>) -> Result<(), DefinitionError> {
    template::check_value(value, at, before, after)
        .map_err(|(pointer, e)| template_error(pointer, &e))
}

fn template_error(pointer: String, e: &TemplateError) -> DefinitionError {
    DefinitionError::new(pointer, "template", e.to_string())
}

/// Checks the template `text` (at `at`).
fn text_template(text: &str, at: &str, (before, after): Order<'_>) -> Result<(), DefinitionError> {
    Template::parse(text)
        .and_then(|t| t.check(before, after))
        .map_err(|e| template_error(at.to_owned(), &e))
}

/// A name that is not templated: not empty.
fn plain(text: &str, at: &str) -> Result<(), DefinitionError> {
    if text.is_empty() || text.contains("{{") {
        return Err(DefinitionError::new(
            at,
            "shape",
            "a name here is plain text, not empty and not a template",
        ));
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct McpToolFile {
    server: String,
    tool: String,
    #[serde(default)]
    arguments: Map<String, Value>,
    retries: Option<RetriesFile>,
    idempotency: Option<IdempotencyFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RetriesFile {
    max: u32,
    delay: Option<Value>,
    max_delay: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdempotencyFile {
    value: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourceFile {
    server: String,
    list: Option<bool>,
    read: Option<String>,
    templates: Option<bool>,
    prompt: Option<PromptFile>,
    complete: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptFile {
    name: String,
    #[serde(default)]
    arguments: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolFile {
    name: String,
    #[serde(default)]
    arguments: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentFile {
    prompt: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitFile {
    on: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourceWait {
    server: String,
    uri: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SignalWait {
    name: String,
}

/// The most bytes of an agent step's prompt.
pub const PROMPT_MAX: usize = 16 * 1024;

/// Checks that `name` is an own tool a `tool` step may call: granted to workflows, not an
/// events tool, built or a contract.
fn own_tool(name: &str, at: &str) -> Result<(), DefinitionError> {
    let tool = crate::tool(name)
        .ok_or_else(|| DefinitionError::new(at, "tool", format!("no tool is named {name:?}")))?;
    if !tool.granted_to(Scope::Workflow) || name.starts_with("events.") {
        return Err(DefinitionError::new(
            at,
            "tool",
            format!("{name} is not granted to workflows"),
        ));
    }
    if !tool.built && !crate::contract::is_contract(name) {
        return Err(DefinitionError::new(
            at,
            "tool",
            format!("{name} is not built yet"),
        ));
    }
    Ok(())
}

/// Checks one step, at `at`.
fn step(value: &Value, at: &str, order: Order<'_>) -> Result<Step, DefinitionError> {
    let Value::Object(members) = value else {
        return Err(DefinitionError::new(at, "shape", "a step is an object"));
    };
    let mut rest = members.clone();
    let Some(Value::String(id)) = rest.remove("id") else {
        let at = format!("{at}/id");
        return Err(DefinitionError::new(at, "shape", "a string"));
    };
    let Some(Value::String(kind)) = rest.remove("type") else {
        return Err(DefinitionError::new(
            format!("{at}/type"),
            "shape",
            "one of mcp.tool, mcp.resource, tool, agent, wait",
        ));
    };
    let timeout = rest
        .remove("timeout")
        .map(|t| duration(&t, &format!("{at}/timeout")))
        .transpose()?;
    let rest = Value::Object(rest);
    let kind = match kind.as_str() {
        "mcp.tool" => {
            let file: McpToolFile = from(&rest, at)?;
            plain(&file.server, &format!("{at}/server"))?;
            plain(&file.tool, &format!("{at}/tool"))?;
            let arguments = Value::Object(file.arguments);
            templates(&arguments, &format!("{at}/arguments"), order)?;
            let retries = match file.retries {
                None => Retries::NONE,
                Some(r) => {
                    if r.max > RETRIES_MAX {
                        return Err(DefinitionError::new(
                            format!("{at}/retries/max"),
                            "bound",
                            format!("at most {RETRIES_MAX} retries, not {}", r.max),
                        ));
                    }
                    let delay = |v: Option<Value>, key: &str, default| {
                        v.map_or(Ok(default), |v| {
                            duration(&v, &format!("{at}/retries/{key}"))
                        })
                    };
                    let delay_first = delay(r.delay, "delay", RETRY_DELAY)?;
                    let max_delay = delay(r.max_delay, "max_delay", RETRY_DELAY_MAX)?;
                    Retries {
                        max: r.max,
                        delay: delay_first,
                        max_delay: max_delay.max(delay_first),
                    }
                }
            };
            let idempotency = match file.idempotency {
                None => None,
                Some(i) => {
                    text_template(&i.value, &format!("{at}/idempotency/value"), order)?;
                    Some(i.value)
                }
            };
            let Value::Object(arguments) = arguments else {
                unreachable!("made of an object")
            };
            Kind::McpTool(McpTool {
                server: file.server,
                tool: file.tool,
                arguments,
                retries,
                idempotency,
            })
        }
        "mcp.resource" => {
            let file: ResourceFile = from(&rest, at)?;
            plain(&file.server, &format!("{at}/server"))?;
            let mut ops = Vec::new();
            if file.list == Some(true) {
                ops.push(ResourceOp::List);
            }
            if file.templates == Some(true) {
                ops.push(ResourceOp::Templates);
            }
            if let Some(uri) = file.read {
                text_template(&uri, &format!("{at}/read"), order)?;
                ops.push(ResourceOp::Read { uri });
            }
            if let Some(prompt) = file.prompt {
                plain(&prompt.name, &format!("{at}/prompt/name"))?;
                let arguments = Value::Object(prompt.arguments);
                templates(&arguments, &format!("{at}/prompt/arguments"), order)?;
                let Value::Object(arguments) = arguments else {
                    unreachable!("made of an object")
                };
                ops.push(ResourceOp::Prompt {
                    name: prompt.name,
                    arguments,
                });
            }
            if let Some(complete) = file.complete {
                if !complete.contains_key("ref") || !complete.contains_key("argument") {
                    return Err(DefinitionError::new(
                        format!("{at}/complete"),
                        "shape",
                        "a completion names its ref and its argument",
                    ));
                }
                let complete = Value::Object(complete);
                templates(&complete, &format!("{at}/complete"), order)?;
                ops.push(ResourceOp::Complete(complete));
            }
            if ops.len() != 1 {
                return Err(DefinitionError::new(
                    at,
                    "shape",
                    "one of list: true, read, templates: true, prompt, complete",
                ));
            }
            Kind::McpResource {
                server: file.server,
                op: ops.remove(0),
            }
        }
        "tool" => {
            let file: ToolFile = from(&rest, at)?;
            // A tool of the supervisor's registry (`server/tool`) is checked at each call,
            // against the catalogue of the moment; an own tool here.
            if crate::contract::registry_tool(&file.name).is_none() {
                own_tool(&file.name, &format!("{at}/name"))?;
            }
            let arguments = Value::Object(file.arguments);
            templates(&arguments, &format!("{at}/arguments"), order)?;
            Kind::Tool {
                name: file.name,
                arguments,
            }
        }
        "agent" => {
            let file: AgentFile = from(&rest, at)?;
            let prompt_at = format!("{at}/prompt");
            if file.prompt.is_empty() || file.prompt.len() > PROMPT_MAX {
                return Err(DefinitionError::new(
                    prompt_at,
                    "bound",
                    format!("a prompt is 1 to {PROMPT_MAX} bytes"),
                ));
            }
            text_template(&file.prompt, &prompt_at, order)?;
            Kind::Agent {
                prompt: file.prompt,
            }
        }
        "wait" => {
            let file: WaitFile = from(&rest, at)?;
            let on = format!("{at}/on");
            let mut on_each = file.on.into_iter();
            let wait = match (on_each.next(), on_each.next()) {
                (Some((kind, value)), None) => match kind.as_str() {
                    "resource" => {
                        let r: ResourceWait = from(&value, &format!("{on}/resource"))?;
                        plain(&r.server, &format!("{on}/resource/server"))?;
                        text_template(&r.uri, &format!("{on}/resource/uri"), order)?;
                        Wait::Resource {
                            server: r.server,
                            uri: r.uri,
                        }
                    }
                    "signal" => {
                        let s: SignalWait = from(&value, &format!("{on}/signal"))?;
                        plain(&s.name, &format!("{on}/signal/name"))?;
                        Wait::Signal { name: s.name }
                    }
                    "duration" => Wait::Duration(duration(&value, &format!("{on}/duration"))?),
                    _ => return Err(on_error(&on)),
                },
                _ => return Err(on_error(&on)),
            };
            Kind::Wait(wait)
        }
        other => {
            return Err(DefinitionError::new(
                format!("{at}/type"),
                "shape",
                format!("{other:?} is none of mcp.tool, mcp.resource, tool, agent, wait"),
            ));
        }
    };
    Ok(Step { id, kind, timeout })
}

fn on_error(at: &str) -> DefinitionError {
    DefinitionError::new(
        at,
        "shape",
        "one of {resource: {server, uri}}, {signal: {name}}, {duration}",
    )
}
