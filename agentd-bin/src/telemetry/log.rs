//! Log lines: one NDJSON object per `tracing` event on stderr: the envelope `ts`, `level`,
//! `event`, `instance` first, then the event's fields in the order they were given.
//!
//! agentd's own events (target [`TARGET`]) come from the [catalogue](super::catalogue): their
//! `event` and `instance` are fields of theirs, and a field recorded as a [`Json`] value is
//! written as the JSON it is. The libraries' diagnostics (`mcp_negotiate`, `mcp_transport`, any
//! other target) are written the same way: their `event` is their target, `instance` the
//! daemon's current one ([`set_instance`]), then `message`, then their fields (a value only
//! `Debug` can show is written as a string), then `spans`: the spans the line was written in,
//! outermost first, each as its name (`span`) and its fields (so the lines of two dials at
//! once tell which dial they belong to).

use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::sync::RwLock;
use std::time::SystemTime;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;

/// The target of agentd's own events.
pub(crate) const TARGET: &str = "agentd";

/// The instance of the lines that do not name one (the libraries' diagnostics).
static INSTANCE: RwLock<String> = RwLock::new(String::new());

/// Sets the instance written on the lines that do not name one: at start, and when a reload
/// takes a new name.
pub(crate) fn set_instance(instance: &str) {
    let mut current = INSTANCE.write().unwrap_or_else(|e| e.into_inner());
    instance.clone_into(&mut current);
}

/// `--log-level`: the least severe line written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum LogLevel {
    /// Failures only.
    Error,
    /// Failures and what may need a look.
    Warn,
    /// Every event of the catalogue.
    #[default]
    Info,
    /// The catalogue, and the libraries' diagnostics.
    Debug,
    /// The catalogue, and everything the libraries say.
    Trace,
}

impl LogLevel {
    /// The filter's directives: agentd's own events down to the level, and at `debug` or
    /// `trace` every target's; then `RUST_LOG`'s directives, when it names any.
    fn directives(self, rust_log: Option<&str>) -> String {
        let base = match self {
            Self::Error => format!("{TARGET}=error"),
            Self::Warn => format!("{TARGET}=warn"),
            Self::Info => format!("{TARGET}=info"),
            Self::Debug => "debug".to_owned(),
            Self::Trace => "trace".to_owned(),
        };
        match rust_log.map(str::trim).filter(|s| !s.is_empty()) {
            Some(more) => format!("{base},{more}"),
            None => base,
        }
    }
}

/// Writes the log lines of this process to stderr from now on, filtered at `level` and by
/// `RUST_LOG`. `instance` is the one of the lines that do not name one.
pub(crate) fn install(level: LogLevel, instance: &str) {
    set_instance(instance);
    let rust_log = std::env::var("RUST_LOG").ok();
    let filter = EnvFilter::builder().parse_lossy(level.directives(rust_log.as_deref()));
    let subscriber = tracing_subscriber::registry()
        .with(filter)
        .with(Ndjson::new(stderr));
    // Installed once per process; a second call keeps the first.
    let _ = tracing::subscriber::set_global_default(subscriber);
}

fn stderr(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// A value recorded as the JSON it is (an array, an object, a `null`): its `Debug` is its JSON
/// text, which the NDJSON layer writes as it is on agentd's own events.
pub(crate) struct Json(pub(crate) serde_json::Value);

impl fmt::Debug for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The layer writing each event as one NDJSON line, through `write`.
pub(crate) struct Ndjson<W> {
    write: W,
}

impl<W> fmt::Debug for Ndjson<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ndjson").finish_non_exhaustive()
    }
}

impl<W: Fn(&str) + Send + Sync + 'static> Ndjson<W> {
    /// A layer handing each line, without its newline, to `write`.
    pub(crate) fn new(write: W) -> Self {
        Self { write }
    }
}

