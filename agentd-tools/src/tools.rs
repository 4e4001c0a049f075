//! The runtime: [`Tools`] checks who calls and with what, then runs the tool against the
//! daemon's [`Services`].

use std::time::Duration;

use serde_json::Value;

use crate::artifact::{self, Artifacts};
use crate::exec::{self, Exec};
use crate::finish::{self, Units};
use crate::human::{self, Humans};
use crate::instruction::{self, Instruction};
use crate::memory::{self, Memory};
use crate::message::{self, Messages};
use crate::plan::{self, Plans};
use crate::reasoning::{self, Reasoning};
use crate::schema::{Empty, parse};
use crate::skills::{self, Skills};
use crate::status::Status;
use crate::subagent::{self, Subagents};
use crate::wait::{self, Clock, Streams};
use crate::workflow::{self, Workflows};
use crate::{Caller, Error, Grants, Scope, Tool, catalogue, tool};

/// The services the tools reach the daemon through: one of each, named by an associated
/// type so that a daemon can make them of different parts (a store, a clock). The
/// in-memory ones are [`InMemory`](crate::in_memory::InMemory).
pub trait Services: Send + Sync {
    /// Durable memory.
    type Memory: Memory;
    /// Artifacts per unit.
    type Artifacts: Artifacts;
    /// Plans per unit.
    type Plans: Plans;
    /// Conversation inboxes.
    type Messages: Messages;
    /// Streams, for `await`.
    type Streams: Streams;
    /// Finished units.
    type Units: Units;
    /// The instance's state.
    type Status: Status;
    /// Questions to people.
    type Humans: Humans;
    /// Time and waiting.
    type Clock: Clock;
    /// The instruction.
    type Instruction: Instruction;
    /// The skills catalogue and the loaded sets.
    type Skills: Skills;
    /// The subagents.
    type Subagents: Subagents;
    /// The workflows and their runs.
    type Workflows: Workflows;

    /// Durable memory.
    fn memory(&self) -> &Self::Memory;
    /// Artifacts per unit.
    fn artifacts(&self) -> &Self::Artifacts;
    /// Plans per unit.
    fn plans(&self) -> &Self::Plans;
    /// Conversation inboxes.
    fn messages(&self) -> &Self::Messages;
    /// Streams, for `await`.
    fn streams(&self) -> &Self::Streams;
    /// Finished units.
    fn units(&self) -> &Self::Units;
    /// The instance's state.
    fn status(&self) -> &Self::Status;
    /// Questions to people.
    fn humans(&self) -> &Self::Humans;
    /// Time and waiting.
    fn clock(&self) -> &Self::Clock;
    /// The instruction.
    fn instruction(&self) -> &Self::Instruction;
    /// The skills catalogue and the loaded sets.
    fn skills(&self) -> &Self::Skills;
    /// The subagents.
    fn subagents(&self) -> &Self::Subagents;
    /// The workflows and their runs.
    fn workflows(&self) -> &Self::Workflows;

    /// The local command runner of `exec`, if the daemon gives one; without one (the
    /// default) `exec` is not offered.
    fn exec(&self) -> Option<&dyn Exec> {
        None
    }
}

/// A model's turn a tool is called in ([`Tools::call_in`]).
#[derive(Clone, Copy)]
pub struct Turn<'a> {
    /// The turn's model and context, which the model-only tools reason over.
    pub reasoning: &'a dyn Reasoning,
    /// What is left of the turn when the call starts.
    pub within: Duration,
}

/// Shown without its model: what is left of the turn.
impl std::fmt::Debug for Turn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn")
            .field("within", &self.within)
            .finish_non_exhaustive()
    }
}

/// agentd's own tools over `services`, offered as `grants` say.
///
/// The events tools (`events.*`) are offered per owner (a grant with `tools: true`) and are
/// called through [`events::call`](crate::events::call); `Tools` neither offers nor runs
/// them (a call answers `not_granted`).
#[derive(Debug)]
pub struct Tools<S> {
    services: S,
    grants: Grants,
}

impl<S: Services> Tools<S> {
    /// The tools over `services`, offered as `grants` say.
    pub fn new(services: S, grants: Grants) -> Self {
        Self { services, grants }
    }

    /// The services.
    pub fn services(&self) -> &S {
        &self.services
    }

    /// The grants.
    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// The tools offered to `scope`: granted, built, run here (not `events.*`), and
    /// implemented (`exec` only with a runner: [`Services::exec`]).
    pub fn offered(&self, scope: Scope) -> impl Iterator<Item = &'static Tool> + '_ {
        catalogue().iter().filter(move |t| {
            t.built
                && !is_events(t.name)
                && self.grants.offers(scope, t.name)
                && self.not_offered(t.name).is_none()
        })
    }

