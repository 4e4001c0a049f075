#![doc = include_str!("../README.md")]

use std::fmt;
use std::sync::OnceLock;

use serde_json::Value;

pub mod artifact;
#[cfg(test)]
mod call_tests;
pub mod contract;
mod error;
pub mod events;
pub mod exec;
pub mod finish;
mod grants;
pub mod human;
pub mod in_memory;
pub mod instruction;
pub mod memory;
pub mod message;
pub mod meta;
pub mod plan;
pub mod reasoning;
pub mod resource;
pub mod runtime;
mod schema;
pub mod skills;
pub mod status;
pub mod subagent;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod tools;
pub mod wait;
pub mod workflow;

pub use error::Error;
pub use grants::{Grants, PatternError};
pub use meta::AgentMeta;
pub use schema::DURATION_MAX_MS;
pub use tools::{Services, Tools, Turn};

/// Who calls a tool: the scope whose grants apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Scope {
    /// The instance's own conversation.
    Root,
    /// A workflow step.
    Workflow,
    /// A subagent's loop.
    Subagent,
}

impl Scope {
    /// Every scope.
    pub const ALL: [Self; 3] = [Self::Root, Self::Workflow, Self::Subagent];

    /// The scope's name in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Root => "root",
            Self::Workflow => "workflow",
            Self::Subagent => "subagent",
        }
    }

    /// The scope named `name` ([`as_str`](Self::as_str)), if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The ids of the unit of work a call is made in; each optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ids {
    /// The conversation.
    pub conversation: Option<String>,
    /// The workflow run.
    pub run: Option<String>,
    /// The step of the run.
    pub step: Option<String>,
    /// The subagent.
    pub subagent: Option<String>,
}

/// Who makes a call: its scope, whether an operator makes it (through the control socket,
/// acting as `scope`), and the ids of its unit of work.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Caller {
    /// The scope whose grants apply.
    pub scope: Scope,
    /// Whether an operator makes the call, acting as `scope`.
    pub operator: bool,
    /// The unit's ids.
    pub ids: Ids,
}

impl Caller {
    /// A caller of `scope` without ids.
    pub fn new(scope: Scope) -> Self {
        Self {
            scope,
            operator: false,
            ids: Ids::default(),
        }
    }

    /// The root conversation `conversation`.
    pub fn root(conversation: &str) -> Self {
        Self::new(Scope::Root).conversation(conversation)
    }

    /// Step `step` of workflow run `run`.
    pub fn workflow(run: &str, step: &str) -> Self {
        let mut caller = Self::new(Scope::Workflow);
        caller.ids.run = Some(run.to_owned());
        caller.ids.step = Some(step.to_owned());
        caller
    }

    /// Subagent `subagent`.
    pub fn subagent(subagent: &str) -> Self {
        let mut caller = Self::new(Scope::Subagent);
        caller.ids.subagent = Some(subagent.to_owned());
        caller
    }

    /// An operator acting as `scope`.
    pub fn operator(scope: Scope) -> Self {
        let mut caller = Self::new(scope);
        caller.operator = true;
        caller
    }

    /// The same caller in conversation `conversation`.
    pub fn conversation(mut self, conversation: &str) -> Self {
        self.ids.conversation = Some(conversation.to_owned());
        self
    }

    /// The unit owning per-unit state (artifacts, plans, finish): `subagent:<id>`,
    /// `run:<id>`, `conversation:<id>`, else `operator`, the first whose id is set.
    pub fn unit(&self) -> String {
        let ids = &self.ids;
        [
            ("subagent", &ids.subagent),
            ("run", &ids.run),
            ("conversation", &ids.conversation),
        ]
        .into_iter()
        .find_map(|(kind, id)| id.as_ref().map(|id| format!("{kind}:{id}")))
        .unwrap_or_else(|| "operator".to_owned())
    }
}

/// Who may use a tool, by default (configuration can narrow it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Grant {
    /// The instance's own conversation.
    Root,
    /// A workflow step.
    Workflow,
    /// A subagent's loop.
    Subagent,
    /// Everyone, A2A callers included.
    Everyone,
}

