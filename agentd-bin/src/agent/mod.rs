//! The agent: a model provider ([`model`]), conversations whose turns call MCP tools and
//! agentd's own, human gates ([`human`]), and subagents.

pub(crate) mod human;
pub(crate) mod model;
