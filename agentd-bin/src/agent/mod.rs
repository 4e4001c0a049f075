//! The agent: a model provider ([`model`]), conversations whose turns call MCP tools and
//! agentd's own, human gates ([`human`]), subagents, the instruction that is their system
//! prompt ([`instruction`]) and the skills they load into their context ([`skills`]). The
//! parts reach the supervisor's servers through [`servers`].

pub(crate) mod human;
pub(crate) mod instruction;
pub(crate) mod model;
pub(crate) mod servers;
pub(crate) mod skills;
