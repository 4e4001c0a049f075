//! One binding: a server's event type appended into a stream. The pure machine: the driver
//! tells it what the connection and the listing came to and what each request answered, asks
//! it what to send and when, commits what it hands over, and logs what it reports.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use mcp_events::binding::{Action, Binding, Config, Listing};
//! use mcp_wire::events::{DeliveryMode, EventType, PollResult};
//!
//! let mut binding = Binding::new(Config::new("tickets", "ticket.created", "inbox"), None);
//! let now = Instant::now();
//! binding.on_connection(true, true);
//! let types = [EventType::new("ticket.created", &[DeliveryMode::Poll])];
//! binding.on_listing(Listing::Types(&types), now);
//! let Some(Action::Poll(params)) = binding.poll_action(now) else { panic!() };
//! assert_eq!(params.cursor, None); // from now
//! let batch = binding.on_poll(Ok(PollResult::new(vec![], Some("c1".into()))), now, 0, 7);
//! binding.on_committed(true, now);
//! assert_eq!(batch.cursor.as_deref(), Some("c1"));
//! ```
//!
//! Every bound and wait below is the binding's [`Limits`] (`Config::limits`); the numbers
//! given are those of [`Limits::default`].
//!
//! Poll: `events/poll` for at most 50 occurrences from the stored cursor; the next poll after
//! the server's `nextPollMs` (1 s to 15 min, 30 s when it names none, ±10%), or at once
//! while it says `hasMore` and the page held something new, ten times in a row at most. A
//! failed request is asked again on the retry schedule. Each page's occurrences are checked
//! against the bounds, deduplicated, checked against the type's payload schema and written
//! as Stream events; they and the page's cursor form one [`Batch`] the driver commits in one
//! transaction before anything else is sent ([`Binding::on_committed`]).
//!
//! Webhook: `events/subscribe` with the binding's callback URL and secret, the stored cursor
//! and a 1 h lease, refreshed at 80% of what the server grants; the answer's cursor is
//! committed like a page's. `deliveryStatus` is watched (`mcp.events.delivery_suspended`,
//! and the subscription asked for again from the stored cursor; `mcp.events.throttled`).
//! -32027 is `mcp.events.callback_failed`; five in a row move the binding to the next mode
//! the operator listed (`mcp.events.mode_changed`) until a re-dial or a listing after a
//! reload decides afresh. A refusal that may pass and is still outstanding after 5 minutes
//! pauses the binding, its cursor kept, until a listing or a re-dial. Each delivery, checked
//! by the receiver's signature check first, is taken by [`Binding::on_delivery`]: the
//! occurrence is checked, deduplicated and handed over as a [`Batch`] with its cursor;
//! `gap` and `terminated` envelopes are taken as the SEP says.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use jsonschema::Validator;
use mcp_wire::events::{
    DeliveryMode, EventOccurrence, EventType, PollParams, PollResult, SubscribeEventsParams,
    SubscribeEventsResult, WebhookBody, WebhookDelivery, code,
};
use mcp_wire::{ErrorObject, log_text};
use serde_json::{Map, Value};

use sha2::{Digest, Sha256};

pub use crate::error::Rejection;
use crate::occurrence::{Target, check, check_cursor, stream_event};
use crate::schedule::{Retry, later};
use crate::webhook::Secret;
use crate::{Dedup, Limits};

/// What a binding is: which event of which server goes into which stream, how.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Config {
    /// The binding's key, as the client names it (`data.subscription` of its Stream
    /// events).
    pub key: String,
    /// The server's name in the configuration.
    pub server: String,
    /// The event type.
    pub event: String,
    /// The stream its occurrences are appended to.
    pub into: String,
    /// The subscription's arguments.
    pub arguments: Map<String, Value>,
    /// The operator's order of delivery modes.
    pub delivery: Vec<DeliveryMode>,
    /// Where and how webhook deliveries come: without it, webhook is not a mode the client
    /// can use for this binding.
    pub callback: Option<Callback>,
    /// The bounds and schedules it keeps.
    pub limits: Limits,
    /// How many occurrences it may append per window; past that, intake pauses (`rate`)
    /// until the window ends.
    pub rate: Option<Rate>,
}

/// A binding's rate: at most `max` occurrences appended per `per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Occurrences per window.
    pub max: u32,
    /// The window.
    pub per: Duration,
}

/// A binding's webhook endpoint (the URL its deliveries are sent to), and its secret.
#[derive(Debug, Clone)]
pub struct Callback {
    /// The callback URL given to the server.
    pub url: String,
    /// The secret deliveries are signed with (kept in the store across restarts).
    pub secret: Secret,
}

impl PartialEq for Callback {
    fn eq(&self, other: &Self) -> bool {
        self.url == other.url && self.secret.as_str() == other.secret.as_str()
    }
}

impl Config {
    /// A poll binding of `event` on `server` into `into` without arguments, keyed by
    /// [`key_of`], within [`Limits::default`].
    pub fn new(server: &str, event: &str, into: &str) -> Self {
        Self {
            key: key_of(server, event, into, &Map::new()),
            server: server.to_owned(),
            event: event.to_owned(),
            into: into.to_owned(),
            arguments: Map::new(),
            delivery: vec![DeliveryMode::Poll],
            callback: None,
            limits: Limits::default(),
            rate: None,
        }
    }
}

/// A key for a binding: `b` and 16 hex digits of the SHA-256 of what it is (its server,
/// type, stream and arguments), so the same binding keeps its key, its stored cursor and its
/// webhook route across restarts and reloads.
pub fn key_of(server: &str, event: &str, into: &str, arguments: &Map<String, Value>) -> String {
    let what = serde_json::json!([server, event, into, arguments]).to_string();
    let hash = Sha256::digest(what.as_bytes());
    format!("b{}", crate::occurrence::hex(&hash[..8]))
}

