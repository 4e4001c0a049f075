//! `subagent.run`, `.send`, `.status`, `.await`, `.list`, `.kill` and `.retire`: child loops
//! of the agent, each working on a goal in a conversation of its own, with the tools it is
//! given, in the background.
//!
//! A subagent is *running* while a turn of it is under way or due; else it has *settled*:
//! `finished` (its model answered without calling a tool, or called `finish`: `answer` is
//! the text or the summary), `failed` (`error` says why), `timed_out` (its deadline passed),
//! `killed`, or `retired` (forgotten: no longer listed, and no longer sent to, killed or
//! retired; only `subagent.status` still answers for it). A message sent to a running one is
//! taken by its next turn; one sent to a settled one runs it again, with its deadline afresh.
//!
//! `subagent.run` answers `{"id"}` at once. `subagent.await` waits until the subagent settles,
//! at most its timeout (`await`'s: 60 s unless told, 1 ms to 1 h), checking again each time
//! the [`Clock`](crate::wait::Clock) says something may have changed, and answers its status
//! either way.
//! `subagent.list` lists the caller's subagents ([`Caller::unit`](crate::Caller::unit) is the
//! parent). `subagent.retire` refuses a running subagent (`running`): kill it first.
//!
//! Bounds: a goal or a message is at most `store.max_value_bytes` (as `message.send`'s
//! text); at most [`RUNNING_MAX`] subagents run at once (`too_large` past it); a deadline is
//! a duration of 1 ms to 1 h, as `sleep`'s. A subagent's conversation is
//! [`conversation`]`(id)`: `message.send` refuses it (it is sent to with `subagent.send`).

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::schema::{parse, read_duration};
use crate::{Error, Grants, Scope};

/// The most subagents running at once, in the whole instance: one more is refused
/// (`too_large`).
pub const RUNNING_MAX: usize = 16;

/// What every subagent's conversation id starts with.
pub const CONVERSATION_PREFIX: &str = "subagent:";

/// The conversation of subagent `id`: `subagent:<id>`.
pub fn conversation(id: &str) -> String {
    format!("{CONVERSATION_PREFIX}{id}")
}

/// The subagent whose conversation `conversation` is, if it is a subagent's.
pub fn of_conversation(conversation: &str) -> Option<&str> {
    conversation.strip_prefix(CONVERSATION_PREFIX)
}

/// The refusal of a run past [`RUNNING_MAX`], when `running` subagents run.
pub fn too_many(running: usize) -> Error {
    Error::TooLarge {
        what: "running subagents",
        size: running.saturating_add(1),
        max: RUNNING_MAX,
    }
}

/// Where a subagent stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum State {
    /// A turn is under way or due.
    Running,
    /// Its model answered without calling a tool, or called `finish`.
    Finished,
    /// A turn failed: the model, the store, or the daemon stopped under it.
    Failed,
    /// Its deadline passed.
    TimedOut,
    /// It was killed.
    Killed,
    /// It was retired: forgotten, its history kept.
    Retired,
}

impl State {
    /// Every state.
    pub const ALL: [Self; 6] = [
        Self::Running,
        Self::Finished,
        Self::Failed,
        Self::TimedOut,
        Self::Killed,
        Self::Retired,
    ];

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Finished => "finished",
            Self::Failed => "failed",
            Self::TimedOut => "timed_out",
            Self::Killed => "killed",
            Self::Retired => "retired",
        }
    }

    /// The state named `name` ([`as_str`](Self::as_str)), if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether no turn of it is under way or due.
    pub fn settled(self) -> bool {
        self != Self::Running
    }
}

/// A subagent's status.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Subagent {
    /// Its id.
    pub id: String,
    /// The unit that ran it.
    pub parent: String,
    /// Where it stands.
    pub state: State,
    /// The turns it took.
    pub turns: u64,
    /// The tokens its model calls used.
    pub tokens: u64,
    /// Its last answer: the text its model last answered with, or the summary it gave
    /// `finish`.
    pub answer: Option<String>,
    /// Why it failed (or was stopped).
    pub error: Option<String>,
    /// When its current run's deadline passes, in Unix milliseconds.
    pub deadline_ms: Option<i64>,
    /// When it was run, in Unix milliseconds.
    pub started_ms: i64,
}