impl Grant {
    /// The grant's name in configuration and in `agentd --capabilities`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Root => "root",
            Self::Workflow => "workflow",
            Self::Subagent => "subagent",
            Self::Everyone => "everyone",
        }
    }

    /// The grant named `name` ([`as_str`](Self::as_str)), if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Root, Self::Workflow, Self::Subagent, Self::Everyone]
            .into_iter()
            .find(|g| g.as_str() == name)
    }

    /// Whether the grant covers `scope`.
    pub fn covers(self, scope: Scope) -> bool {
        matches!(
            (self, scope),
            (Self::Everyone, _)
                | (Self::Root, Scope::Root)
                | (Self::Workflow, Scope::Workflow)
                | (Self::Subagent, Scope::Subagent)
        )
    }
}

/// The grant of a scope: the kind of caller it is.
impl From<Scope> for Grant {
    fn from(scope: Scope) -> Self {
        match scope {
            Scope::Root => Self::Root,
            Scope::Workflow => Self::Workflow,
            Scope::Subagent => Self::Subagent,
        }
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One of agentd's own tools: its name, default grants, what it does, its input schema
/// (checked before it runs, by a validator compiled once) and, once built, the JSON Schema of
/// its answer.
#[non_exhaustive]
pub struct Tool {
    /// The tool's name.
    pub name: &'static str,
    /// Who may use it by default.
    pub grants: &'static [Grant],
    /// What it does.
    pub does: &'static str,
    /// The JSON Schema of its arguments.
    pub input_schema: Value,
    /// The JSON Schema (draft 2020-12) of its answer; `None` while it is not built.
    pub output_schema: Option<Value>,
    /// Whether it is built (it has an output schema): a call of a tool not built answers
    /// `not_built`.
    pub built: bool,
    validator: jsonschema::Validator,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("grants", &self.grants)
            .field("built", &self.built)
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// Tool `name` with its schemas, offered by default to `grants`.
    fn new(name: &'static str, grants: &'static [Grant], does: &'static str) -> Self {
        let input_schema = schema::input(name).expect("every tool has a schema");
        let validator = jsonschema::validator_for(&input_schema).expect("every schema compiles");
        let output_schema = schema::output(name);
        Self {
            name,
            grants,
            does,
            input_schema,
            built: output_schema.is_some(),
            output_schema,
            validator,
        }
    }

    /// Whether its default grants cover `scope`.
    pub fn granted_to(&self, scope: Scope) -> bool {
        self.grants.iter().any(|g| g.covers(scope))
    }

    /// Checks `arguments` against its input schema: the first failure, with the JSON
    /// pointer of the value and the keyword it broke.
    pub fn check(&self, arguments: &Value) -> Result<(), Error> {
        match self.validator.iter_errors(arguments).next() {
            None => Ok(()),
            Some(e) => Err(Error::invalid(
                self.name,
                e.instance_path().as_str(),
                e.kind().keyword(),
                e.to_string(),
            )),
        }
    }
}

use Grant::{Everyone as E, Root as R, Subagent as S, Workflow as W};

const RWS: &[Grant] = &[R, W, S];
const RW: &[Grant] = &[R, W];

/// A family of tools sharing grants and a description: `prefix.verb` for each verb.
struct Family {
    names: &'static [&'static str],
    grants: &'static [Grant],
    does: &'static str,
}

const FAMILIES: &[Family] = &[
    Family {
        names: &["instruction.read"],
        grants: RWS,
        does: "Read the current instruction",
    },
    Family {
        names: &["instruction.subscribe"],
        grants: &[R],
        does: "Subscribe to the instruction resource, or switch to another URI",
    },
    Family {
        names: &[
            "subagent.run",
            "subagent.send",
            "subagent.status",
            "subagent.await",
            "subagent.list",
            "subagent.kill",
            "subagent.retire",
        ],
        grants: RW,
        does: "Spawn, steer, wait for, list, stop and retire subagents",
    },
    Family {
        names: &[
            "memory.get",
            "memory.set",
            "memory.list",
            "memory.push",
            "memory.shift",
            "memory.pop",
            "memory.delete",
        ],
        grants: RWS,
        does: "Durable memory, including queue operations",
    },
    Family {
        names: &[
            "artifact.create",
            "artifact.get",
            "artifact.delete",
            "artifact.list",
        ],
        grants: RWS,
        does: "Artifacts delivered with the task",
    },
    Family {
        names: &["message.send"],
        grants: RWS,
        does: "Deliver a message into one of the instance's own conversations",
    },
    Family {
        names: &[
            "events.list",
            "events.subscribe",
            "events.unsubscribe",
            "events.subscriptions",
        ],
        grants: RW,
        does: "Runtime MCP Events subscriptions; offered only when a grant sets tools: true",
    },
    Family {
        names: &["workflow.run", "workflow.cancel", "workflow.wait"],
        grants: RW,
        does: "Start, cancel and wait for runs",
    },
    Family {
        names: &["workflow.list", "workflow.status", "workflow.signal"],
        grants: RWS,
        does: "Read runs and send signals",
    },
    Family {
        names: &[
            "workflow.create",
            "workflow.update",
            "workflow.delete",
            "workflow.pause",
            "workflow.resume",
        ],
        grants: &[R],
        does: "Define workflows at runtime, pause and resume runs",
    },
    Family {
        names: &["plan.create", "plan.get", "plan.update", "plan.clear"],
        grants: RWS,
        does: "The conversation's working plan",
    },
    Family {
        names: &["ask_human"],
        grants: RWS,
        does: "Ask a person and wait for a schema-checked answer",
    },
    Family {
        names: &["sleep", "await"],
        grants: RWS,
        does: "Wait for a duration, or until a condition holds",
    },
    Family {
        names: &["context.compact"],
        grants: RWS,
        does: "Summarize older messages in the context",
    },
    Family {
        names: &["think"],
        grants: RWS,
        does: "One structured reasoning call with no tools",
    },
    Family {
        names: &["decide"],
        grants: RWS,
        does: "Typed questions answered with calibrated confidence",
    },
    Family {
        names: &["skills.list", "skills.load", "skills.unload"],
        grants: RWS,
        does: "The skills catalogue and the loaded set",
    },
    Family {
        names: &["finish"],
        grants: &[R, S],
        does: "End the current unit of work with a status",
    },
    Family {
        names: &["status"],
        grants: &[E],
        does: "The instance's runs, subagents, conversations, budget and store",
    },
    Family {
        names: &["knowledge.search", "knowledge.get", "knowledge.list"],
        grants: RWS,
        does: "A contract: implemented by knowledge.server or a mapping",
    },
    Family {
        names: &["search.query", "search.fetch"],
        grants: RWS,
        does: "A contract: implemented by search.server or a mapping",
    },
    Family {
        names: &["code.run"],
        grants: RW,
        does: "A contract: implemented only by a mapping to a sandbox server",
    },
    Family {
        names: &["exec"],
        grants: RWS,
        does: "A contract: a mapping, or a local command runner with the exec build feature and security.exec.enabled",
    },
];

/// Every tool of the catalogue, in the reference's order; built once.
pub fn catalogue() -> &'static [Tool] {
    static CATALOGUE: OnceLock<Vec<Tool>> = OnceLock::new();
    CATALOGUE.get_or_init(|| {
        FAMILIES
            .iter()
            .flat_map(|f| f.names.iter().map(|name| Tool::new(name, f.grants, f.does)))
            .collect()
    })
}