/// A span's fields as written on the lines inside it, each its `,"name":value` member, in
/// the order first given: a field recorded again replaces its value.
#[derive(Default)]
struct SpanFields(Vec<(&'static str, String)>);

impl SpanFields {
    fn set(&mut self, field: &Field, record: impl FnOnce(&mut Fields)) {
        let mut one = Fields::new(false);
        record(&mut one);
        let member = one.into_members();
        match self.0.iter_mut().find(|(name, _)| *name == field.name()) {
            Some((_, written)) => *written = member,
            None => self.0.push((field.name(), member)),
        }
    }
}

impl Visit for SpanFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field, |f| f.record_str(field, value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field, |f| f.record_i64(field, value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field, |f| f.record_u64(field, value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field, |f| f.record_bool(field, value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field, |f| f.record_f64(field, value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.set(field, |f| f.record_error(field, value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.set(field, |f| f.record_debug(field, value));
    }
}

impl<S, W> Layer<S> for Ndjson<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: Fn(&str) + Send + Sync + 'static,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = SpanFields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        match extensions.get_mut::<SpanFields>() {
            Some(fields) => values.record(fields),
            None => {
                let mut fields = SpanFields::default();
                values.record(&mut fields);
                extensions.insert(fields);
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let meta = event.metadata();
        let ours = meta.target() == TARGET;
        let mut fields = Fields::new(ours);
        event.record(&mut fields);
        let level = match *meta.level() {
            tracing::Level::ERROR => "error",
            tracing::Level::WARN => "warn",
            tracing::Level::INFO => "info",
            tracing::Level::DEBUG => "debug",
            tracing::Level::TRACE => "trace",
        };
        let name = match (ours, &fields.event) {
            (true, Some(name)) => name.as_str(),
            _ => meta.target(),
        };
        let instance = match fields.instance {
            Some(instance) => instance,
            None => INSTANCE.read().unwrap_or_else(|e| e.into_inner()).clone(),
        };
        let ts = humantime::format_rfc3339_millis(SystemTime::now());
        let mut line = format!(
            "{{\"ts\":\"{ts}\",\"level\":\"{level}\",\"event\":{},\"instance\":{}",
            quoted(name),
            quoted(&instance)
        );
        if let Some(message) = &fields.message {
            let _ = write!(line, ",\"message\":{}", quoted(message));
        }
        line.push_str(&fields.rest);
        if let Some(scope) = ctx.event_scope(event).filter(|_| !ours) {
            line.push_str(",\"spans\":[");
            for (i, span) in scope.from_root().enumerate() {
                let comma = if i == 0 { "" } else { "," };
                let _ = write!(line, "{comma}{{\"span\":{}", quoted(span.name()));
                if let Some(SpanFields(fields)) = span.extensions().get::<SpanFields>() {
                    for (_, member) in fields {
                        line.push_str(member);
                    }
                }
                line.push('}');
            }
            line.push(']');
        }
        line.push('}');
        (self.write)(&line);
    }
}

fn quoted(text: &str) -> serde_json::Value {
    serde_json::Value::from(text)
}

/// An event's fields: `event` and `instance` apart, the others as `,"name":value` in order.
struct Fields {
    /// One of agentd's own events: a `Debug` value is JSON text ([`Json`]).
    ours: bool,
    event: Option<String>,
    instance: Option<String>,
    message: Option<String>,
    rest: String,
}

impl Fields {
    fn new(ours: bool) -> Self {
        Self {
            ours,
            event: None,
            instance: None,
            message: None,
            rest: String::new(),
        }
    }

    /// A span's fields, `message` among them, as `,"name":value` members.
    fn into_members(self) -> String {
        match self.message {
            Some(message) => format!(",\"message\":{}{}", quoted(&message), self.rest),
            None => self.rest,
        }
    }

    fn push(&mut self, field: &Field, value: impl fmt::Display) {
        let _ = write!(self.rest, ",{}:{value}", quoted(field.name()));
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match (self.ours, field.name()) {
            (true, "event") => self.event = Some(value.to_owned()),
            (true, "instance") => self.instance = Some(value.to_owned()),
            (false, "message") => self.message = Some(value.to_owned()),
            _ => self.push(field, quoted(value)),
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, value);
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, serde_json::Value::from(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_str(field, &value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        match self.ours {
            true => self.push(field, text),
            false => self.record_str(field, &text),
        }
    }
}

/// Writes a line to stdout; a closed stdout (`agentd ... | head`) is no error.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// The lines written on this thread until the guard is dropped.
    pub(crate) fn capture() -> (tracing::subscriber::DefaultGuard, Arc<Mutex<Vec<String>>>) {
        static UNDECIDED: std::sync::Once = std::sync::Once::new();
        UNDECIDED.call_once(|| {
            let _ = tracing::subscriber::set_global_default(Undecided);
        });
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let layer = Ndjson::new(move |line: &str| sink.lock().unwrap().push(line.to_owned()));
        let subscriber = tracing_subscriber::registry().with(layer);
        (tracing::subscriber::set_default(subscriber), lines)
    }

    /// The global subscriber of the tests: it writes nothing, and leaves every line to the
    /// subscriber of its thread. A line first met on a thread with none, while another thread
    /// starts capturing, is not taken as never written (tracing would cache it so).
    struct Undecided;

    impl Subscriber for Undecided {
        fn register_callsite(
            &self,
            _: &'static tracing::Metadata<'static>,
        ) -> tracing::subscriber::Interest {
            tracing::subscriber::Interest::sometimes()
        }
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            false
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, _: &Event<'_>) {}
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// The lines written while `f` runs.
    pub(crate) fn captured(f: impl FnOnce()) -> Vec<String> {
        let (guard, lines) = capture();
        f();
        drop(guard);
        std::mem::take(&mut *lines.lock().unwrap())
    }

    #[test]
    fn a_library_line_names_the_spans_it_was_written_in() {
        set_instance("lib");
        let lines = captured(|| {
            let dial = tracing::debug_span!(
                "mcp.dial",
                host = "127.0.0.1:8080",
                step = tracing::field::Empty
            );
            let _dial = dial.enter();
            dial.record("step", 1);
            // Recorded again: the later value replaces the first.
            dial.record("step", 2);
            let inner = tracing::debug_span!("listen", uri = ?Some("u"));
            inner.in_scope(|| {
                tracing::debug!(target: "mcp_transport::listen", ok = true, "opened");
                // agentd's own events say all they mean themselves: no spans.
                tracing::info!(target: TARGET, event = "mcp.connect", server = "a");
            });
            tracing::debug!(target: "mcp_negotiate::dial", "sent");
        });
        assert_eq!(lines.len(), 3);
        let rest = |line: &str| line.split_once(",\"level\"").unwrap().1.to_owned();
        assert_eq!(
            rest(&lines[0]),
            ":\"debug\",\"event\":\"mcp_transport::listen\",\"instance\":\"lib\",\
             \"message\":\"opened\",\"ok\":true,\"spans\":[\
             {\"span\":\"mcp.dial\",\"host\":\"127.0.0.1:8080\",\"step\":2},\
             {\"span\":\"listen\",\"uri\":\"Some(\\\"u\\\")\"}]}"
        );
        assert!(!lines[1].contains("spans"), "{}", lines[1]);
        assert!(
            lines[2].ends_with(
                "\"message\":\"sent\",\"spans\":[\
                 {\"span\":\"mcp.dial\",\"host\":\"127.0.0.1:8080\",\"step\":2}]}"
            ),
            "{}",
            lines[2]
        );
        for line in &lines {
            serde_json::from_str::<serde_json::Value>(line).expect("a line is JSON");
        }
    }

    #[test]
    fn a_library_line_names_its_target_and_says_its_message_first() {
        set_instance("lib");
        let lines = captured(|| {
            tracing::debug!(target: "mcp_negotiate::dial", step = 2, ok = true, reply = ?Some(1), "negotiated");
        });
        assert_eq!(lines.len(), 1);
        let line = &lines[0];
        let rest = line.split_once(",\"level\"").unwrap().1;
        assert_eq!(
            rest,
            ":\"debug\",\"event\":\"mcp_negotiate::dial\",\"instance\":\"lib\",\
             \"message\":\"negotiated\",\"step\":2,\"ok\":true,\"reply\":\"Some(1)\"}"
        );
    }

    #[test]
    fn the_levels_and_filters() {
        assert_eq!(LogLevel::Info.directives(None), "agentd=info");
        assert_eq!(LogLevel::Debug.directives(Some(" ")), "debug");
        assert_eq!(
            LogLevel::Warn.directives(Some("mcp_transport=debug")),
            "agentd=warn,mcp_transport=debug"
        );
    }
}