impl Subagent {
    /// Subagent `id` of `parent`, in `state`, run at `started_ms`, with no turn yet.
    pub fn new(id: &str, parent: &str, state: State, started_ms: i64) -> Self {
        Self {
            id: id.to_owned(),
            parent: parent.to_owned(),
            state,
            turns: 0,
            tokens: 0,
            answer: None,
            error: None,
            deadline_ms: None,
            started_ms,
        }
    }

    /// The status as the tools answer it.
    pub fn to_value(&self) -> Value {
        json!({
            "id": self.id,
            "parent": self.parent,
            "state": self.state.as_str(),
            "turns": self.turns,
            "tokens": self.tokens,
            "answer": self.answer,
            "error": self.error,
            "deadline_ms": self.deadline_ms,
            "started_ms": self.started_ms,
        })
    }
}

/// What a subagent is run with.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Spec {
    /// Its goal: the first message of its conversation.
    pub goal: String,
    /// The own tools it is offered, narrowing those granted to subagents (names, or
    /// `family.*`); all of them when `None`. Checked: each pattern names tools granted to
    /// subagents.
    pub tools: Option<Vec<String>>,
    /// The servers whose tools it is offered, by name; every held server's when `None`.
    pub servers: Option<Vec<String>>,
    /// How long each run of it may take; the daemon's turn deadline when `None`.
    pub deadline: Option<Duration>,
}

impl Spec {
    /// A subagent working on `goal` with every tool it may have.
    pub fn new(goal: &str) -> Self {
        Self {
            goal: goal.to_owned(),
            tools: None,
            servers: None,
            deadline: None,
        }
    }

    /// The grants narrowing the own tools it is offered (as [`Spec::tools`] says); `None`
    /// when every tool granted to subagents is.
    pub fn narrowing(&self) -> Option<Grants> {
        let tools = self.tools.as_ref()?;
        // Checked when it was run; a pattern no longer valid offers nothing.
        Some(Grants::new([(Scope::Subagent, tools)]).unwrap_or_else(|_| empty()))
    }
}

/// Grants offering subagents nothing.
fn empty() -> Grants {
    Grants::new([(Scope::Subagent, Vec::<&str>::new())]).unwrap_or_default()
}

/// The daemon's subagents.
pub trait Subagents: Send + Sync {
    /// Runs a subagent for `parent` as `spec` says: its id, at once (it runs in the
    /// background). [`Error::TooLarge`] past [`RUNNING_MAX`]; [`Error::NotConnected`] for a
    /// server not held; [`Error::NoAgent`] where no agent runs.
    fn run(&self, parent: &str, spec: Spec) -> impl Future<Output = Result<String, Error>> + Send;

    /// Sends `text` from `from` into subagent `id`'s conversation: taken by its next turn,
    /// run again when it had settled. Its status now. [`Error::UnknownSubagent`] for an id
    /// no subagent has, or a retired one; [`Error::NoAgent`] where no agent runs.
    fn send(
        &self,
        id: &str,
        from: &str,
        text: &str,
    ) -> impl Future<Output = Result<Subagent, Error>> + Send;

    /// Subagent `id`'s status, a retired one's included.
    fn status(&self, id: &str) -> impl Future<Output = Result<Subagent, Error>> + Send;

    /// The subagents of `parent` (of every parent when `None`), retired ones left out, by
    /// id.
    fn list(
        &self,
        parent: Option<&str>,
    ) -> impl Future<Output = Result<Vec<Subagent>, Error>> + Send;

    /// Kills subagent `id`: its turn under way is cancelled (its calls on the wire), its
    /// connections closed; a settled one stays as it is. Its status then.
    fn kill(&self, id: &str) -> impl Future<Output = Result<Subagent, Error>> + Send;

