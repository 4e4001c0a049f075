//! The agent: a model provider ([`model`]), conversations ([`conversations`]) whose turns
//! ([`turn`]) show the model their context ([`context`]) and call agentd's own tools and the
//! tools of the servers held over turn workers ([`workers`]), under names models accept
//! ([`names`]), each call carrying the turn's request metadata ([`meta`]) and its result read
//! back as text ([`calls`]); subagents ([`subagents`]: child loops with conversations and
//! connections of their own); the instruction that is their system prompt ([`instruction`])
//! and the skills they load into their context ([`skills`]). A server's elicitation on a
//! worker is a question to a person ([`crate::human`]). The parts reach the supervisor's
//! servers through [`servers`].

pub(crate) mod calls;
pub(crate) mod context;
pub(crate) mod conversations;
pub(crate) mod instruction;
pub(crate) mod meta;
pub(crate) mod model;
pub(crate) mod names;
#[cfg(any(test, feature = "demo"))]
pub(crate) mod scripted;
pub(crate) mod servers;
pub(crate) mod skills;
pub(crate) mod subagents;
#[cfg(test)]
mod tests;
pub(crate) mod turn;
pub(crate) mod workers;