    /// Why a granted and built tool named `name` is not offered: `exec` without a runner.
    fn not_offered(&self, name: &str) -> Option<Error> {
        (name == exec::TOOL && self.services.exec().is_none()).then(no_runner)
    }

    /// Calls `name` for `caller` with `arguments`: refused when no tool has that name
    /// (`unknown_tool`) or it is not offered to the caller's scope (`not_granted`),
    /// `not_built` when it is not built yet, `not_offered` when nothing implements it here
    /// (`exec` without a runner), `invalid_arguments` when the arguments do not fit its input
    /// schema; else the tool's answer or error. A model-only tool
    /// ([`reasoning`]) answers `model_only`: it is called in a turn ([`Tools::call_in`]).
    pub async fn call(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Value,
    ) -> Result<Value, Error> {
        self.call_in(caller, name, arguments, None).await
    }

    /// [`Tools::call`] in a model's `turn`, when given: the model-only tools ([`reasoning`])
    /// run over its model and context (`model_only` without a turn), and `exec` ends its
    /// command when the turn ends ([`exec::Command::within`]).
    pub async fn call_in(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Value,
        turn: Option<Turn<'_>>,
    ) -> Result<Value, Error> {
        let tool = tool(name).ok_or_else(|| Error::UnknownTool {
            tool: name.to_owned(),
        })?;
        if is_events(name) || !self.grants.offers(caller.scope, name) {
            return Err(Error::NotGranted {
                tool: name.to_owned(),
                scope: Some(caller.scope),
            });
        }
        if !tool.built {
            return Err(Error::NotBuilt {
                tool: name.to_owned(),
            });
        }
        if let Some(refused) = self.not_offered(name) {
            return Err(refused);
        }
        tool.check(&arguments)?;
        let s = &self.services;
        let family = name.split('.').next().unwrap_or(name);
        match family {
            "memory" => memory::call(s.memory(), name, arguments).await,
            "artifact" => artifact::call(s.artifacts(), &caller.unit(), name, arguments).await,
            "plan" => plan::call(s.plans(), &caller.unit(), name, arguments).await,
            "message" => {
                let max = s.memory().max_value_bytes();
                let now = s.clock().now_ms();
                message::send(s.messages(), &caller.unit(), now, max, arguments).await
            }
            "status" => {
                let Empty {} = parse(name, arguments)?;
                let mut report = s.status().report().await?;
                report.subagents = s.subagents().list(None).await?;
                for status in [workflow::Status::Running, workflow::Status::Paused] {
                    let mut under_way = workflow::Filter::new(workflow::LIST_MAX);
                    under_way.status = Some(status);
                    report
                        .runs
                        .extend(s.workflows().list(under_way).await?.runs);
                }
                Ok(report.to_value())
            }
            "sleep" => wait::sleep(s.clock(), arguments).await,
            "await" => {
                let sources = (
                    s.memory(),
                    s.messages(),
                    s.streams(),
                    s.subagents(),
                    s.workflows(),
                );
                wait::wait(s.clock(), sources, arguments).await
            }
            "ask_human" => human::ask(s.humans(), &caller.unit(), arguments).await,
            "finish" => {
                let now = s.clock().now_ms();
                finish::call(s.units(), s.artifacts(), &caller.unit(), now, arguments).await
            }
            "instruction" => instruction::call(s.instruction(), name, arguments).await,
            "skills" => skills::call(s.skills(), &caller.unit(), name, arguments).await,
            "subagent" if name == "subagent.await" => {
                wait::subagent(s.clock(), s.subagents(), arguments).await
            }
            "subagent" => {
                let max = s.memory().max_value_bytes();
                let unit = caller.unit();
                subagent::call(s.subagents(), &unit, max, name, arguments).await
            }
            _ if reasoning::is_reasoning(name) => match turn {
                Some(turn) => reasoning::call(turn.reasoning, name, arguments).await,
                None => Err(Error::ModelOnly {
                    tool: name.to_owned(),
                }),
            },
            "workflow" if name == "workflow.wait" => {
                wait::run(s.clock(), s.workflows(), arguments).await
            }
            "workflow" => {
                let unit = caller.unit();
                workflow::call(s.workflows(), &unit, name, arguments).await
            }
            "exec" => {
                let runner = s.exec().ok_or_else(no_runner)?;
                exec::call(runner, arguments, turn.map(|t| t.within)).await
            }
            _ => Err(Error::NotBuilt {
                tool: name.to_owned(),
            }),
        }
    }
}

fn is_events(name: &str) -> bool {
    name.starts_with("events.")
}

/// `exec` called where no runner is given.
fn no_runner() -> Error {
    Error::NotOffered {
        tool: exec::TOOL.to_owned(),
        reason: exec::NOT_OFFERED.to_owned(),
    }
}
