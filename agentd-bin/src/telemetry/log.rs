//! Log lines: one NDJSON object per `tracing` event on stderr: the envelope `ts`, `level`,
//! `event`, `instance` first, then the event's fields in the order they were given.
//!
//! agentd's own events (target [`TARGET`]) come from the [catalogue](super::catalogue): their
//! `event` and `instance` are fields of theirs, and a field recorded as a [`Json`] value is
//! written as the JSON it is. The libraries' diagnostics (`mcp_negotiate`, `mcp_transport`, any
//! other target) are written the same way: their `event` is their target, `instance` the
//! daemon's current one ([`set_instance`]), then `message`, then their fields (a value only
//! `Debug` can show is written as a string).

use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::sync::RwLock;
use std::time::SystemTime;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

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

impl<S: Subscriber, W: Fn(&str) + Send + Sync + 'static> Layer<S> for Ndjson<W> {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        let ours = meta.target() == TARGET;
        let mut fields = Fields {
            ours,
            event: None,
            instance: None,
            message: None,
            rest: String::new(),
        };
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
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, _: &Event<'_>) {}
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    /// The lines written while `f` runs.
    pub(crate) fn captured(f: impl FnOnce()) -> Vec<String> {
        let (guard, lines) = capture();
        f();
        drop(guard);
        std::mem::take(&mut *lines.lock().unwrap())
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
