//! The tool calls of a model's reply: each one resolved ([`plan`]: the tool behind the
//! offered name, the arguments read as a JSON object), run (agentd's own tools for the
//! conversation's caller, a server's tool over its worker), and its result said as the text
//! the model reads back.
//!
//! What the model reads:
//! - an own tool's answer as compact JSON; its error as `error: <code>: <what>`;
//! - a server tool's text content, block after block (another kind of block as its JSON),
//!   or its structured content as JSON when it has no content; a result with `isError` as
//!   `error: ` and that;
//! - `error: ` and why, when the call could not be made: a name not offered, arguments that
//!   are no JSON object, a server not connected, a call cut at the turn's deadline, a call
//!   (an MCP call or an own tool's) cut at [`CALL_MAX`] (with its own words: the turn goes
//!   on).
//!
//! A result past [`RESULT_MAX`] bytes is cut there, and says so.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use agentd_tools::reasoning::Reasoning;
use agentd_tools::{AgentMeta, Caller, Scope, Tool};
use mcp_wire::{CallToolResult, Outcome};
use serde_json::{Map, Value};
use tokio::time::{Instant, timeout_at};

use super::model::ToolCall;
use super::names::{Offer, Origin};
use super::workers::{WorkerError, Workers};

/// The longest time one call of a turn takes (an MCP call or an own tool's), whatever is
/// left of the turn.
pub(crate) const CALL_MAX: Duration = Duration::from_secs(600);

/// How long past its bound an own tool's call is waited for at most: the own tools end a
/// call at its bound themselves ([`OwnTools::call_in`]); this only backs them up.
const BACKSTOP: Duration = Duration::from_secs(1);

/// The most bytes of a result the model reads back.
pub(crate) const RESULT_MAX: usize = 100 * 1024;

/// The tool that ends a unit of work: once called, the turn ends after the reply's calls.
pub(crate) const FINISH: &str = "finish";

/// What an own tool's call comes to.
pub(crate) type Called<'a> =
    Pin<Box<dyn Future<Output = Result<Value, agentd_tools::Error>> + Send + 'a>>;

/// agentd's own tools, as a turn calls them.
pub(crate) trait OwnTools: Send + Sync + std::fmt::Debug {
    /// Calls `name` for `caller` with `arguments`, in `turn` when given (its model and
    /// context the model-only tools reason over, its `_meta` a registry call carries). A
    /// call in a turn ends at the turn's bound ([`agentd_tools::Error::Cut`]), recorded as
    /// any other answer; a registry call is cancelled on the wire there.
    fn call_in<'a>(
        &'a self,
        caller: &'a Caller,
        name: &'a str,
        arguments: Value,
        turn: Option<Turn<'a>>,
    ) -> Called<'a>;

    /// Calls `name` for `caller` with `arguments`, outside a turn.
    fn call<'a>(&'a self, caller: &'a Caller, name: &'a str, arguments: Value) -> Called<'a> {
        self.call_in(caller, name, arguments, None)
    }

    /// The tools offered to `scope`.
    fn granted(&self, scope: Scope) -> Vec<&'static Tool>;

    /// Whether the tool `tool` of `server` is kept from `scope`'s offer: it implements a
    /// contract tool not granted to `scope`, and calling it would get round the grant.
    /// Nothing is by default.
    fn withholds(&self, scope: Scope, server: &str, tool: &str) -> bool {
        let _ = (scope, server, tool);
        false
    }

    /// Records `answer`, of a call of `tool` by `caller` answered besides these tools (a
    /// subagent's `resource.read`), as these tools record theirs. Nothing by default.
    fn told(
        &self,
        caller: &Caller,
        tool: &'static Tool,
        answer: &Result<Value, agentd_tools::Error>,
    ) {
        let _ = (caller, tool, answer);
    }
}

impl<S: agentd_tools::Services + std::fmt::Debug> OwnTools for agentd_tools::Tools<S> {
    fn call_in<'a>(
        &'a self,
        caller: &'a Caller,
        name: &'a str,
        arguments: Value,
        turn: Option<Turn<'a>>,
    ) -> Called<'a> {
        let in_turn = turn.map(|t| t.for_tools());
        let called = Self::call_in(self, caller, name, arguments, in_turn);
        Box::pin(bounded(name, turn.map(|t| t.bound), called))
    }

    fn granted(&self, scope: Scope) -> Vec<&'static Tool> {
        self.offered(scope).collect()
    }
}