/// Why a binding cannot work (`mcp.events.refused`, `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refusal {
    /// The connection reached 2025-11-25.
    Revision,
    /// The server does not declare the events extension.
    NoCapability,
    /// `events/list` answered -32601.
    MethodNotFound,
    /// The listing does not name the type.
    UnknownEvent,
    /// No listed mode is one the type offers and the client supports.
    NoCommonMode,
    /// The arguments fail the type's input schema, or the server answered -32602.
    InvalidArguments,
    /// The server answered -32024.
    Forbidden,
    /// The server answered -32026 for the delivery mode.
    NotSupported,
    /// The listing ran past 20 pages or 1000 types.
    ListTooLarge,
}

impl Refusal {
    /// Its `reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Revision => "revision",
            Self::NoCapability => "no_capability",
            Self::MethodNotFound => "method_not_found",
            Self::UnknownEvent => "unknown_event",
            Self::NoCommonMode => "no_common_mode",
            Self::InvalidArguments => "invalid_arguments",
            Self::Forbidden => "forbidden",
            Self::NotSupported => "not_supported",
            Self::ListTooLarge => "list_too_large",
        }
    }
}

/// What listing the server's event types came to.
#[derive(Debug, Clone, Copy)]
pub enum Listing<'a> {
    /// Every type, every page.
    Types(&'a [EventType]),
    /// `events/list` answered -32601.
    MethodNotFound,
    /// Past 20 pages or 1000 types.
    TooLarge,
}

/// How an `events/*` request failed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Failure {
    /// The server could not be reached, or the connection broke.
    Transport(String),
    /// No answer inside the request's bound.
    Timeout,
    /// A status without a JSON-RPC error (a 5xx).
    Status(u16),
    /// A JSON-RPC error.
    Rpc(ErrorObject),
}

impl Failure {
    fn code(&self) -> Option<i64> {
        match self {
            Self::Rpc(e) => Some(e.code),
            _ => None,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Transport(e) => f.write_str(e),
            Self::Timeout => f.write_str("no answer within the request's bound"),
            Self::Status(status) => write!(f, "HTTP {status}"),
            Self::Rpc(e) => write!(f, "{} {}", e.code, e.message),
        }
    }
}

impl std::error::Error for Failure {}

/// What to send now.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Action {
    /// `events/poll`.
    Poll(PollParams),
    /// `events/subscribe`: arm the webhook subscription, or refresh its lease.
    Subscribe(SubscribeEventsParams),
    /// List the server's event types again (the type was removed or changed in place); the
    /// binding waits for [`Binding::on_listing`].
    Relist,
}

/// Why intake is held (`mcp.events.paused`, `cause`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Pause {
    /// The daemon is under pressure.
    Pressure,
    /// The binding's rate is spent.
    Rate,
    /// The store did not take the last batch.
    StoreDegraded,
    /// A webhook refusal that may pass was still outstanding after
    /// [`Limits::refusal_pause_after`]. Logged as the last [`Log::ArmFailed`] (its
    /// `retry_ms` the listing's [`Limits::relist_every`]), not as [`Log::Paused`].
    Refusal,
}

impl Pause {
    /// Its `cause`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pressure => "pressure",
            Self::Rate => "rate",
            Self::StoreDegraded => "store_degraded",
            Self::Refusal => "refusal",
        }
    }
}

/// A loss the wire shows (`mcp.events.gap`, `cause`; [`Stats::gaps`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Gap {
    /// The server dropped occurrences: a page or a subscribe answer said `truncated`, or a
    /// webhook `gap` envelope came.
    Truncated,
    /// The type keeps no cursor: what happens while the client is away is not replayed
    /// (logged once).
    NoReplay,
    /// The type's payload schema changed (an error whose `data.reason` is
    /// `schema_changed`): the server is listed again.
    SchemaChanged,
}

impl Gap {
    /// Its `cause`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Truncated => "truncated",
            Self::NoReplay => "no_replay",
            Self::SchemaChanged => "schema_changed",
        }
    }
}

/// Why a binding moved to the next delivery mode the operator listed
/// (`mcp.events.mode_changed`, `cause`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ModeChange {
    /// The server could not use the webhook URL, five times in a row
    /// ([`Limits::callback_failures_max`]).
    CallbackFailed,
}

impl ModeChange {
    /// Its `cause`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CallbackFailed => "callback_failed",
        }
    }
}

/// What an `events/*` request came to (its `outcome` in [`Stats::requests`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// The server answered with a result.
    Ok,
    /// The server answered with a JSON-RPC error (whatever the binding makes of it).
    Refused,
    /// No answer: the transport failed, the bound passed, or an HTTP error without a
    /// JSON-RPC error.
    Failed,
}

impl Outcome {
    /// What `answer` came to.
    pub fn of<T>(answer: &Result<T, Failure>) -> Self {
        match answer {
            Ok(_) => Self::Ok,
            Err(failure) => Self::of_failure(failure),
        }
    }

    /// What a request that failed with `failure` came to: refused when the server answered
    /// with a JSON-RPC error, failed when it did not answer.
    pub fn of_failure(failure: &Failure) -> Self {
        match failure {
            Failure::Rpc(_) => Self::Refused,
            _ => Self::Failed,
        }
    }

    /// Its `outcome`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Refused => "refused",
            Self::Failed => "failed",
        }
    }
}

