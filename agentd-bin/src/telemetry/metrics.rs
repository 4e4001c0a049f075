//! The daemon's metrics: the reference's table, each metric a family of typed label sets in
//! one registry, exposed in the Prometheus text format (0.0.4), or in OpenMetrics to a
//! scraper that asks for it.

use std::fmt::Write as _;

use mcp_events::binding::Gap;
use mcp_wire::events::DeliveryMode;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The content type of the OpenMetrics text format (1.0.0).
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// An enum of label values, each rendered once.
macro_rules! label_values {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $text:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub(crate) enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl EncodeLabelValue for $name {
            fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
                encoder.write_str(match self {
                    $(Self::$variant => $text,)+
                })
            }
        }
    };
}

label_values! {
    /// What became of an occurrence (`agent_mcp_events_total`, `outcome`).
    Outcome {
        /// Committed to the store.
        Appended => "appended",
        /// Seen already: passed over.
        Duplicate => "duplicate",
        /// Not appended: oversize or malformed.
        Rejected => "rejected",
        /// Appended with `schema_ok: false`.
        SchemaMismatch => "schema_mismatch",
        /// Refused under pressure, or with the binding's rate spent (429).
        RefusedPressure => "refused_pressure",
    }
}

label_values! {
    /// The kind of subscription (`agent_subscriptions_active`, `kind`).
    Kind {
        /// An MCP Events binding or runtime subscription.
        Event => "event",
    }
}

/// A delivery mode as a label value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Mode(DeliveryMode);

impl EncodeLabelValue for Mode {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        encoder.write_str(self.0.as_str())
    }
}

/// What an `events/*` request came to (`agent_mcp_events_requests_total`, `outcome`), the
/// same for every method, as a label value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Answered(mcp_events::binding::Outcome);

impl EncodeLabelValue for Answered {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        encoder.write_str(self.0.as_str())
    }
}

/// A gap's cause as a label value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Cause(Gap);

