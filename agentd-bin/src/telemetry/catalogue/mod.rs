//! Every log line agentd writes, one typed constructor per event: the reference's tables
//! ("Log events": [`connections`], [`listens`], [`events`] for MCP Events) and agentd's own
//! additions ([`own`]). Each names its event, its level and its fields in the reference's
//! order; reasons and causes the reference lists are enums, rendered here once. Text that came
//! from a server is made safe here ([`mcp_wire::log_text`]) before it is written.
//!
//! Every line carries the instance it is about as a field: a reload that renames the instance
//! leaves the lines of the connections it closes under the old name.

pub(crate) mod connections;
pub(crate) mod events;
pub(crate) mod listens;
pub(crate) mod own;
#[cfg(test)]
mod tests;

/// One line of the catalogue: `line!(LEVEL, "name", instance, field = value, ...)`, the level
/// a `tracing` level's name, or `line!(dyn level, ...)` with a [`tracing::Level`] known only
/// at run time.
macro_rules! line {
    (dyn $level:expr, $name:literal, $instance:expr $(, $field:ident = $value:expr)* $(,)?) => {{
        let level: ::tracing::Level = $level;
        if level == ::tracing::Level::ERROR {
            $crate::telemetry::catalogue::line!(ERROR, $name, $instance $(, $field = $value)*)
        } else if level == ::tracing::Level::WARN {
            $crate::telemetry::catalogue::line!(WARN, $name, $instance $(, $field = $value)*)
        } else {
            $crate::telemetry::catalogue::line!(INFO, $name, $instance $(, $field = $value)*)
        }
    }};
    ($level:ident, $name:literal, $instance:expr $(, $field:ident = $value:expr)* $(,)?) => {
        ::tracing::event!(
            target: $crate::telemetry::log::TARGET,
            ::tracing::Level::$level,
            event = $name,
            instance = $instance
            $(, $field = $value)*
        )
    };
}
pub(crate) use line;
