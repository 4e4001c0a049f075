//! The daemon's metrics, in the Prometheus text exposition format: the reference's table,
//! each series kept by its labels.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

/// One metric of the reference's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Metric {
    ConnectFailures,
    Events,
    EventsRequests,
    EventGaps,
    DedupEvicted,
    EventLag,
    SubscriptionsActive,
}

impl Metric {
    const ALL: [Self; 7] = [
        Self::ConnectFailures,
        Self::Events,
        Self::EventsRequests,
        Self::EventGaps,
        Self::DedupEvicted,
        Self::EventLag,
        Self::SubscriptionsActive,
    ];

    /// Name, type and help.
    fn describe(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Self::ConnectFailures => (
                "agent_mcp_connect_failures_total",
                "counter",
                "Dials of an MCP server that failed.",
            ),
            Self::Events => (
                "agent_mcp_events_total",
                "counter",
                "MCP Events occurrences by outcome.",
            ),
            Self::EventsRequests => (
                "agent_mcp_events_requests_total",
                "counter",
                "MCP Events requests by method and outcome.",
            ),
            Self::EventGaps => (
                "agent_mcp_event_gaps_total",
                "counter",
                "Losses the wire shows, by cause.",
            ),
            Self::DedupEvicted => (
                "agent_mcp_events_dedup_evicted_total",
                "counter",
                "Ids let go from a full dedup window.",
            ),
            Self::EventLag => (
                "agent_mcp_event_lag_ms",
                "gauge",
                "Append time minus the server's timestamp, last occurrence.",
            ),
            Self::SubscriptionsActive => {
                ("agent_subscriptions_active", "gauge", "Live subscriptions.")
            }
        }
    }
}

/// Counters and gauges the daemon keeps, by metric and labels.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    series: Mutex<BTreeMap<(Metric, String), i64>>,
}

impl Metrics {
    /// Adds `delta` to a counter (or a gauge) with `labels`.
    pub(crate) fn add(&self, metric: Metric, labels: &[(&str, &str)], delta: i64) {
        if delta == 0 {
            return;
        }
        let mut series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        *series.entry((metric, render(labels))).or_default() += delta;
    }

    /// Sets a gauge with `labels`.
    pub(crate) fn set(&self, metric: Metric, labels: &[(&str, &str)], value: i64) {
        let mut series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        series.insert((metric, render(labels)), value);
    }

    /// Drops every series of `metric` (a gauge counted again from zero).
    pub(crate) fn clear(&self, metric: Metric) {
        let mut series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        series.retain(|(m, _), _| *m != metric);
    }

    /// A dial of `server` failed.
    pub(crate) fn connect_failed(&self, server: &str) {
        self.add(Metric::ConnectFailures, &[("server", server)], 1);
    }

    /// The exposition text: every metric's HELP and TYPE, then its series.
    pub(crate) fn render(&self) -> String {
        let series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        for metric in Metric::ALL {
            let (name, kind, help) = metric.describe();
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            let own = series
                .range((metric, String::new())..)
                .take_while(|((m, _), _)| *m == metric);
            for ((_, labels), value) in own {
                let _ = writeln!(out, "{name}{{{labels}}} {value}");
            }
        }
        out
    }
}

/// `k="v",…` with values escaped as the format says: backslash, double quote and newline.
fn render(labels: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let v = v
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        let _ = write!(out, "{k}=\"{v}\"");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_render_with_escaped_labels_under_their_metric() {
        let m = Metrics::default();
        m.connect_failed("a");
        m.connect_failed("a");
        m.connect_failed("we\"ird\\\n");
        m.add(
            Metric::Events,
            &[
                ("server", "s"),
                ("event", "t"),
                ("mode", "poll"),
                ("outcome", "appended"),
            ],
            3,
        );
        m.set(Metric::EventLag, &[("server", "s"), ("event", "t")], 1500);
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
        assert!(text.contains(
            "agent_mcp_events_total{server=\"s\",event=\"t\",mode=\"poll\",outcome=\"appended\"} 3\n"
        ));
        assert!(text.contains("# TYPE agent_mcp_event_lag_ms gauge\n"));
        assert!(text.contains("agent_mcp_event_lag_ms{server=\"s\",event=\"t\"} 1500\n"));
        assert!(text.contains("# TYPE agent_subscriptions_active gauge\n"));
        // A series appears once, under its own metric.
        assert_eq!(text.matches("} 1500").count(), 1);
    }
}
