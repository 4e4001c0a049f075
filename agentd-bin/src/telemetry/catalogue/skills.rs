//! The reference's Skills table.

use mcp_wire::log_text;

use super::line::line;
use crate::telemetry::log::Json;

/// `skills.discovered` (info): the prompts of source `server` were listed; `skills` are
/// their names as skills.
pub(crate) fn discovered(instance: &str, server: &str, skills: &[String]) {
    let names: Vec<String> = skills.iter().map(|s| log_text(s)).collect();
    line!(
        INFO,
        "skills.discovered",
        instance,
        server = server,
        count = skills.len(),
        skills = tracing::field::debug(Json(names.into())),
    );
}

/// `skills.source.unavailable` (warn): a `skills.sources` server is not connected; its
/// skills are discovered once it is.
pub(crate) fn source_unavailable(instance: &str, server: &str) {
    line!(WARN, "skills.source.unavailable", instance, server = server);
}
