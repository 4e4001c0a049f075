#![doc = include_str!("../README.md")]

use std::fmt;

pub mod events;
pub mod meta;
pub mod runtime;

pub use meta::AgentMeta;

/// Who calls a tool: its kind, for the grants, and the owner of what it makes (the
/// conversation, or a workflow's name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller<'a> {
    /// Its kind.
    pub kind: Grant,
    /// The owner of what it makes.
    pub owner: &'a str,
}

impl<'a> Caller<'a> {
    /// A caller of `kind`, owning what it makes as `owner`.
    pub fn new(kind: Grant, owner: &'a str) -> Self {
        Self { kind, owner }
    }
}

/// Why a tool call did nothing.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// No tool of that name is built here.
    UnknownTool {
        /// The name asked for.
        tool: String,
    },
    /// The tool is not offered to this caller.
    NotOffered {
        /// The tool.
        tool: String,
    },
    /// The arguments do not fit the tool's input schema.
    Arguments {
        /// The tool.
        tool: String,
        /// What is wrong with them.
        err: String,
    },
    /// The runtime subscriptions refused.
    Refused(runtime::Refused),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownTool { tool } => write!(f, "no tool is named {tool:?}"),
            Self::NotOffered { tool } => write!(f, "{tool} is not offered to this caller"),
            Self::Arguments { tool, err } => write!(f, "{tool}: bad arguments: {err}"),
            Self::Refused(refused) => refused.fmt(f),
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

impl From<runtime::Refused> for Error {
    fn from(refused: runtime::Refused) -> Self {
        Self::Refused(refused)
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
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One of agentd's own tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolEntry {
    /// The tool's name.
    pub name: &'static str,
    /// Who may use it by default.
    pub grants: &'static [Grant],
    /// What it does.
    pub does: &'static str,
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

/// Every tool of the catalogue, in the reference's order.
pub fn catalogue() -> &'static [ToolEntry] {
    static CATALOGUE: std::sync::OnceLock<Vec<ToolEntry>> = std::sync::OnceLock::new();
    CATALOGUE.get_or_init(|| {
        FAMILIES
            .iter()
            .flat_map(|f| {
                f.names.iter().map(|name| ToolEntry {
                    name,
                    grants: f.grants,
                    does: f.does,
                })
            })
            .collect()
    })
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
        let status = catalogue().iter().find(|t| t.name == "status").unwrap();
        assert_eq!(status.grants, &[Grant::Everyone]);
        let finish = catalogue().iter().find(|t| t.name == "finish").unwrap();
        assert_eq!(finish.grants, &[Grant::Root, Grant::Subagent]);
        assert_eq!(Grant::parse("workflow"), Some(Grant::Workflow));
        assert_eq!(Grant::parse("Root"), None);
    }
}