/// `called`, the call of `tool`, ended at `bound` when given ([`agentd_tools::Error::Cut`]).
/// `exec` ends its command at the bound itself, keeping what it wrote
/// ([`agentd_tools::exec::Command::within`]): it is cut only [`BACKSTOP`] later.
pub(crate) async fn bounded<T>(
    tool: &str,
    bound: Option<Instant>,
    called: impl Future<Output = Result<T, agentd_tools::Error>>,
) -> Result<T, agentd_tools::Error> {
    let Some(mut bound) = bound else {
        return called.await;
    };
    if tool == agentd_tools::exec::TOOL {
        bound += BACKSTOP;
    }
    timeout_at(bound, called).await.unwrap_or_else(|_| {
        Err(agentd_tools::Error::Cut {
            tool: tool.to_owned(),
        })
    })
}

/// An own tool's call made in a model's turn.
#[derive(Clone, Copy)]
pub(crate) struct Turn<'a> {
    /// The turn's model and context, which the model-only tools reason over.
    pub(crate) reasoning: &'a dyn Reasoning,
    /// The `_meta` of the call (the turn's ids and context, the call's idempotency key),
    /// which a call through the supervisor's tool registry carries.
    pub(crate) meta: &'a AgentMeta,
    /// When a call through the supervisor's tool registry is cancelled on the wire: the
    /// turn's deadline, at most [`CALL_MAX`] after the call starts.
    pub(crate) bound: Instant,
}

impl<'a> Turn<'a> {
    /// The turn as the own tools take it: its model, and what is left of it now.
    pub(crate) fn for_tools(&self) -> agentd_tools::Turn<'a> {
        agentd_tools::Turn {
            reasoning: self.reasoning,
            within: self.bound.saturating_duration_since(Instant::now()),
        }
    }
}

/// A tool call of the model, resolved.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Planned {
    /// One of agentd's own tools.
    Own {
        /// Its name.
        tool: String,
        /// Its arguments, an object.
        arguments: Value,
    },
    /// A tool of a server.
    Mcp {
        /// The server.
        server: String,
        /// The tool, by the server's name for it.
        tool: String,
        /// Its arguments.
        arguments: Map<String, Value>,
    },
    /// A call that cannot be made: what the model reads back.
    Refused(String),
}

impl Planned {
    /// Whether it calls `finish`.
    pub(crate) fn finishes(&self) -> bool {
        matches!(self, Self::Own { tool, .. } if tool == FINISH)
    }
}

/// `call` resolved against `offer`. Arguments given as nothing at all are `{}`.
pub(crate) fn plan(offer: &Offer, call: &ToolCall) -> Planned {
    let Some(origin) = offer.origin(&call.name) else {
        return Planned::Refused(format!(
            "error: no function is named {:?}: call one of those offered",
            call.name
        ));
    };
    let text = call.arguments.trim();
    let arguments = match serde_json::from_str::<Value>(if text.is_empty() { "{}" } else { text }) {
        Ok(Value::Object(arguments)) => arguments,
        Ok(_) => {
            return Planned::Refused(format!(
                "error: the arguments of {} must be a JSON object",
                call.name
            ));
        }
        Err(e) => {
            return Planned::Refused(format!(
                "error: the arguments of {} are not valid JSON: {e}",
                call.name
            ));
        }
    };
    match origin {
        Origin::Own(tool) => Planned::Own {
            tool: tool.clone(),
            arguments: Value::Object(arguments),
        },
        Origin::Server { server, tool } => Planned::Mcp {
            server: server.clone(),
            tool: tool.clone(),
            arguments,
        },
    }
}

/// What a call came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Done {
    /// What the model reads back.
    pub(crate) text: String,
    /// Whether it was a `finish` that the unit is finished by (now, or before).
    pub(crate) finished: bool,
}

/// Where a turn's calls run: agentd's own tools for the conversation's caller, the servers'
/// over the workers, everything by the turn's deadline.
#[derive(Debug)]
pub(crate) struct Runner<'a, O: ?Sized> {
    /// The own tools.
    pub(crate) own: &'a O,
    /// The workers.
    pub(crate) workers: &'a Workers,
    /// Who calls the own tools.
    pub(crate) caller: &'a Caller,
    /// The turn's deadline.
    pub(crate) deadline: Instant,
}