/// A line for the log (the reference's MCP Events table), with the binding's `server` and
/// `event_type` implied. Text from the server is made safe already.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Log {
    /// `mcp.events.armed`.
    Armed {
        /// The mode.
        mode: DeliveryMode,
        /// Whether it went on from a stored cursor.
        cursor_present: bool,
    },
    /// `mcp.events.refused` (error): logged once per cause.
    Refused {
        /// Why.
        reason: Refusal,
        /// What the server or the schema said, if anything.
        detail: String,
    },
    /// `mcp.events.poll.fail` (warn; error for -32020).
    PollFailed {
        /// The JSON-RPC code, if the server answered one.
        code: Option<i64>,
        /// What failed.
        err: String,
        /// When the poll is sent again.
        retry_ms: u64,
    },
    /// `mcp.events.paused`.
    Paused {
        /// Why.
        cause: Pause,
        /// More.
        detail: String,
    },
    /// `mcp.events.resumed`.
    Resumed {
        /// Why it was paused.
        cause: Pause,
    },
    /// `mcp.events.gap`.
    Gap {
        /// The cause.
        cause: Gap,
    },
    /// `mcp.events.rejected`: the cursor moves past it.
    Rejected {
        /// The occurrence's `eventId` (safe, cut).
        event_id: String,
        /// Why.
        cause: Rejection,
    },
    /// `mcp.events.schema_mismatch`: appended with `schema_ok: false`.
    SchemaMismatch {
        /// The occurrence's `eventId` (safe, cut).
        event_id: String,
    },
    /// `mcp.events.arm.fail` (warn; error when the server refused): `events/subscribe`
    /// failed and is asked again.
    ArmFailed {
        /// The JSON-RPC code, if the server answered one.
        code: Option<i64>,
        /// What failed.
        err: String,
        /// When it is asked again.
        retry_ms: u64,
    },
    /// `mcp.events.callback_failed` (error): the server could not use the webhook URL.
    CallbackFailed {
        /// `data.reason`.
        reason: String,
        /// The callback URL.
        url: String,
    },
    /// `mcp.events.mode_changed` (warn).
    ModeChanged {
        /// The mode left.
        from: DeliveryMode,
        /// The mode taken.
        to: DeliveryMode,
        /// Why.
        cause: ModeChange,
    },
    /// `mcp.events.delivery_suspended` (warn): re-armed from the stored cursor.
    DeliverySuspended {
        /// The server's `lastError`.
        last_error: String,
        /// The server's `active`.
        active: bool,
    },
    /// `mcp.events.throttled` (info).
    Throttled {
        /// The server's `retryAfterMs`.
        retry_after_ms: Option<u64>,
    },
    /// `mcp.events.terminated` (error): the server ended the webhook subscription.
    Terminated {
        /// The error's code.
        code: i64,
    },
}

/// What happened to occurrences and requests, for the metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Appended (committed).
    pub appended: u64,
    /// Passed over as duplicates.
    pub duplicate: u64,
    /// Not appended: oversize or malformed.
    pub rejected: u64,
    /// Appended with `schema_ok: false`.
    pub schema_mismatch: u64,
    /// Requests by method (an `events/*` method name) and outcome.
    pub requests: BTreeMap<(&'static str, Outcome), u64>,
    /// Gaps by cause.
    pub gaps: BTreeMap<Gap, u64>,
    /// The last append's lag: its time minus the server's timestamp, in milliseconds.
    pub lag_ms: Option<i64>,
    /// Deliveries refused while the binding's rate was spent (`refused_pressure`).
    pub refused_pressure: u64,
}

/// One occurrence written as its Stream event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The Stream event's `id` (unique in its stream).
    pub id: String,
    /// The server's `eventId`.
    pub event_id: String,
    /// The Stream event, JSON.
    pub bytes: Vec<u8>,
}

/// What to commit in one transaction: the records appended to the binding's stream, and the
/// cursor stored with them (`None`: poll from now next time).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// The records, in order.
    pub records: Vec<Record>,
    /// The cursor after them.
    pub cursor: Option<String>,
}

/// What to do with a webhook delivery (its signature already checked), and what to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delivery {
    /// Commit this batch in one transaction, then call [`Binding::on_delivered`]; answer 200
    /// once committed, 503 when the store did not take it.
    Commit(Batch),
    /// Seen already, or an envelope taken: answer 200.
    Taken,
    /// Not appended, for good (malformed, or past a bound): answer 410.
    Gone,
    /// Not now (not armed yet, or the same occurrence is being committed): answer 503 with
    /// `Retry-After`.
    NotNow,
    /// The binding's rate is spent: answer 429 with `Retry-After` of this.
    Busy {
        /// When the window ends.
        retry_after: Duration,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for the connection's revision and capability, then the listing.
    Unarmed,
    /// The listing must be made again first.
    Relist,
    Refused(Refusal),
    /// The next request is due at this time.
    Due(Instant),
    /// A request is out.
    InFlight,
    /// A batch is being committed; the next request is due at this time after it.
    Committing(Instant),
    /// Intake is held; resumed at this time (store) or when told (pressure, rate).
    Paused(Pause, Option<Instant>),
}

/// One binding. See the [module docs](self).
#[derive(Debug)]
pub struct Binding {
    config: Config,
    state: State,
    mode: Option<DeliveryMode>,
    /// The stored cursor.
    cursor: Option<String>,
    /// The ids of the batch being committed.
    committing: Vec<String>,
    committing_cursor: Option<String>,
    retry: Retry,
    burst: u32,
    dedup: Dedup,
    payload: Option<Validator>,
    armed_logged: bool,
    no_replay_logged: bool,
    refusal_logged: Option<Refusal>,
    logs: VecDeque<Log>,
    stats: Stats,
    /// The webhook subscription's id, once armed.
    subscription: Option<String>,
    /// Deliveries handed over and not yet committed.
    delivering: HashSet<String>,
    /// `callback_failed` in a row.
    callback_failures: u32,
    /// Since when a webhook refusal that may pass is outstanding.
    refused_since: Option<Instant>,
    /// Modes left after failing, until a re-dial or a listing decides afresh.
    left: Vec<DeliveryMode>,
    throttled: bool,
    /// The modes the type offers, from the last listing.
    offered: Vec<DeliveryMode>,
    /// The rate's window: when it started, and what was appended in it.
    window: Option<(Instant, u32)>,
    /// A webhook binding is holding deliveries back for its rate.
    rate_paused: bool,
    /// The receiver's queue for this binding is full: deliveries are refused (pressure).
    pressure_paused: bool,
    /// The store did not take the last commit (of a poll's page or a webhook delivery):
    /// logged paused (`store_degraded`) once, and resumed once a commit is taken again.
    store_failing: bool,
    /// The refusal came from the server's answer: a listing does not lift it, a re-dial or
    /// a reload does.
    refused_by_server: bool,
    /// The last subscribe answer said deliveries are suspended: the retry schedule is not
    /// reset, and the next subscribe asks for `active: true`.
    suspended: bool,
    /// The next subscribe is on the retry schedule (a suspension, a lease too short): the
    /// schedule is not reset by the commit of this answer.
    backing_off: bool,
}

