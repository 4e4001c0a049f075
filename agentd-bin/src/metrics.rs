//! The daemon's metrics, in the Prometheus text exposition format.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

/// Counters and gauges the daemon keeps.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    connect_failures: Mutex<BTreeMap<String, u64>>,
}

impl Metrics {
    /// A dial of `server` failed.
    pub(crate) fn connect_failed(&self, server: &str) {
        let mut failures = self
            .connect_failures
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *failures.entry(server.to_owned()).or_default() += 1;
    }

    /// The exposition text.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        out.push_str(
            "# HELP agent_mcp_connect_failures_total Dials of an MCP server that failed.\n",
        );
        out.push_str("# TYPE agent_mcp_connect_failures_total counter\n");
        let failures = self
            .connect_failures
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for (server, n) in failures.iter() {
            let _ = writeln!(
                out,
                "agent_mcp_connect_failures_total{{server=\"{}\"}} {n}",
                label(server)
            );
        }
        out
    }
}

/// A label value escaped as the format says: backslash, double quote and newline.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_render_with_escaped_labels() {
        let m = Metrics::default();
        m.connect_failed("a");
        m.connect_failed("a");
        m.connect_failed("we\"ird\\\n");
        let text = m.render();
        assert!(text.contains("# TYPE agent_mcp_connect_failures_total counter\n"));
        assert!(
            text.contains("agent_mcp_connect_failures_total{server=\"a\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains(r#"agent_mcp_connect_failures_total{server="we\"ird\\\n"} 1"#),
            "{text}"
        );
    }
}