impl<O: OwnTools + ?Sized> Runner<'_, O> {
    /// Runs `planned`: every call is bounded by what is left of the turn, at most
    /// [`CALL_MAX`] (the reference's "Turn tool call"); an MCP call carries `meta`, as does
    /// an own tool's call through the supervisor's tool registry; the model-only own tools
    /// reason over `reasoning`.
    pub(crate) async fn run(
        &self,
        planned: Planned,
        meta: AgentMeta,
        reasoning: &dyn Reasoning,
    ) -> Done {
        let finishing = planned.finishes();
        let (text, finished) = match planned {
            Planned::Refused(text) => (text, false),
            Planned::Own { tool, arguments } => {
                let capped = Instant::now() + CALL_MAX;
                let bound = self.deadline.min(capped);
                let turn = Turn {
                    reasoning,
                    meta: &meta,
                    bound,
                };
                let called = self.own.call_in(self.caller, &tool, arguments, Some(turn));
                match timeout_at(bound + BACKSTOP, called).await {
                    Ok(Ok(answer)) => (own_said(&tool, answer), finishing),
                    Ok(Err(agentd_tools::Error::Cut { .. })) | Err(_) => {
                        (self.cut_said(bound, capped), false)
                    }
                    Ok(Err(e)) => {
                        let finished = finishing && e.code() == "already_finished";
                        (format!("error: {}: {e}", e.code()), finished)
                    }
                }
            }
            Planned::Mcp {
                server,
                tool,
                arguments,
            } => {
                let capped = Instant::now() + CALL_MAX;
                let bound = self.deadline.min(capped);
                let called = self.workers.call(&server, &tool, arguments, &meta, bound);
                match called.await {
                    Ok(result) => (said(&result), false),
                    Err(WorkerError::Cut) => (self.cut_said(bound, capped), false),
                    Err(e) => (format!("error: {e}"), false),
                }
            }
        };
        Done {
            text: cut(text, RESULT_MAX),
            finished,
        }
    }

    /// What the model reads of a call cut at `bound`, `capped` being [`CALL_MAX`] after
    /// it started: [`capped()`] when that came before the turn's deadline (the turn goes
    /// on), else [`CUT`].
    fn cut_said(&self, bound: Instant, capped: Instant) -> String {
        match bound == capped && capped < self.deadline {
            true => self::capped(),
            false => CUT.to_owned(),
        }
    }
}

/// What the model reads of a call cut at the turn's deadline.
const CUT: &str = "error: the call was cut at the turn's deadline";

/// What the model reads of a call cut at [`CALL_MAX`], the turn's deadline still ahead.
fn capped() -> String {
    format!(
        "error: the call was cut after {} s, the longest one call may take; the turn goes on",
        CALL_MAX.as_secs()
    )
}

/// What the model reads of an own tool's answer: its JSON, but a contract tool's answer (a
/// server tool's result) as a server tool's.
fn own_said(tool: &str, answer: Value) -> String {
    if !agentd_tools::contract::is_contract(tool) {
        return answer.to_string();
    }
    match serde_json::from_value::<Outcome<CallToolResult>>(answer.clone()) {
        Ok(Outcome::Complete(result)) => said(&result),
        _ => answer.to_string(),
    }
}

/// What the model reads of a server tool's result: its text, `error: ` before it when the
/// result has `isError`.
pub(crate) fn said(result: &CallToolResult) -> String {
    let text = crate::content::said(result);
    match result.is_error() {
        true => format!("error: {text}"),
        false => text,
    }
}

/// `text`, cut at `max` bytes (on a character's boundary) with a note of how much was left
/// out.
pub(crate) fn cut(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let total = text.len();
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!("\n[cut: {end} of {total} bytes]"));
    text
}

#[cfg(test)]
pub(crate) mod tests {
    use mcp_wire::ContentBlock;
    use serde_json::json;

    use super::super::names::Offered;
    use super::*;

