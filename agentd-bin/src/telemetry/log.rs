//! Log lines: one NDJSON object per event on stderr: the envelope `ts`, `level`, `event`,
//! `instance` first, then the event's fields in the order given.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::SystemTime;

use serde_json::Value;

/// A level of the reference's log tables.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Level {
    Info,
    Warn,
    Error,
}

/// Writes one event to stderr. Text from a server must already be made safe
/// ([`mcp_wire::log_text`]).
pub(crate) fn event(instance: &str, level: Level, event: &str, fields: &[(&str, Value)]) {
    let level = match level {
        Level::Info => "info",
        Level::Warn => "warn",
        Level::Error => "error",
    };
    let ts = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
    let envelope = [
        ("ts", Value::from(ts)),
        ("level", level.into()),
        ("event", event.into()),
        ("instance", instance.into()),
    ];
    let mut line = String::from("{");
    for (i, (k, v)) in envelope.iter().chain(fields).enumerate() {
        if i > 0 {
            line.push(',');
        }
        let _ = write!(line, "{}:{}", Value::from(*k), v);
    }
    line.push('}');
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Writes a line to stdout; a closed stdout (`agentd ... | head`) is no error.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}
