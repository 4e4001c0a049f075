//! The one way a catalogue entry writes its line.

/// One line of the catalogue: `line!(LEVEL, "name", instance, field = value, ...)`, the level
/// a `tracing` level's name, or `line!(dyn level, ...)` with a [`tracing::Level`] known only
/// at run time.
macro_rules! line {
    (dyn $level:expr, $name:literal, $instance:expr $(, $field:ident = $value:expr)* $(,)?) => {{
        let level: ::tracing::Level = $level;
        if level == ::tracing::Level::ERROR {
            $crate::telemetry::catalogue::line::line!(ERROR, $name, $instance $(, $field = $value)*)
        } else if level == ::tracing::Level::WARN {
            $crate::telemetry::catalogue::line::line!(WARN, $name, $instance $(, $field = $value)*)
        } else {
            $crate::telemetry::catalogue::line::line!(INFO, $name, $instance $(, $field = $value)*)
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