    /// Retires settled subagent `id`: forgotten (no longer listed), its history kept.
    /// [`Error::Running`] while it runs.
    fn retire(&self, id: &str) -> impl Future<Output = Result<Subagent, Error>> + Send;
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunArgs {
    goal: String,
    tools: Option<Vec<String>>,
    servers: Option<Vec<String>>,
    deadline: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendArgs {
    id: String,
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdArgs {
    id: String,
}

/// A text argument's bound: at most `max` bytes.
fn bounded(what: &'static str, text: &str, max: usize) -> Result<(), Error> {
    match text.len() > max {
        true => Err(Error::TooLarge {
            what,
            size: text.len(),
            max,
        }),
        false => Ok(()),
    }
}

/// Runs `name` (a `subagent.*` tool but `subagent.await`, which waits: see
/// [`crate::wait`]) for `unit`, a goal or a message at most `max` bytes.
pub(crate) async fn call(
    subagents: &impl Subagents,
    unit: &str,
    max: usize,
    name: &str,
    arguments: Value,
) -> Result<Value, Error> {
    let status = |s: Subagent| s.to_value();
    match name {
        "subagent.run" => {
            let args: RunArgs = parse(name, arguments)?;
            bounded("goal", &args.goal, max)?;
            if let Some(tools) = &args.tools {
                Grants::new([(Scope::Subagent, tools)])
                    .map_err(|e| Error::invalid(name, "/tools", "granted", e.to_string()))?;
            }
            let deadline = args.deadline.as_ref();
            let deadline = deadline.map(|d| read_duration(name, "/deadline", d));
            let spec = Spec {
                goal: args.goal,
                tools: args.tools,
                servers: args.servers,
                deadline: deadline.transpose()?,
            };
            let id = subagents.run(unit, spec).await?;
            Ok(json!({"id": id}))
        }
        "subagent.send" => {
            let args: SendArgs = parse(name, arguments)?;
            bounded("text", &args.text, max)?;
            subagents.send(&args.id, unit, &args.text).await.map(status)
        }
        "subagent.status" => {
            let IdArgs { id } = parse(name, arguments)?;
            subagents.status(&id).await.map(status)
        }
        "subagent.list" => {
            let crate::schema::Empty {} = parse(name, arguments)?;
            let listed = subagents.list(Some(unit)).await?;
            let listed: Vec<Value> = listed.into_iter().map(status).collect();
            Ok(json!({"subagents": listed}))
        }
        "subagent.kill" => {
            let IdArgs { id } = parse(name, arguments)?;
            subagents.kill(&id).await.map(status)
        }
        _ => {
            let IdArgs { id } = parse(name, arguments)?;
            subagents.retire(&id).await.map(status)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_named_once() {
        for state in State::ALL {
            assert_eq!(State::parse(state.as_str()), Some(state));
            assert_eq!(state.settled(), state != State::Running);
        }
        assert_eq!(State::parse("idle"), None);
        let schema = crate::schema::output("subagent.status").unwrap();
        let names: Vec<&str> = State::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(schema["properties"]["state"]["enum"], json!(names));
    }

    #[test]
    fn a_spec_narrows_the_own_tools() {
        let mut spec = Spec::new("g");
        assert_eq!(spec.narrowing(), None);
        spec.tools = Some(vec!["memory.*".into()]);
        let narrowed = spec.narrowing().unwrap();
        assert!(narrowed.offers(Scope::Subagent, "memory.get"));
        assert!(!narrowed.offers(Scope::Subagent, "plan.get"));
        spec.tools = Some(vec![]);
        assert!(
            !spec
                .narrowing()
                .unwrap()
                .offers(Scope::Subagent, "memory.get")
        );
        spec.tools = Some(vec!["no.such".into()]);
        assert!(
            !spec
                .narrowing()
                .unwrap()
                .offers(Scope::Subagent, "memory.get")
        );
    }
}