impl Binding {
    /// A binding, going on from `cursor` (the stored one, if any).
    pub fn new(config: Config, cursor: Option<String>) -> Self {
        let limits = config.limits;
        Self {
            config,
            state: State::Unarmed,
            mode: None,
            cursor,
            committing: Vec::new(),
            committing_cursor: None,
            retry: Retry::new(&limits),
            burst: 0,
            dedup: Dedup::new(&limits),
            payload: None,
            armed_logged: false,
            no_replay_logged: false,
            refusal_logged: None,
            logs: VecDeque::new(),
            stats: Stats::default(),
            subscription: None,
            delivering: HashSet::new(),
            callback_failures: 0,
            refused_since: None,
            left: Vec::new(),
            throttled: false,
            offered: Vec::new(),
            window: None,
            rate_paused: false,
            pressure_paused: false,
            store_failing: false,
            refused_by_server: false,
            suspended: false,
            backing_off: false,
        }
    }

    /// The webhook subscription's id, once armed (deliveries name it in
    /// `X-MCP-Subscription-Id`).
    pub fn subscription(&self) -> Option<&str> {
        self.subscription.as_deref()
    }

    /// The binding's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The stored cursor.
    pub fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }

    /// The mode chosen, once armed.
    pub fn mode(&self) -> Option<DeliveryMode> {
        self.mode
    }

    /// Why it is refused, if it is.
    pub fn refusal(&self) -> Option<Refusal> {
        match self.state {
            State::Refused(r) => Some(r),
            _ => None,
        }
    }

    /// Why the binding's own intake is held, if it is paused (until a time, or until told or
    /// listed again). Pressure on the receiver's queue ([`Binding::on_pressure`]) is not a
    /// state of the binding and is not reported here.
    pub fn paused(&self) -> Option<Pause> {
        match self.state {
            State::Paused(cause, _) => Some(cause),
            _ => None,
        }
    }

    /// What happened so far, for the metrics.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Ids let go from the dedup window before their time.
    pub fn dedup_evicted(&self) -> u64 {
        self.dedup.evicted()
    }

    /// The connection was (re)dialed: `modern` when it reached 2026-07-28, `capability` when
    /// the server declares the events extension. Decides afresh: a refusal of the last
    /// connection is lifted, and the binding waits for the listing.
    pub fn on_connection(&mut self, modern: bool, capability: bool) {
        // A pause the log told ends here: every `paused` has its `resumed`.
        let paused = match self.state {
            State::Paused(cause, _) if cause != Pause::Refusal => Some(cause),
            _ => None,
        };
        if let Some(cause) = paused {
            self.logs.push_back(Log::Resumed { cause });
        }
        if std::mem::take(&mut self.store_failing) && paused != Some(Pause::StoreDegraded) {
            self.logs.push_back(Log::Resumed {
                cause: Pause::StoreDegraded,
            });
        }
        self.mode = None;
        self.left.clear();
        self.callback_failures = 0;
        self.refused_since = None;
        self.armed_logged = false;
        self.refused_by_server = false;
        match (modern, capability) {
            (false, _) => self.refuse(Refusal::Revision, String::new()),
            (true, false) => self.refuse(Refusal::NoCapability, String::new()),
            (true, true) => self.state = State::Unarmed,
        }
    }

    /// The server's event types were listed (again). A refusal the listing can lift is
    /// lifted; a binding already polling goes on.
    pub fn on_listing(&mut self, listing: Listing<'_>, now: Instant) {
        let held = matches!(
            self.state,
            State::Refused(Refusal::Revision | Refusal::NoCapability)
        ) || (self.refused_by_server && matches!(self.state, State::Refused(_)));
        if held {
            return;
        }
        let ty = match listing {
            Listing::MethodNotFound => return self.refuse(Refusal::MethodNotFound, String::new()),
            Listing::TooLarge => return self.refuse(Refusal::ListTooLarge, String::new()),
            Listing::Types(types) => match types.iter().find(|t| t.name == self.config.event) {
                Some(ty) => ty,
                None => return self.refuse(Refusal::UnknownEvent, String::new()),
            },
        };
        self.offered = ty
            .delivery
            .iter()
            .filter_map(|m| DeliveryMode::parse(m))
            .collect();
        let Some(mode) = self.choose_mode() else {
            return self.refuse(Refusal::NoCommonMode, String::new());
        };
        if let Some(schema) = &ty.input_schema
            && let Err(detail) = check_arguments(schema.get(), &self.config.arguments)
        {
            return self.refuse(Refusal::InvalidArguments, detail);
        }
        // A payload schema that does not compile checks nothing.
        self.payload = ty
            .payload_schema
            .as_ref()
            .and_then(|s| serde_json::from_str::<Value>(s.get()).ok())
            .and_then(|s| jsonschema::validator_for(&s).ok());
        self.refusal_logged = None;
        // A pause for a refusal waits for a listing like this one.
        let armed = matches!(
            self.state,
            State::Due(_)
                | State::InFlight
                | State::Committing(_)
                | State::Paused(Pause::Pressure | Pause::Rate | Pause::StoreDegraded, _)
        );
        self.refused_since = None;
        if !armed || self.mode != Some(mode) {
            self.mode = Some(mode);
            self.state = State::Due(now);
        }
    }

    /// What to send now, if anything.
    #[must_use]
    pub fn poll_action(&mut self, now: Instant) -> Option<Action> {
        match self.state {
            State::Relist => {
                self.state = State::Unarmed;
                Some(Action::Relist)
            }
            State::Paused(cause, Some(at)) if now >= at => {
                // A store that failed is tried again; resumed once it takes a commit.
                if cause != Pause::StoreDegraded {
                    self.logs.push_back(Log::Resumed { cause });
                }
                self.state = State::Due(now);
                self.poll_action(now)
            }
            State::Due(at) if now >= at => {
                self.state = State::InFlight;
                let (name, arguments) = (self.config.event.clone(), self.config.arguments.clone());
                match (self.mode, &self.config.callback) {
                    (Some(DeliveryMode::Webhook), Some(callback)) => {
                        let delivery = WebhookDelivery::new(
                            callback.url.clone(),
                            Some(callback.secret.as_str().to_owned()),
                        );
                        let mut params = SubscribeEventsParams::new(
                            name,
                            arguments,
                            delivery,
                            self.cursor.clone(),
                        );
                        params.ttl_ms = Some(millis(self.config.limits.lease));
                        // Deliveries were suspended: ask for them again.
                        params.active = self.suspended.then_some(true);
                        Some(Action::Subscribe(params))
                    }
                    _ => {
                        let mut params = PollParams::new(name, arguments, self.cursor.clone());
                        params.max_events = Some(self.config.limits.poll_max_events);
                        Some(Action::Poll(params))
                    }
                }
            }
            _ => None,
        }
    }

    /// When [`Binding::poll_action`] has something to say next, if it will.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Due(at) | State::Paused(_, Some(at)) => Some(at),
            _ => None,
        }
    }

    /// The next line to log.
    pub fn poll_log(&mut self) -> Option<Log> {
        self.logs.pop_front()
    }

    /// A poll answered. On success, the batch to commit (then [`Binding::on_committed`]);
    /// on failure an empty one, and the poll is asked again on its schedule. `wall_ms` is the
    /// Unix time in milliseconds (for the lag); `random` moves the next wait by up to ±10%.
    #[must_use]
    pub fn on_poll(
        &mut self,
        answer: Result<PollResult, Failure>,
        now: Instant,
        wall_ms: i64,
        random: u32,
    ) -> Batch {
        let Some(page) = self.answered(answer, now, random) else {
            return Batch::default();
        };
        self.count_request(mcp_wire::method::EVENTS_POLL, Outcome::Ok);
        self.armed(DeliveryMode::Poll);
        let mut records = Vec::new();
        let mut in_page = HashSet::new();
        for o in &page.events {
            if !in_page.insert(o.event_id.as_str()) {
                self.stats.duplicate += 1;
                continue;
            }
            if let Ok(Some(record)) = self.intake(o, now, wall_ms) {
                records.push(record);
            }
        }
        let cursor = self.next_cursor(Some(page.cursor.clone()));
        if page.truncated {
            self.gap(Gap::Truncated);
        }
        let limits = self.config.limits;
        let next = match page.has_more && !records.is_empty() && self.burst < limits.poll_burst_max
        {
            true => {
                self.burst += 1;
                now
            }
            false => {
                self.burst = 0;
                later(now, limits.poll_after(page.next_poll_ms, random))
            }
        };
        self.committing = records.iter().map(|r| r.event_id.clone()).collect();
        self.committing_cursor = cursor.clone();
        self.state = State::Committing(next);
        Batch { records, cursor }
    }

    /// `events/subscribe` answered. On success, the batch holding the cursor to store
    /// (then [`Binding::on_committed`]); the lease is refreshed at 80% of what the server
    /// granted (`refreshBefore`, against `wall_ms`, the Unix time in milliseconds), or of
    /// the 1 h asked for when it granted no expiry.
    #[must_use]
    pub fn on_subscribed(
        &mut self,
        answer: Result<SubscribeEventsResult, Failure>,
        now: Instant,
        wall_ms: i64,
        random: u32,
    ) -> Batch {
        let Some(result) = self.answered(answer, now, random) else {
            return Batch::default();
        };
        self.count_request(mcp_wire::method::EVENTS_SUBSCRIBE, Outcome::Ok);
        let limits = self.config.limits;
        self.callback_failures = 0;
        self.refused_since = None;
        self.subscription = Some(result.id);
        self.armed(DeliveryMode::Webhook);
        if result.truncated {
            self.gap(Gap::Truncated);
        }
        let granted = result
            .refresh_before
            .as_deref()
            .and_then(crate::time::unix_millis)
            .map_or(limits.lease, |until| {
                Duration::from_millis(u64::try_from(until.saturating_sub(wall_ms)).unwrap_or(0))
            });
        let refresh = granted.saturating_mul(limits.lease_refresh_percent) / 100;
        // A lease too short to hold is asked for again on the retry schedule, not at once.
        self.backing_off = refresh < limits.poll_min;
        let mut next = match self.backing_off {
            true => later(now, limits.jitter(self.retry.next_failure(false), random)),
            false => later(now, refresh),
        };
        self.suspended = false;
        if let Some(status) = result.delivery_status {
            if !status.active {
                self.suspended = true;
                self.logs.push_back(Log::DeliverySuspended {
                    last_error: status
                        .last_error
                        .as_deref()
                        .map(log_text)
                        .unwrap_or_default(),
                    active: false,
                });
                // Asked for again from the stored cursor, on the retry schedule.
                if !self.backing_off {
                    self.backing_off = true;
                    next = later(now, limits.jitter(self.retry.next_failure(false), random));
                }
            }
            if status.throttled && !self.throttled {
                self.logs.push_back(Log::Throttled {
                    retry_after_ms: status.retry_after_ms,
                });
            }
            self.throttled = status.throttled;
        }
        let cursor = self.next_cursor(Some(result.cursor));
        self.committing_cursor = cursor.clone();
        self.state = State::Committing(next);
        Batch {
            records: Vec::new(),
            cursor,
        }
    }

    /// A webhook delivery whose signature the receiver checked (its `X-MCP-Subscription-Id`
    /// is the binding's, or the subscription is being armed). `wall_ms` is the Unix time in
    /// milliseconds (for the lag); `random` moves the re-arm after a `terminated` envelope by
    /// up to ±10%, so that bindings a server ends together do not come back together.
    #[must_use]
    pub fn on_delivery(
        &mut self,
        body: WebhookBody,
        webhook_id: &str,
        now: Instant,
        wall_ms: i64,
        random: u32,
    ) -> Delivery {
        if let State::Refused(_) = self.state {
            return Delivery::Gone;
        }
        if self.mode != Some(DeliveryMode::Webhook) || self.subscription.is_none() {
            return Delivery::NotNow;
        }
        // An envelope is taken once: a replay of the same `webhook-id` changes nothing.
        // Envelope ids have a namespace of their own: an occurrence whose `eventId` is an
        // envelope's `webhook-id` is not one seen.
        if !matches!(body, WebhookBody::Occurrence(_)) {
            let id = format!("envelope:{webhook_id}");
            if self.dedup.contains(&id, now) {
                return Delivery::Taken;
            }
            self.dedup.insert(&id, now);
        }
        match body {
            WebhookBody::Occurrence(o) => {
                if self.delivering.contains(&o.event_id) {
                    return Delivery::NotNow;
                }
                if let Some(end) = self.rate_spent(now) {
                    self.stats.refused_pressure += 1;
                    if !std::mem::replace(&mut self.rate_paused, true) {
                        self.logs.push_back(self.rate_pause());
                    }
                    return Delivery::Busy {
                        retry_after: end.saturating_duration_since(now),
                    };
                }
                if std::mem::take(&mut self.rate_paused) {
                    self.logs.push_back(Log::Resumed { cause: Pause::Rate });
                }
                let record = match self.intake(&o, now, wall_ms) {
                    Err(()) => return Delivery::Gone,
                    Ok(None) => return Delivery::Taken,
                    Ok(Some(record)) => record,
                };
                let cursor = self.next_cursor(o.cursor);
                self.delivering.insert(o.event_id);
                Delivery::Commit(Batch {
                    records: vec![record],
                    cursor,
                })
            }
            WebhookBody::Gap { cursor } => {
                self.gap(Gap::Truncated);
                let cursor = self.next_cursor(Some(cursor));
                Delivery::Commit(Batch {
                    records: Vec::new(),
                    cursor,
                })
            }
            WebhookBody::Terminated { error } => {
                self.logs.push_back(Log::Terminated { code: error.code });
                self.subscription = None;
                match error.code {
                    code::EVENTS_FORBIDDEN => {
                        self.refuse(Refusal::Forbidden, log_text(&error.message));
                    }
                    code::EVENTS_NOT_FOUND | code::EVENTS_UNSUPPORTED => {
                        let changed = error
                            .data
                            .as_ref()
                            .and_then(|d| d.get("reason"))
                            .and_then(Value::as_str)
                            == Some("schema_changed");
                        if changed {
                            self.gap(Gap::SchemaChanged);
                        }
                        self.state = State::Relist;
                    }
                    _ => {
                        self.armed_logged = false;
                        let wait = self
                            .config
                            .limits
                            .jitter(self.retry.next_failure(false), random);
                        self.state = State::Due(later(now, wait));
                    }
                }
                Delivery::Taken
            }
            // The receiver answers the challenge itself.
            _ => Delivery::Taken,
        }
    }

    /// The driver committed a delivery's batch (`true`: answer 200), or the store did not
    /// take it (answer 503; the server delivers it again): as for a poll's page, intake is
    /// logged paused (`store_degraded`) at the first failure and resumed at the first
    /// commit taken after it.
    pub fn on_delivered(&mut self, batch: &Batch, committed: bool, now: Instant) {
        self.store_took(committed);
        for record in &batch.records {
            self.delivering.remove(&record.event_id);
            if committed {
                self.dedup.insert(&record.event_id, now);
                self.stats.appended += 1;
            }
        }
        if committed {
            self.cursor = batch.cursor.clone();
            self.spend(batch.records.len(), now);
        }
    }

    /// Counts `n` appended in the rate's window (a new window once the last one ended).
    fn spend(&mut self, n: usize, now: Instant) {
        let Some(rate) = self.config.rate else {
            return;
        };
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        self.window = match self.window {
            Some((start, count)) if now < start + rate.per => {
                Some((start, count.saturating_add(n)))
            }
            _ => Some((now, n)),
        };
    }

    /// When the rate's window ends, if the rate is spent at `now`.
    fn rate_spent(&self, now: Instant) -> Option<Instant> {
        let rate = self.config.rate?;
        let (start, count) = self.window?;
        let end = start + rate.per;
        (count >= rate.max && now < end).then_some(end)
    }

    fn rate_pause(&self) -> Log {
        let (max, per) = self
            .config
            .rate
            .map_or((0, Duration::ZERO), |r| (r.max, r.per));
        Log::Paused {
            cause: Pause::Rate,
            detail: format!("{max} occurrences in {} s", per.as_secs()),
        }
    }

    /// The driver committed the last batch (`true`), or the store did not take it: then
    /// intake pauses (`store_degraded`) with the stored cursor kept, and tries again on the
    /// retry schedule, polling again from where the store stands. The pause is logged at
    /// the first failure, and its end at the first commit taken after it.
    pub fn on_committed(&mut self, committed: bool, now: Instant) {
        let State::Committing(next) = self.state else {
            return;
        };
        self.store_took(committed);
        let ids = std::mem::take(&mut self.committing);
        let cursor = self.committing_cursor.take();
        if committed {
            self.stats.appended += ids.len() as u64;
            for id in &ids {
                self.dedup.insert(id, now);
            }
            self.cursor = cursor;
            if !std::mem::take(&mut self.backing_off) {
                self.retry.reset();
            }
            self.spend(ids.len(), now);
            self.state = match self.rate_spent(now) {
                // Polls wait for the window to end; the cursor is kept.
                Some(end) if self.mode == Some(DeliveryMode::Poll) => {
                    self.logs.push_back(self.rate_pause());
                    State::Paused(Pause::Rate, Some(end.max(next)))
                }
                _ => State::Due(next),
            };
        } else {
            let wait = self.retry.next_failure(false);
            self.state = State::Paused(Pause::StoreDegraded, Some(later(now, wait)));
        }
    }

    /// The store took a commit, or did not: a change from the last is logged.
    fn store_took(&mut self, committed: bool) {
        let failing = !committed;
        if std::mem::replace(&mut self.store_failing, failing) == failing {
            return;
        }
        self.logs.push_back(match committed {
            false => Log::Paused {
                cause: Pause::StoreDegraded,
                detail: "the store did not take the batch".into(),
            },
            true => Log::Resumed {
                cause: Pause::StoreDegraded,
            },
        });
    }

    /// The store passed over `n` records of the last commit, as its stream held them
    /// already (a replay after a crash): counted as duplicates, not appended.
    pub fn passed_over(&mut self, n: usize) {
        let n = n as u64;
        let n = n.min(self.stats.appended);
        self.stats.appended -= n;
        self.stats.duplicate += n;
    }

    /// Holds intake for `cause` (pressure, or the binding's rate), the cursor kept: for a
    /// driver whose own queue fills. A batch being committed is let finish first.
    pub fn pause(&mut self, cause: Pause, detail: &str) {
        if matches!(self.state, State::Due(_) | State::InFlight) {
            self.logs.push_back(Log::Paused {
                cause,
                detail: detail.to_owned(),
            });
            self.state = State::Paused(cause, None);
        }
    }

    /// The receiver's queue of this binding's deliveries is full, and a delivery was refused
    /// for it (`full`), or it has room again: logged paused and resumed with cause
    /// `pressure`, once each way. The binding's own state and schedule are not touched.
    pub fn on_pressure(&mut self, full: bool) {
        if std::mem::replace(&mut self.pressure_paused, full) == full {
            return;
        }
        self.logs.push_back(match full {
            true => Log::Paused {
                cause: Pause::Pressure,
                detail: "the queue of deliveries is full".into(),
            },
            false => Log::Resumed {
                cause: Pause::Pressure,
            },
        });
    }

    /// Lifts a pause for `cause`; intake goes on at once.
    pub fn resume(&mut self, cause: Pause, now: Instant) {
        if self.state == State::Paused(cause, None) {
            self.logs.push_back(Log::Resumed { cause });
            self.state = State::Due(now);
        }
    }

    /// The answer to the request in flight, if it is one and it succeeded; a failure is taken
    /// by [`Binding::on_failure`].
    fn answered<T>(&mut self, answer: Result<T, Failure>, now: Instant, random: u32) -> Option<T> {
        if self.state != State::InFlight {
            return None;
        }
        answer.map_err(|f| self.on_failure(&f, now, random)).ok()
    }

    /// A request failed: refused for good, listed again, or asked again on the retry
    /// schedule (with the webhook rules: `callback_failed`, the next mode, the 5 minute
    /// pause).
    fn on_failure(&mut self, failure: &Failure, now: Instant, random: u32) {
        let method = match self.mode {
            Some(DeliveryMode::Webhook) => mcp_wire::method::EVENTS_SUBSCRIBE,
            _ => mcp_wire::method::EVENTS_POLL,
        };
        let webhook = method == mcp_wire::method::EVENTS_SUBSCRIBE;
        let data = |e: &ErrorObject, key: &str| {
            e.data
                .as_ref()
                .and_then(|d| d.get(key))
                .and_then(Value::as_str)
                .map(log_text)
        };
        let outcome = Outcome::of_failure(failure);
        // Five callback failures move the binding only when they come in a row.
        if !(webhook && failure.code() == Some(code::EVENTS_CALLBACK_ENDPOINT)) {
            self.callback_failures = 0;
        }
        if let Failure::Rpc(e) = failure {
            let refusal = match e.code {
                mcp_wire::code::METHOD_NOT_FOUND => Some(Refusal::MethodNotFound),
                mcp_wire::code::INVALID_PARAMS => Some(Refusal::InvalidArguments),
                code::EVENTS_FORBIDDEN => Some(Refusal::Forbidden),
                code::EVENTS_UNSUPPORTED
                    if data(e, "reason").as_deref() != Some("schema_changed") =>
                {
                    Some(Refusal::NotSupported)
                }
                _ => None,
            };
            if let Some(reason) = refusal {
                self.count_request(method, outcome);
                self.refused_by_server = true;
                return self.refuse(reason, log_text(&e.message));
            }
            if matches!(e.code, code::EVENTS_NOT_FOUND | code::EVENTS_UNSUPPORTED) {
                self.count_request(method, outcome);
                if e.code == code::EVENTS_UNSUPPORTED {
                    self.gap(Gap::SchemaChanged);
                }
                self.state = State::Relist;
                return;
            }
            if webhook && e.code == code::EVENTS_CALLBACK_ENDPOINT {
                self.callback_failures += 1;
                self.logs.push_back(Log::CallbackFailed {
                    reason: data(e, "reason").unwrap_or_default(),
                    url: self
                        .config
                        .callback
                        .as_ref()
                        .map(|c| c.url.clone())
                        .unwrap_or_default(),
                });
                if self.callback_failures >= self.config.limits.callback_failures_max {
                    self.left.push(DeliveryMode::Webhook);
                    if let Some(to) = self.choose_mode() {
                        self.count_request(method, outcome);
                        self.logs.push_back(Log::ModeChanged {
                            from: DeliveryMode::Webhook,
                            to,
                            cause: ModeChange::CallbackFailed,
                        });
                        self.switch(to, now);
                        return;
                    }
                    self.left.pop();
                }
            }
        }
        self.count_request(method, outcome);
        let exhausted = failure.code() == Some(code::EVENTS_RESOURCE_EXHAUSTED);
        let wait = self
            .config
            .limits
            .jitter(self.retry.next_failure(exhausted), random);
        let (code, err, retry_ms) = (failure.code(), log_text(&failure.to_string()), millis(wait));
        if !webhook {
            self.logs.push_back(Log::PollFailed {
                code,
                err,
                retry_ms,
            });
            self.state = State::Due(later(now, wait));
            return;
        }
        // A refusal that may pass, still outstanding after 5 minutes, pauses the binding
        // until the next listing (at most `relist_every` away) or a re-dial: the arm failure
        // says when that is at the latest. `mcp.events.paused` is for intake held (pressure,
        // rate, the store); this holds nothing the server sent.
        let paused = code.is_some() && {
            let since = *self.refused_since.get_or_insert(now);
            now.saturating_duration_since(since) >= self.config.limits.refusal_pause_after
        };
        let retry_ms = match paused {
            true => millis(self.config.limits.relist_every),
            false => retry_ms,
        };
        self.logs.push_back(Log::ArmFailed {
            code,
            err,
            retry_ms,
        });
        self.state = match paused {
            true => State::Paused(Pause::Refusal, None),
            false => State::Due(later(now, wait)),
        };
    }

    /// The first mode the operator lists that the type offers, the client can use, and the
    /// binding has not left.
    fn choose_mode(&self) -> Option<DeliveryMode> {
        self.config.delivery.iter().copied().find(|m| {
            self.offered.contains(m)
                && !self.left.contains(m)
                && match m {
                    DeliveryMode::Poll => true,
                    DeliveryMode::Webhook => self.config.callback.is_some(),
                    DeliveryMode::Push => false,
                }
        })
    }

    fn switch(&mut self, mode: DeliveryMode, now: Instant) {
        self.mode = Some(mode);
        self.armed_logged = false;
        self.callback_failures = 0;
        self.refused_since = None;
        self.retry.reset();
        self.state = State::Due(now);
    }

    fn armed(&mut self, mode: DeliveryMode) {
        if !std::mem::replace(&mut self.armed_logged, true) {
            self.logs.push_back(Log::Armed {
                mode,
                cursor_present: self.cursor.is_some(),
            });
        }
    }

    /// The cursor to store after a page, an answer or a delivery that carried `sent`
    /// (`None`: it carried no cursor member; `Some(None)`: the type has no replay). A cursor
    /// past 4 KiB is not stored, and the binding goes on from now; the occurrence that
    /// carried it is appended, so nothing is called rejected.
    fn next_cursor(&mut self, sent: Option<Option<String>>) -> Option<String> {
        match sent {
            None => self.cursor.clone(),
            Some(Some(c)) if check_cursor(&c, &self.config.limits).is_err() => None,
            Some(Some(c)) => Some(c),
            Some(None) => {
                if !std::mem::replace(&mut self.no_replay_logged, true) {
                    self.gap(Gap::NoReplay);
                }
                None
            }
        }
    }

    /// One occurrence: `Err` when rejected (logged), `Ok(None)` when seen already, else its
    /// record.
    fn intake(
        &mut self,
        o: &EventOccurrence,
        now: Instant,
        wall_ms: i64,
    ) -> Result<Option<Record>, ()> {
        let payload = match check(o, &self.config.limits) {
            Ok(payload) => payload,
            Err(e) => {
                self.stats.rejected += 1;
                self.logs.push_back(Log::Rejected {
                    event_id: log_text(&o.event_id),
                    cause: e.cause(),
                });
                return Err(());
            }
        };
        if self.dedup.contains(&o.event_id, now) {
            self.stats.duplicate += 1;
            return Ok(None);
        }
        let schema_ok = self.payload.as_ref().is_none_or(|v| v.is_valid(&payload));
        if !schema_ok {
            self.stats.schema_mismatch += 1;
            self.logs.push_back(Log::SchemaMismatch {
                event_id: log_text(&o.event_id),
            });
        }
        if let Some(at) = crate::time::unix_millis(&o.timestamp) {
            self.stats.lag_ms = Some(wall_ms.saturating_sub(at));
        }
        let target = Target {
            server: &self.config.server,
            event: &self.config.event,
            stream: &self.config.into,
            subscription: &self.config.key,
        };
        let mut bytes = Vec::with_capacity(o.data.get().len() + 256);
        let id = stream_event(&target, o, schema_ok, &mut bytes);
        Ok(Some(Record {
            id,
            event_id: o.event_id.clone(),
            bytes,
        }))
    }

    fn refuse(&mut self, reason: Refusal, detail: String) {
        self.state = State::Refused(reason);
        self.subscription = None;
        if self.refusal_logged != Some(reason) {
            self.refusal_logged = Some(reason);
            self.logs.push_back(Log::Refused { reason, detail });
        }
    }

    fn gap(&mut self, cause: Gap) {
        *self.stats.gaps.entry(cause).or_default() += 1;
        self.logs.push_back(Log::Gap { cause });
    }

    fn count_request(&mut self, method: &'static str, outcome: Outcome) {
        *self.stats.requests.entry((method, outcome)).or_default() += 1;
    }
}

/// Checks `arguments` against an input schema; the first error, made safe, when they fail.
fn check_arguments(schema: &str, arguments: &Map<String, Value>) -> Result<(), String> {
    let schema: Value = serde_json::from_str(schema).map_err(|e| log_text(&e.to_string()))?;
    let validator =
        jsonschema::validator_for(&schema).map_err(|e| log_text(&format!("schema: {e}")))?;
    let arguments = Value::Object(arguments.clone());
    match validator.iter_errors(&arguments).next() {
        None => Ok(()),
        Some(e) => Err(log_text(&e.to_string())),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
