//! The agent: a model provider ([`model`]), conversations whose turns call MCP tools and
//! agentd's own, human gates, and subagents.

pub(crate) mod model;
