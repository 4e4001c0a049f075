//! Every log line agentd writes, one typed constructor per event: the reference's tables
//! ("Log events": [`connections`], [`listens`], [`subscriptions`], [`skills`], [`events`] for
//! MCP Events) and agentd's own additions ([`own`]). Each names its event, its level and its fields in the reference's
//! order; reasons and causes the reference lists are enums, rendered here once. Text that came
//! from a server is made safe here ([`mcp_wire::log_text`]) before it is written.
//!
//! Every line carries the instance it is about as a field: a reload that renames the instance
//! leaves the lines of the connections it closes under the old name.

pub(crate) mod connections;
pub(crate) mod events;
mod line;
pub(crate) mod listens;
pub(crate) mod own;
pub(crate) mod skills;
pub(crate) mod subscriptions;
#[cfg(test)]
mod tests;
