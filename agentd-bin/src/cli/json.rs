//! JSON in and out of the one-shot commands: arguments read, results printed.

use std::process::ExitCode;

use serde_json::{Map, Value};

/// Prints `value` as indented JSON.
pub(super) fn say_json(value: &impl serde::Serialize) {
    crate::say!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

/// Arguments given on the command line: none, or a JSON object (anything else is exit 2).
pub(super) fn object_arguments(
    arguments: Option<&str>,
) -> Result<Option<Map<String, Value>>, ExitCode> {
    match arguments.map(serde_json::from_str::<Value>) {
        None => Ok(None),
        Some(Ok(Value::Object(map))) => Ok(Some(map)),
        Some(_) => {
            eprintln!("agentd: the arguments must be a JSON object");
            Err(ExitCode::from(2))
        }
    }
}