/// The tool named `name`, if the catalogue has it.
pub fn tool(name: &str) -> Option<&'static Tool> {
    catalogue().iter().find(|t| t.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_of_the_reference_is_there_once() {
        let names: Vec<&str> = catalogue().iter().map(|t| t.name).collect();
        assert_eq!(names.len(), 58);
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "no name twice");
        for name in [
            "instruction.subscribe",
            "memory.shift",
            "workflow.resume",
            "status",
            "exec",
            "await",
        ] {
            assert!(names.contains(&name), "{name}");
        }
        let status = tool("status").unwrap();
        assert_eq!(status.grants, &[Grant::Everyone]);
        let finish = tool("finish").unwrap();
        assert_eq!(finish.grants, &[Grant::Root, Grant::Subagent]);
        assert_eq!(Grant::parse("workflow"), Some(Grant::Workflow));
        assert_eq!(Grant::parse("Root"), None);
        let built: Vec<&str> = catalogue()
            .iter()
            .filter(|t| t.built)
            .map(|t| t.name)
            .collect();
        assert_eq!(built.len(), 52, "{built:?}");
        for name in [
            "memory.shift",
            "artifact.get",
            "plan.get",
            "await",
            "status",
            "ask_human",
            "instruction.subscribe",
            "skills.unload",
            "subagent.retire",
            "think",
            "decide",
            "context.compact",
            "workflow.resume",
            "exec",
        ] {
            assert!(built.contains(&name), "{name}");
        }
        assert!(events::TOOLS.iter().all(|name| built.contains(name)));
    }

    #[test]
    fn every_schema_is_a_closed_object() {
        for tool in catalogue() {
            let schema = &tool.input_schema;
            assert_eq!(schema["type"], "object", "{}", tool.name);
            assert_eq!(schema["additionalProperties"], false, "{}", tool.name);
            let err = tool.check(&serde_json::json!({"surely_not_an_argument": 1}));
            assert!(
                matches!(&err, Err(Error::InvalidArguments { .. })),
                "{}: {err:?}",
                tool.name
            );
            assert!(tool.check(&serde_json::json!([])).is_err(), "{}", tool.name);
        }
    }

    #[test]
    fn every_output_schema_compiles_and_says_what_is_required() {
        for tool in catalogue().iter().filter(|t| t.built) {
            let schema = tool.output_schema.as_ref().unwrap();
            let meta = jsonschema::draft202012::meta::validate(schema);
            assert!(meta.is_ok(), "{}: {meta:?}", tool.name);
            let compiled = jsonschema::draft202012::new(schema);
            assert!(compiled.is_ok(), "{}: {compiled:?}", tool.name);
            // An object of its own, or one of two or more shapes.
            let shapes = schema["oneOf"]
                .as_array()
                .cloned()
                .unwrap_or_else(|| vec![schema.clone()]);
            for shape in shapes {
                assert_eq!(shape["type"], "object", "{}", tool.name);
                assert!(
                    !shape["required"].as_array().unwrap().is_empty(),
                    "{}",
                    tool.name
                );
            }
        }
    }

    #[test]
    #[should_panic(expected = "memory.set answered")]
    fn an_answer_unlike_its_schema_fails() {
        schema::assert_answer("memory.set", &serde_json::json!({"version": "1"}));
    }

    #[test]
    fn a_failure_names_the_pointer_and_the_rule() {
        let set = tool("memory.set").unwrap();
        let err = set
            .check(&serde_json::json!({"key": "k", "value": 1, "expected_version": -1}))
            .unwrap_err();
        let Error::InvalidArguments { pointer, rule, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(
            (pointer.as_str(), rule.as_str()),
            ("/expected_version", "minimum")
        );
        assert_eq!(err.code(), "invalid_arguments");
        assert_eq!(err.to_value()["pointer"], "/expected_version");
        let err = set.check(&serde_json::json!({"key": "k"})).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArguments { pointer, rule, .. } if pointer.is_empty() && rule == "required")
        );
    }

    #[test]
    fn the_unit_is_the_most_specific_id() {
        let mut caller = Caller::workflow("r1", "s1").conversation("c");
        assert_eq!(caller.unit(), "run:r1");
        caller.ids.subagent = Some("a".into());
        assert_eq!(caller.unit(), "subagent:a");
        assert_eq!(Caller::root("c").unit(), "conversation:c");
        assert_eq!(Caller::operator(Scope::Root).unit(), "operator");
        assert!(Grant::Everyone.covers(Scope::Subagent));
        assert!(!Grant::Root.covers(Scope::Workflow));
        for scope in Scope::ALL {
            assert!(Grant::from(scope).covers(scope));
            assert_eq!(Grant::from(scope).as_str(), scope.as_str());
        }
        assert_eq!(Scope::parse("subagent"), Some(Scope::Subagent));
        assert_eq!(Scope::parse("operator"), None);
    }
}