impl EncodeLabelValue for Cause {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> std::fmt::Result {
        encoder.write_str(self.0.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct EventLabels {
    server: String,
    event: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OccurrenceLabels {
    server: String,
    event: String,
    mode: Mode,
    outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    server: String,
    method: &'static str,
    outcome: Answered,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct GapLabels {
    server: String,
    event: String,
    cause: Cause,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ToolLabels {
    tool: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ActiveLabels {
    kind: Kind,
    mode: Mode,
}

/// The counters and gauges the daemon keeps, registered under the reference's names (a
/// counter without its `_total`, which the encoders add).
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    connect_failures: Family<ServerLabels, Counter>,
    events: Family<OccurrenceLabels, Counter>,
    requests: Family<RequestLabels, Counter>,
    gaps: Family<GapLabels, Counter>,
    dedup_evicted: Family<EventLabels, Counter>,
    lag: Family<EventLabels, Gauge>,
    active: Family<ActiveLabels, Gauge>,
    tool_calls: Family<ToolLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut m = Self {
            registry: Registry::default(),
            connect_failures: Family::default(),
            events: Family::default(),
            requests: Family::default(),
            gaps: Family::default(),
            dedup_evicted: Family::default(),
            lag: Family::default(),
            active: Family::default(),
            tool_calls: Family::default(),
        };
        // Help texts without a final period: the registry adds it.
        let r = &mut m.registry;
        r.register(
            "agent_mcp_connect_failures",
            "Dials of an MCP server that failed",
            m.connect_failures.clone(),
        );
        r.register(
            "agent_mcp_events",
            "MCP Events occurrences by outcome",
            m.events.clone(),
        );
        r.register(
            "agent_mcp_events_requests",
            "MCP Events requests by method and outcome",
            m.requests.clone(),
        );
        r.register(
            "agent_mcp_event_gaps",
            "Losses the wire shows, by cause",
            m.gaps.clone(),
        );
        r.register(
            "agent_mcp_events_dedup_evicted",
            "Ids let go from a full dedup window",
            m.dedup_evicted.clone(),
        );
        r.register(
            "agent_mcp_event_lag_ms",
            "Commit time minus the server's timestamp, last occurrence committed",
            m.lag.clone(),
        );
        r.register(
            "agent_subscriptions_active",
            "Live subscriptions",
            m.active.clone(),
        );
        r.register(
            "agent_tool_calls",
            "Calls of agentd's own tools, by tool and outcome",
            m.tool_calls.clone(),
        );
        m
    }
}

impl Metrics {
    /// A call of agentd's own tool `tool` came to `outcome` (`ok`, or the error's code).
    pub(crate) fn tool_call(&self, tool: &'static str, outcome: &'static str) {
        let labels = ToolLabels { tool, outcome };
        self.tool_calls.get_or_create(&labels).inc();
    }

    /// A dial of `server` failed.
    pub(crate) fn connect_failed(&self, server: &str) {
        let labels = ServerLabels {
            server: server.to_owned(),
        };
        self.connect_failures.get_or_create(&labels).inc();
    }

    /// `n` occurrences of `event` on `server`, taken in `mode`, came to `outcome`.
    pub(crate) fn occurrences(
        &self,
        (server, event): (&str, &str),
        mode: DeliveryMode,
        outcome: Outcome,
        n: u64,
    ) {
        if n > 0 {
            let labels = OccurrenceLabels {
                server: server.to_owned(),
                event: event.to_owned(),
                mode: Mode(mode),
                outcome,
            };
            self.events.get_or_create(&labels).inc_by(n);
        }
    }

    /// An `events/*` request (`method`) to `server` came to `outcome`.
    pub(crate) fn request(
        &self,
        server: &str,
        method: &'static str,
        outcome: mcp_events::binding::Outcome,
    ) {
        let labels = RequestLabels {
            server: server.to_owned(),
            method,
            outcome: Answered(outcome),
        };
        self.requests.get_or_create(&labels).inc();
    }

    /// `n` gaps of `cause` in `event` on `server`.
    pub(crate) fn gaps(&self, (server, event): (&str, &str), cause: Gap, n: u64) {
        if n > 0 {
            let labels = GapLabels {
                server: server.to_owned(),
                event: event.to_owned(),
                cause: Cause(cause),
            };
            self.gaps.get_or_create(&labels).inc_by(n);
        }
    }

    /// `n` ids of `event` on `server` let go from a full dedup window.
    pub(crate) fn dedup_evicted(&self, (server, event): (&str, &str), n: u64) {
        if n > 0 {
            self.dedup_evicted
                .get_or_create(&labels(server, event))
                .inc_by(n);
        }
    }

    /// The last occurrence of `event` on `server` was committed `ms` after the server's
    /// timestamp.
    pub(crate) fn lag(&self, (server, event): (&str, &str), ms: i64) {
        self.lag.get_or_create(&labels(server, event)).set(ms);
    }

    /// One subscription's share of `agent_subscriptions_active`: none until it is set live.
    pub(crate) fn live(&self) -> Live {
        Live {
            active: self.active.clone(),
            mode: None,
        }
    }

    /// The exposition in the Prometheus text format (0.0.4), as the tests read it.
    #[cfg(test)]
    pub(crate) fn render(&self) -> String {
        self.expose(false).1
    }

    /// The exposition in the Prometheus text format (0.0.4), or in OpenMetrics: its content
    /// type and its text.
    pub(crate) fn expose(&self, openmetrics: bool) -> (&'static str, String) {
        let mut text = String::new();
        // Writing to a `String` does not fail.
        match openmetrics {
            true => {
                let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
                (OPENMETRICS, text)
            }
            false => {
                let _ =
                    prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry);
                (
                    prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                    text,
                )
            }
        }
    }
}

fn labels(server: &str, event: &str) -> EventLabels {
    EventLabels {
        server: server.to_owned(),
        event: event.to_owned(),
    }
}

/// One subscription's share of `agent_subscriptions_active`: the mode it is live in, if it
/// is; given back when it is dropped (the subscription ended, or its task stopped).
#[derive(Debug)]
pub(crate) struct Live {
    active: Family<ActiveLabels, Gauge>,
    mode: Option<DeliveryMode>,
}

impl Live {
    /// The subscription is live in `mode`, or not live (`None`).
    pub(crate) fn set(&mut self, mode: Option<DeliveryMode>) {
        if mode == self.mode {
            return;
        }
        let labels = |mode| ActiveLabels {
            kind: Kind::Event,
            mode: Mode(mode),
        };
        if let Some(was) = self.mode {
            self.active.get_or_create(&labels(was)).dec();
        }
        if let Some(now) = mode {
            self.active.get_or_create(&labels(now)).inc();
        }
        self.mode = mode;
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.set(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_render_with_escaped_labels_under_the_reference_names() {
        let m = Metrics::default();
        m.connect_failed("a");
        m.connect_failed("a");
        m.connect_failed("we\"ird\\\n");
        m.occurrences(("s", "t"), DeliveryMode::Poll, Outcome::Appended, 3);
        m.occurrences(("s", "t"), DeliveryMode::Poll, Outcome::Rejected, 0);
        m.request("s", "events/poll", mcp_events::binding::Outcome::Refused);
        m.gaps(("s", "t"), Gap::Truncated, 1);
        m.dedup_evicted(("s", "t"), 4);
        m.lag(("s", "t"), 1500);
        let mut live = m.live();
        live.set(Some(DeliveryMode::Webhook));
        let (content_type, text) = m.expose(false);
        assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
        assert_eq!(m.render(), text);
        for line in [
            "# TYPE agent_mcp_connect_failures_total counter\n",
            "agent_mcp_connect_failures_total{server=\"a\"} 2\n",
            "agent_mcp_connect_failures_total{server=\"we\\\"ird\\\\\\n\"} 1\n",
            "# TYPE agent_mcp_events_total counter\n",
            "agent_mcp_events_total{server=\"s\",event=\"t\",mode=\"poll\",outcome=\"appended\"} 3\n",
            "agent_mcp_events_requests_total{server=\"s\",method=\"events/poll\",outcome=\"refused\"} 1\n",
            "agent_mcp_event_gaps_total{server=\"s\",event=\"t\",cause=\"truncated\"} 1\n",
            "agent_mcp_events_dedup_evicted_total{server=\"s\",event=\"t\"} 4\n",
            "# TYPE agent_mcp_event_lag_ms gauge\n",
            "agent_mcp_event_lag_ms{server=\"s\",event=\"t\"} 1500\n",
            "# TYPE agent_subscriptions_active gauge\n",
            "agent_subscriptions_active{kind=\"event\",mode=\"webhook\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        // A series appears once, under its own metric; no count of 0 is made a series.
        assert_eq!(text.matches("} 1500").count(), 1);
        assert!(!text.contains("rejected"), "{text}");
        assert!(!text.contains("_total_total"), "{text}");
        assert!(!text.contains("# EOF"), "{text}");
    }

    #[test]
    fn openmetrics_names_each_counter_family_and_its_total_and_ends_in_eof() {
        let m = Metrics::default();
        m.connect_failed("a");
        let (content_type, text) = m.expose(true);
        assert_eq!(
            content_type,
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        assert!(
            text.contains("# TYPE agent_mcp_connect_failures counter\n"),
            "{text}"
        );
        assert!(
            text.contains("agent_mcp_connect_failures_total{server=\"a\"} 1\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    /// A subscription counts in its mode while live, moves with it, and gives its share back
    /// when it stops being live or is dropped.
    #[test]
    fn a_live_share_follows_its_mode_and_is_given_back_when_dropped() {
        let m = Metrics::default();
        let gauge = |mode| {
            m.active
                .get_or_create(&ActiveLabels {
                    kind: Kind::Event,
                    mode: Mode(mode),
                })
                .get()
        };
        let (mut a, mut b) = (m.live(), m.live());
        a.set(Some(DeliveryMode::Poll));
        b.set(Some(DeliveryMode::Poll));
        b.set(Some(DeliveryMode::Poll));
        assert_eq!(gauge(DeliveryMode::Poll), 2);
        b.set(Some(DeliveryMode::Webhook));
        assert_eq!(
            (gauge(DeliveryMode::Poll), gauge(DeliveryMode::Webhook)),
            (1, 1)
        );
        a.set(None);
        assert_eq!(gauge(DeliveryMode::Poll), 0);
        drop(b);
        assert_eq!(gauge(DeliveryMode::Webhook), 0);
        drop(a);
        assert_eq!(gauge(DeliveryMode::Poll), 0);
    }
}