    fn offer() -> Offer {
        let tools = [
            Origin::Own("memory.set".into()),
            Origin::Server {
                server: "s".into(),
                tool: "add".into(),
            },
        ];
        let offered = tools.into_iter().map(|origin| Offered {
            origin,
            description: String::new(),
            parameters: json!({"type": "object"}),
        });
        Offer::of(offered).0
    }

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn calls_are_resolved_or_refused_with_a_reason() {
        let offer = offer();
        assert_eq!(
            plan(&offer, &call("memory_set", r#"{"key": "k", "value": 1}"#)),
            Planned::Own {
                tool: "memory.set".into(),
                arguments: json!({"key": "k", "value": 1}),
            }
        );
        assert_eq!(
            plan(&offer, &call("s__add", " ")),
            Planned::Mcp {
                server: "s".into(),
                tool: "add".into(),
                arguments: Map::new(),
            }
        );
        let refused = |name: &str, arguments: &str| match plan(&offer, &call(name, arguments)) {
            Planned::Refused(text) => text,
            other => panic!("{other:?}"),
        };
        assert!(
            refused("s__add", "{\"a\": ")
                .starts_with("error: the arguments of s__add are not valid JSON")
        );
        assert_eq!(
            refused("s__add", "[1]"),
            "error: the arguments of s__add must be a JSON object"
        );
        assert_eq!(
            refused("memory.set", "{}"),
            "error: no function is named \"memory.set\": call one of those offered"
        );
        assert!(!plan(&offer, &call("memory_set", "{}")).finishes());
    }

    #[test]
    fn results_are_said_as_text() {
        let mut result =
            CallToolResult::new(vec![ContentBlock::text("one"), ContentBlock::text("two")]);
        assert_eq!(said(&result), "one\ntwo");
        result.is_error = Some(true);
        assert_eq!(said(&result), "error: one\ntwo");
        let mut structured = CallToolResult::new(Vec::new());
        structured.structured_content = Some(json!({"result": 5}));
        assert_eq!(said(&structured), r#"{"result":5}"#);
        // A contract tool's answer is a server tool's result; any other own tool's, JSON.
        let answer = json!({"content": [{"type": "text", "text": "owls"}]});
        assert_eq!(own_said("knowledge.search", answer.clone()), "owls");
        assert_eq!(own_said("memory.get", answer.clone()), answer.to_string());
        assert_eq!(own_said("code.run", json!({"x": 1})), r#"{"x":1}"#);
    }

    /// Own tools whose one tool counts `{"secs"}` seconds, then answers them.
    #[derive(Debug)]
    struct Counting;

    impl OwnTools for Counting {
        fn call_in<'a>(
            &'a self,
            _: &'a Caller,
            _: &'a str,
            arguments: Value,
            turn: Option<Turn<'a>>,
        ) -> Called<'a> {
            let counted = async move {
                tokio::time::sleep(Duration::from_secs(arguments["secs"].as_u64().unwrap())).await;
                Ok(arguments)
            };
            Box::pin(bounded("count", turn.map(|t| t.bound), counted))
        }

        fn granted(&self, _: Scope) -> Vec<&'static Tool> {
            Vec::new()
        }
    }

    /// A model that is never asked.
    pub(crate) struct Unasked;

    impl Reasoning for Unasked {
        fn ask<'a>(&'a self, _: &'a str) -> agentd_tools::reasoning::Answer<'a, String> {
            unreachable!("not asked")
        }

        fn compact<'a>(
            &'a self,
            _: usize,
            _: &'a str,
        ) -> agentd_tools::reasoning::Answer<'a, agentd_tools::reasoning::Compacted> {
            unreachable!("not asked")
        }
    }

    /// What the model reads of an own tool counting `secs` seconds in a turn `within` long.
    async fn counted(secs: u64, within: Duration) -> String {
        let workers = Workers::new(super::super::workers::cancelling(), Default::default());
        let caller = Caller::root("root");
        let runner = Runner {
            own: &Counting,
            workers: &workers,
            caller: &caller,
            deadline: Instant::now() + within,
        };
        let planned = Planned::Own {
            tool: "memory.get".into(),
            arguments: json!({"secs": secs}),
        };
        let meta = AgentMeta::new("r", "t");
        runner.run(planned, meta, &Unasked).await.text
    }

    /// In virtual time: an own tool's call in a turn of an hour comes back whole a second
    /// before [`CALL_MAX`], and is cut at it a second later, in its own words; in a turn
    /// shorter than that, at the turn's deadline.
    #[tokio::test(start_paused = true)]
    async fn an_own_tool_is_cut_at_the_bound_of_one_call() {
        let hour = Duration::from_secs(3600);
        let max = CALL_MAX.as_secs();
        assert_eq!(
            counted(max - 1, hour).await,
            format!(r#"{{"secs":{}}}"#, max - 1)
        );
        assert_eq!(counted(max + 1, hour).await, capped());
        let minute = Duration::from_secs(60);
        assert_eq!(counted(61, minute).await, CUT);
        assert_eq!(counted(59, minute).await, r#"{"secs":59}"#);
    }

    #[test]
    fn a_long_result_is_cut_on_a_character() {
        assert_eq!(cut("short".into(), RESULT_MAX), "short");
        let long = format!("{}é", "x".repeat(RESULT_MAX - 1));
        let cut = cut(long, RESULT_MAX);
        assert!(cut.starts_with(&"x".repeat(RESULT_MAX - 1)));
        assert!(cut.ends_with(&format!(
            "\n[cut: {} of {} bytes]",
            RESULT_MAX - 1,
            RESULT_MAX + 1
        )));
    }
}
